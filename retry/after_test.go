package retry

import (
	"testing"
	"time"
)

// now for the Retry-After tests: Sunday 30 November 2025, 12:00:00 UTC.
var afterNow = time.Date(2025, time.November, 30, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	const year = 365 * 24 * time.Hour
	for _, c := range []struct {
		v    string
		now  time.Time
		want time.Duration
		ok   bool
	}{
		// delay-seconds
		{"120", afterNow, 120 * time.Second, true},
		{"0", afterNow, 0, true},
		{"007", afterNow, 7 * time.Second, true},
		{" 5\t", afterNow, 5 * time.Second, true},
		{"31535999", afterNow, year - time.Second, true},
		{"31536000", afterNow, year, true},
		{"31536001", afterNow, year, true},
		{"99999999999999999999999999999", afterNow, year, true},
		// HTTP-dates, the three forms
		{"Sun, 30 Nov 2025 12:02:00 GMT", afterNow, 120 * time.Second, true},
		{"Sunday, 30-Nov-25 12:00:30 GMT", afterNow, 30 * time.Second, true},
		{"Sun Nov 30 12:00:10 2025", afterNow, 10 * time.Second, true},
		{"  Sun, 30 Nov 2025 12:02:00 GMT ", afterNow, 120 * time.Second, true},
		{"Sun, 30 Nov 2025 12:02:00 GMT", afterNow.Add(500 * time.Millisecond), 119500 * time.Millisecond, true},
		{"Sun, 30 Nov 2025 12:00:00 GMT", afterNow, 0, true},       // now
		{"Sat, 29 Nov 2025 12:00:00 GMT", afterNow, 0, true},       // past
		{"Fri, 31 Dec 9999 23:59:59 GMT", afterNow, year, true},    // far future
		{"Thu, 01 Jan 1970 00:00:00 GMT", afterNow, 0, true},       // far past
		{"Sun, 30 Nov 2025 12:02:00 GMT", time.Time{}, year, true}, // now at year 1
		{"Sun, 30 Nov 2025 12:02:00 GMT", afterNow.AddDate(500, 0, 0), 0, true},
		// ignored
		{"", afterNow, 0, false},
		{" \t ", afterNow, 0, false},
		{"-1", afterNow, 0, false},
		{"+1", afterNow, 0, false},
		{"1.5", afterNow, 0, false},
		{"1 2", afterNow, 0, false},
		{"1,2", afterNow, 0, false},
		{"5s", afterNow, 0, false},
		{"0x10", afterNow, 0, false},
		{"1e3", afterNow, 0, false},
		{"\uff15", afterNow, 0, false}, // a fullwidth 5 is not an ASCII digit
		{"5\r\n", afterNow, 0, false},
		{"Sun, 30 Nov 2025 12:02:00 UTC", afterNow, 0, false},
		{"Sun, 30 Nov 2025 12:02:00 GMT, 5", afterNow, 0, false},
		{"2025-11-30T12:02:00Z", afterNow, 0, false},
		{"tomorrow", afterNow, 0, false},
	} {
		got, ok := ParseRetryAfter(c.v, c.now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q, %v) = %v, %v, want %v, %v", c.v, c.now, got, ok, c.want, c.ok)
		}
	}
}

func TestParsePushback(t *testing.T) {
	for _, c := range []struct {
		v         string
		want      time.Duration
		retry, ok bool
	}{
		{"0", 0, true, true},
		{"250", 250 * time.Millisecond, true, true},
		{" 250\t", 250 * time.Millisecond, true, true},
		{"0001", time.Millisecond, true, true},
		{"2147483647", 2147483647 * time.Millisecond, true, true}, // the largest signed 32-bit value
		{"002147483647", 2147483647 * time.Millisecond, true, true},
		// the server says: do not retry
		{"-1", 0, false, true},
		{"2147483648", 0, false, true}, // beyond 32 bits: unparseable
		{"31536000000", 0, false, true},
		{"9999999999999999999999999", 0, false, true},
		{"-0", 0, false, true},
		{"-250", 0, false, true},
		{"+5", 0, false, true},
		{"1.5", 0, false, true},
		{"5ms", 0, false, true},
		{"1e3", 0, false, true},
		{"abc", 0, false, true},
		{"1 2", 0, false, true},
		{"\uff15", 0, false, true},
		// no pushback
		{"", 0, false, false},
		{" \t", 0, false, false},
	} {
		got, retry, ok := ParsePushback(c.v)
		if got != c.want || retry != c.retry || ok != c.ok {
			t.Errorf("ParsePushback(%q) = %v, %v, %v, want %v, %v, %v", c.v, got, retry, ok, c.want, c.retry, c.ok)
		}
	}
}

func TestParseAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { ParseRetryAfter(" 120 ", afterNow) }); n != 0 {
		t.Errorf("ParseRetryAfter(delay-seconds): %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { ParsePushback("250") }); n != 0 {
		t.Errorf("ParsePushback: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { ParsePushback("-1") }); n != 0 {
		t.Errorf("ParsePushback(-1): %v allocations, want 0", n)
	}
}

func BenchmarkParseRetryAfterSeconds(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ParseRetryAfter("120", afterNow)
	}
}

func BenchmarkParseRetryAfterDate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ParseRetryAfter("Sun, 30 Nov 2025 12:02:00 GMT", afterNow)
	}
}

func BenchmarkParsePushback(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ParsePushback("250")
	}
}
