package deadline

import (
	"errors"
	"testing"
	"time"
)

// FuzzParseTimeout: ParseTimeout never panics; an error is a *SyntaxError
// with a zero duration; an accepted value is not negative, and writing it
// back gives at most 9 bytes that parse to at most the same duration (never
// more time than was received).
func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{
		"1H", "2M", "3S", "4m", "5u", "6n", "0n", "99999999H", "99999999M", "2562047H", "2562048H",
		"999999999n", "00000001S", " 250m\t", "", " ", "S", "5", "5h", "+5S", "-5S", "5 S", "1.5S",
		"5S\r", "5\xb5", "\uff15S", "0x10S", "99999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTimeout(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) || se.Reason == "" || d != 0 {
				t.Fatalf("ParseTimeout(%q) = %v, %#v", s, d, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseTimeout(%q) = %v, negative", s, d)
		}
		out := FormatTimeout(d)
		if len(out) > 9 {
			t.Fatalf("FormatTimeout(%v) = %q, longer than 8 digits and a unit", d, out)
		}
		back, err := ParseTimeout(out)
		if err != nil {
			t.Fatalf("ParseTimeout(FormatTimeout(%v) = %q): %v", d, out, err)
		}
		if back > d {
			t.Fatalf("%q → %v → %q → %v: grew", s, d, out, back)
		}
		if d-back >= time.Hour {
			t.Fatalf("%q → %v → %q → %v: lost more than the coarsest unit", s, d, out, back)
		}
	})
}
