package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a length of time in a file: a Go duration string ("250ms",
// "10s", "1m30s", "2h") or a bare number of seconds (10, 0.25). Negative
// durations are refused.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Seconds returns d in seconds, as the policy packages take durations.
func (d Duration) Seconds() float64 { return time.Duration(d).Seconds() }

// String returns d as time.Duration writes it ("1m30s", "0s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as String does, so that a dumped config reads back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// ParseDuration reads a Duration as the file format does: a Go duration
// string, not negative.
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 250ms, 10s or 1m30s, got %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %q", s)
	}
	return Duration(d), nil
}

// durationSeconds converts a bare number of seconds.
func durationSeconds(f float64) (Duration, error) {
	switch {
	case f < 0:
		return 0, fmt.Errorf("must not be negative, got %s seconds", ftoa(f))
	case f*1e9 > math.MaxInt64:
		return 0, fmt.Errorf("%s seconds is longer than the longest duration (about 292 years)", ftoa(f))
	}
	return Duration(math.Round(f * 1e9)), nil
}

// Bytes is a size in a file: a whole number of bytes (32768) or a whole
// number with a binary unit, KiB, MiB or GiB ("32KiB", "1MiB"; 1 KiB =
// 1024 bytes). Decimal units (kB, MB) and bare letters (k, M) are refused
// rather than guessed.
type Bytes int64

// Int returns b as an int.
func (b Bytes) Int() int { return int(b) }

// String writes b with the largest unit that divides it: "32KiB", "1MiB",
// "1000".
func (b Bytes) String() string {
	for _, u := range byteUnits {
		if b != 0 && b%Bytes(u.n) == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalText writes b as String does.
func (b Bytes) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

var byteUnits = []struct {
	name string
	n    int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// maxBytes bounds a Bytes value: 1 PiB, far above any buffer or body limit
// and far below overflow.
const maxBytes = 1 << 50

var errBytes = errors.New(`want a size such as 65536, "64KiB", "1MiB" or "1GiB"`)

// ParseBytes reads a Bytes value as the file format does.
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(t, u.name); ok {
			t, mult = strings.TrimSpace(n), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w, got %q", errBytes, s)
	case n < 0:
		return 0, fmt.Errorf("must not be negative, got %q", s)
	case n > maxBytes/mult:
		return 0, fmt.Errorf("%q is more than 1 PiB", s)
	}
	return Bytes(n * mult), nil
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
