package httpwire

import (
	"bytes"
	"testing"
)

// TestWordScansStopAtEveryByte: for every byte value at every position of
// a 19-byte line (two words and a tail), the word-at-a-time scans stop
// exactly where a byte-by-byte scan does; and a line of 0x80-0xFF bytes
// around it does not confuse them.
func TestWordScansStopAtEveryByte(t *testing.T) {
	for _, fill := range []byte{'a', 0x80, 0xff, '!'} {
		for c := 0; c < 256; c++ {
			for pos := 0; pos < 19; pos++ {
				b := bytes.Repeat([]byte{fill}, 19)
				b[pos] = byte(c)
				wantValue, wantTarget := len(b), len(b)
				if !valueChar[c] {
					wantValue = pos
				}
				if !targetChar[c] {
					wantTarget = pos
				}
				if got := valueEnd(b, 0); got != wantValue {
					t.Fatalf("valueEnd(%q) = %d, want %d", b, got, wantValue)
				}
				if got := targetEnd(b, 0); got != wantTarget {
					t.Fatalf("targetEnd(%q) = %d, want %d", b, got, wantTarget)
				}
				// From an offset, as the parsers call them.
				if got := valueEnd(b, 3); pos >= 3 && got != wantValue || pos < 3 && got != len(b) {
					t.Fatalf("valueEnd(%q, 3) = %d", b, got)
				}
			}
		}
	}
	// Tabs are value bytes but flagged by the word test: the scan must
	// carry on past them.
	b := []byte("a\tb\tc\td\te\tf\tg\th\ti\tj\tk\r\n")
	if got := valueEnd(b, 0); got != len(b)-2 {
		t.Fatalf("valueEnd over tabs = %d, want %d", got, len(b)-2)
	}
}
