package retry

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// trimmed is an independent OWS trim for the oracles below.
func trimmed(s string) string { return strings.Trim(s, " \t") }

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// digitsOracle returns the value of an all-digits string, saturated at
// limit, by strconv (an overflow saturates too).
func digitsOracle(s string, limit uint64) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) || v > limit {
		return limit
	}
	return v
}

// FuzzParseRetryAfter: never panics; a rejected value gives 0; an accepted
// one is within [0, MaxServerDelay]. An all-digits value (after OWS) is
// accepted and equals strconv's reading, saturated; an accepted date is
// what http.ParseTime reads, less now, clamped. Writing an accepted delay
// back as delay-seconds, or as an IMF-fixdate, reads the same delay again.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"120", "0", "007", " 5\t", "31536000", "31536001", "99999999999999999999999", "", " ", "-1", "+1", "1.5",
		"Sun, 30 Nov 2025 12:02:00 GMT", "Sunday, 30-Nov-25 12:00:30 GMT", "Sun Nov 30 12:00:10 2025",
		"Sat, 29 Nov 2025 12:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Sun, 30 Nov 2025 12:02:00 UTC", "\xff",
	} {
		f.Add(s, int64(1764504000)) // afterNow
	}
	f.Fuzz(func(t *testing.T, s string, nowSec int64) {
		nowSec %= 1 << 40 // keep now within years ±35000, where Unix is exact
		now := time.Unix(nowSec, 0).UTC()
		d, ok := ParseRetryAfter(s, now)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, false: want 0", s, d)
			}
			if allDigits(trimmed(s)) {
				t.Fatalf("ParseRetryAfter(%q) rejected delay-seconds", s)
			}
			return
		}
		if d < 0 || d > MaxServerDelay {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, %v]", s, d, MaxServerDelay)
		}
		if v := trimmed(s); allDigits(v) {
			want := time.Duration(digitsOracle(v, uint64(MaxServerDelay/time.Second))) * time.Second
			if d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, strconv says %v", s, d, want)
			}
		} else {
			at, err := http.ParseTime(v)
			if err != nil {
				t.Fatalf("ParseRetryAfter(%q) accepted what http.ParseTime refuses: %v", s, err)
			}
			want := min(max(at.Sub(now), 0), MaxServerDelay)
			if d != want {
				t.Fatalf("ParseRetryAfter(%q) at %v = %v, want %v", s, now, d, want)
			}
		}
		// Round trips.
		secs := d.Truncate(time.Second)
		if back, ok := ParseRetryAfter(strconv.FormatInt(int64(secs/time.Second), 10), now); !ok || back != secs {
			t.Fatalf("%v as delay-seconds read back as %v, %v", secs, back, ok)
		}
		date := now.Add(secs).Format(http.TimeFormat)
		if back, ok := ParseRetryAfter(date, now); !ok || back != secs {
			t.Fatalf("%v as the date %q read back as %v, %v", secs, date, back, ok)
		}
	})
}

// FuzzRetryAfterForms writes a delay in each of the three date forms and
// as delay-seconds, and reads it back.
func FuzzRetryAfterForms(f *testing.F) {
	f.Add(int64(1764504000), uint32(0))
	f.Add(int64(1764504000), uint32(120))
	f.Add(int64(0), uint32(31536000))
	f.Add(int64(-100), uint32(4000000000))
	f.Fuzz(func(t *testing.T, nowSec int64, delay uint32) {
		// RFC 850 has a two-digit year, read as 1969–2068: keep the date
		// there (now in [1970, 2030), the delay below 38 years).
		nowSec = 1 + (nowSec%(60*365*86400)+60*365*86400)%(60*365*86400)
		now := time.Unix(nowSec, 0).UTC()
		delay %= 38 * 365 * 86400
		want := min(time.Duration(delay)*time.Second, MaxServerDelay)
		at := now.Add(time.Duration(delay) * time.Second)
		for _, v := range []string{
			strconv.FormatUint(uint64(delay), 10),
			at.Format(http.TimeFormat),
			at.Format("Monday, 02-Jan-06 15:04:05 GMT"),
			at.Format(time.ANSIC),
		} {
			if d, ok := ParseRetryAfter(v, now); !ok || d != want {
				t.Fatalf("ParseRetryAfter(%q) at %v = %v, %v, want %v", v, now, d, ok, want)
			}
		}
	})
}

// FuzzParsePushback: never panics; absent only for an empty (OWS) value;
// retry exactly for an all-digits value that strconv reads as a signed
// 32-bit integer, and then with that many milliseconds; "do not retry"
// gives 0. An accepted delay written back reads the same.
func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{
		"0", "250", " 250\t", "2147483647", "2147483648", "99999999999999999999", "-1", "-0", "+5", "1.5", "abc", "", " ", "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, retry, ok := ParsePushback(s)
		v := trimmed(s)
		n, err := strconv.ParseInt(v, 10, 32)
		switch {
		case ok != (v != ""):
			t.Fatalf("ParsePushback(%q): ok = %v", s, ok)
		case retry != (allDigits(v) && err == nil):
			t.Fatalf("ParsePushback(%q): retry = %v, strconv says %v, %v", s, retry, n, err)
		case !retry && d != 0:
			t.Fatalf("ParsePushback(%q) = %v without retry", s, d)
		case retry && d != time.Duration(n)*time.Millisecond:
			t.Fatalf("ParsePushback(%q) = %v, strconv says %v ms", s, d, n)
		}
		if !retry {
			return
		}
		if back, retry, ok := ParsePushback(strconv.FormatInt(d.Milliseconds(), 10)); back != d || !retry || !ok {
			t.Fatalf("%v written back read as %v, %v, %v", d, back, retry, ok)
		}
	})
}
