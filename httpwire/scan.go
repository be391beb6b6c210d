package httpwire

import "encoding/binary"

// Eight bytes at a time: a word's bytes are tested together (SWAR), and
// only a word that may hold a stopping byte is scanned byte by byte. The
// word test never misses a stopping byte (a borrow only flags bytes above
// a byte that is flagged already), so skipping unflagged words is exact.
const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// below flags the bytes of w that are below c (c <= 0x80); bytes of 0x80
// and above are never flagged.
func below(w uint64, c byte) uint64 { return (w - uint64(c)*lsbs) & ^w & msbs }

// equal flags the bytes of w equal to c.
func equal(w uint64, c byte) uint64 {
	x := w ^ uint64(c)*lsbs
	return (x - lsbs) & ^x & msbs
}

// valueEnd returns the index of the first byte at or after b[i] that may
// not be in a field value (a CTL other than HTAB, or DEL), or len(b).
func valueEnd(b []byte, i int) int {
	for {
		for len(b)-i >= 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			if below(w, ' ')|equal(w, 0x7f) != 0 {
				break
			}
			i += 8
		}
		end := min(i+8, len(b))
		for i < end && valueChar[b[i]] {
			i++
		}
		if i < end || i == len(b) {
			return i
		}
	}
}

// targetEnd returns the index of the first byte at or after b[i] that may
// not be in a request-target (a CTL, SP or DEL), or len(b).
func targetEnd(b []byte, i int) int {
	for {
		for len(b)-i >= 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			if below(w, '!')|equal(w, 0x7f) != 0 {
				break
			}
			i += 8
		}
		end := min(i+8, len(b))
		for i < end && targetChar[b[i]] {
			i++
		}
		if i < end || i == len(b) {
			return i
		}
	}
}
