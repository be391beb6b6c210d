package deadline

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// t0 is a fixed instant: tests never read the clock for what they assert.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

const maxDur = time.Duration(math.MaxInt64)

func TestParseTimeout(t *testing.T) {
	ok := []struct {
		in   string
		want time.Duration
	}{
		{"1H", time.Hour},
		{"2M", 2 * time.Minute},
		{"3S", 3 * time.Second},
		{"4m", 4 * time.Millisecond},
		{"5u", 5 * time.Microsecond},
		{"6n", 6 * time.Nanosecond},
		{"0S", 0},
		{"0n", 0},
		{"00000000H", 0},
		{"00000001S", time.Second},                // leading zeros count towards the 8 digits
		{"99999999n", 99999999 * time.Nanosecond}, // 8 digits: the most allowed
		{"99999999u", 99999999 * time.Microsecond},
		{"99999999m", 99999999 * time.Millisecond},
		{"99999999S", 99999999 * time.Second},
		{"99999999M", 99999999 * time.Minute}, // 6.0e18 ns: still fits
		{"2562047H", 2562047 * time.Hour},     // the largest whole number of hours that fits
		{"2562048H", maxDur},                  // one more saturates
		{"99999999H", maxDur},
		{" 5S", 5 * time.Second},
		{"5S\t", 5 * time.Second},
		{" \t250m \t ", 250 * time.Millisecond},
	}
	for _, c := range ok {
		got, err := ParseTimeout(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseTimeout(%q) = %v, %v; want %v, nil", c.in, got, err, c.want)
		}
	}

	bad := []struct{ in, reason string }{
		{"", "empty"},
		{" \t ", "empty"},
		{"S", "no digits"},
		{" m ", "no digits"},
		{"5", "missing unit"},
		{"123456789", "missing unit"},
		{"999999999n", "more than 8 digits"},
		{"000000001S", "more than 8 digits"},
		{"5h", "unknown unit 'h'"}, // units are case-sensitive: hours are H
		{"5s", "unknown unit 's'"},
		{"5N", "unknown unit 'N'"},
		{"5x", "unknown unit 'x'"},
		{"5S\r", `unknown unit '\r'`}, // CR is not optional whitespace
		{"5\xb5", `unknown unit '\xb5'`},
		{"+5S", "sign not allowed"},
		{"-5S", "sign not allowed"},
		{"-0n", "sign not allowed"},
		{"5 S", "space inside the value"},
		{"5\tS", "space inside the value"},
		{"1.5S", "invalid character '.'"},
		{"5SS", "invalid character 'S'"},
		{"0x10S", "invalid character 'x'"},
		{"\uff15S", `invalid character '\xef'`}, // a full-width digit is not an ASCII digit
		{"abcdefghijS", "invalid character 'a'"},
	}
	for _, c := range bad {
		got, err := ParseTimeout(c.in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseTimeout(%q) = %v, %v; want a *SyntaxError", c.in, got, err)
			continue
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseTimeout(%q): error %v does not wrap ErrSyntax", c.in, err)
		}
		if got != 0 || se.Reason != c.reason || se.Value != c.in {
			t.Errorf("ParseTimeout(%q) = %v, {Value %q, Reason %q}; want 0, {%q, %q}",
				c.in, got, se.Value, se.Reason, c.in, c.reason)
		}
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := ParseTimeout("5h")
	if got, want := err.Error(), `deadline: bad timeout "5h": unknown unit 'h'`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	long := strings.Repeat("9", 100) + "S"
	_, err = ParseTimeout(long)
	want := `deadline: bad timeout "` + strings.Repeat("9", 32) + `"…: more than 8 digits`
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if se := err.(*SyntaxError); se.Value != long {
		t.Errorf("Value shortened to %q; only Error should shorten it", se.Value)
	}
}

func TestAppendTimeout(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{0, "0n"},
		{-1, "0n"},
		{math.MinInt64, "0n"},
		{1, "1n"},
		{99999999, "99999999n"},
		{100000000, "100000u"}, // 100 ms no longer fits in 8 digits of ns
		{100000999, "100000u"}, // rounded down, never up
		{time.Second, "1000000u"},
		{99999999999, "99999999u"},
		{100 * time.Second, "100000m"},
		{time.Hour, "3600000m"},
		{100000000 * time.Millisecond, "100000S"},
		{100000000*time.Second - 1, "99999999S"},
		{100000000 * time.Second, "1666666M"}, // 1666666.67 minutes, rounded down
		{99999999 * time.Minute, "99999999M"},
		{100000000 * time.Minute, "1666666H"},
		{maxDur, "2562047H"},
	}
	for _, c := range cases {
		if got := string(AppendTimeout(nil, c.d)); got != c.want {
			t.Errorf("AppendTimeout(nil, %d) = %q, want %q", int64(c.d), got, c.want)
		}
		if got := FormatTimeout(c.d); got != c.want {
			t.Errorf("FormatTimeout(%d) = %q, want %q", int64(c.d), got, c.want)
		}
	}
	// Appends, keeping what b held.
	if got := string(AppendTimeout([]byte("x="), 5*time.Second)); got != "x=5000000u" {
		t.Errorf("AppendTimeout(\"x=\", 5s) = %q", got)
	}
}

// testUnits is the grpc-timeout unit table written out again, independently
// of the package's, finest first.
var testUnits = []struct {
	sym byte
	len time.Duration
}{{'n', 1}, {'u', 1e3}, {'m', 1e6}, {'S', 1e9}, {'M', 60e9}, {'H', 3600e9}}

// For random durations: the written value has at most 8 digits, parses back
// to at most d and to more than d minus one unit, and uses the finest unit in
// which d fits.
func TestAppendTimeoutRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		d := time.Duration(r.Uint64() >> (1 + r.IntN(63))) // every magnitude, from 0 to MaxInt64
		if i == 0 {
			d = maxDur
		}
		s := FormatTimeout(d)
		if n := len(s) - 1; n < 1 || n > 8 {
			t.Fatalf("FormatTimeout(%d) = %q: %d digits", int64(d), s, n)
		}
		ui := strings.IndexByte("numSMH", s[len(s)-1])
		if ui < 0 {
			t.Fatalf("FormatTimeout(%d) = %q: bad unit", int64(d), s)
		}
		unit := testUnits[ui].len
		got, err := ParseTimeout(s)
		if err != nil {
			t.Fatalf("ParseTimeout(FormatTimeout(%d) = %q): %v", int64(d), s, err)
		}
		if got > d || d-got >= unit {
			t.Fatalf("d = %d: %q parses to %d, want within (d-%v, d]", int64(d), s, int64(got), unit)
		}
		if ui > 0 && d/testUnits[ui-1].len <= MaxValue {
			t.Fatalf("d = %d written as %q, but fits in unit %c", int64(d), s, testUnits[ui-1].sym)
		}
	}
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestFromHeader(t *testing.T) {
	cases := []struct {
		name   string
		h      http.Header
		want   time.Duration
		ok     bool
		reason string // "" for no error
	}{
		{"absent", header(), 0, false, ""},
		{"nil header", nil, 0, false, ""},
		{"other header only", header("Grpc-Timeout", "1S"), 0, false, ""},
		{"valid", header(HTTPHeader, "250m"), 250 * time.Millisecond, true, ""},
		{"lower-case name, canonicalized by Add", header("spillway-timeout", "2S"), 2 * time.Second, true, ""},
		{"whitespace", header(HTTPHeader, " 3S "), 3 * time.Second, true, ""},
		{"zero", header(HTTPHeader, "0n"), 0, true, ""},
		{"empty value", header(HTTPHeader, ""), 0, true, "empty"},
		{"malformed", header(HTTPHeader, "5s"), 0, true, "unknown unit 's'"},
		{"Go duration syntax", header(HTTPHeader, "1.5s"), 0, true, "unknown unit 's'"},
		{"two lines", header(HTTPHeader, "1S", HTTPHeader, "2S"), 0, true, "repeated"},
		{"two lines, same value", header(HTTPHeader, "1S", HTTPHeader, "1S"), 0, true, "repeated"},
		{"comma list", header(HTTPHeader, "1S, 2S"), 0, true, "repeated"},
	}
	for _, c := range cases {
		d, ok, err := FromHeader(c.h)
		if d != c.want || ok != c.ok {
			t.Errorf("%s: FromHeader = %v, %v, %v; want %v, %v", c.name, d, ok, err, c.want, c.ok)
		}
		checkReason(t, c.name, err, c.reason)
	}
}

func checkReason(t *testing.T, name string, err error, reason string) {
	t.Helper()
	if reason == "" {
		if err != nil {
			t.Errorf("%s: unexpected error %v", name, err)
		}
		return
	}
	var se *SyntaxError
	if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) || se.Reason != reason {
		t.Errorf("%s: error %v, want a *SyntaxError with reason %q", name, err, reason)
	}
}

func TestFromEnvoyHeader(t *testing.T) {
	const key = "x-envoy-expected-rq-timeout-ms"
	cases := []struct {
		name   string
		h      http.Header
		want   time.Duration
		ok     bool
		reason string
	}{
		{"absent", header(HTTPHeader, "1S"), 0, false, ""},
		{"valid", header(key, "1500"), 1500 * time.Millisecond, true, ""},
		{"whitespace", header(key, "\t15 "), 15 * time.Millisecond, true, ""},
		{"zero", header(key, "0"), 0, true, ""},
		{"10 digits", header(key, "9999999999"), 9999999999 * time.Millisecond, true, ""},
		{"11 digits", header(key, "12345678901"), 0, true, "more than 10 digits"},
		{"empty", header(key, " "), 0, true, "empty"},
		{"negative", header(key, "-1"), 0, true, "sign not allowed"},
		{"fraction", header(key, "1.5"), 0, true, "invalid character '.'"},
		{"unit", header(key, "15ms"), 0, true, "invalid character 'm'"},
		{"repeated", header(key, "1", key, "2"), 0, true, "repeated"},
		{"comma list", header(key, "1,2"), 0, true, "repeated"},
	}
	for _, c := range cases {
		d, ok, err := FromEnvoyHeader(c.h)
		if d != c.want || ok != c.ok {
			t.Errorf("%s: FromEnvoyHeader = %v, %v, %v; want %v, %v", c.name, d, ok, err, c.want, c.ok)
		}
		checkReason(t, c.name, err, c.reason)
	}
}

func TestRemaining(t *testing.T) {
	if d, ok := Remaining(context.Background(), t0); d != 0 || ok {
		t.Errorf("Remaining(Background) = %v, %v; want 0, false", d, ok)
	}
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(3*time.Second))
	defer cancel()
	for _, c := range []struct {
		now  time.Time
		want time.Duration
	}{
		{t0, 3 * time.Second},
		{t0.Add(time.Second), 2 * time.Second},
		{t0.Add(3 * time.Second), 0},
		{t0.Add(5 * time.Second), -2 * time.Second},
	} {
		if d, ok := Remaining(ctx, c.now); d != c.want || !ok {
			t.Errorf("Remaining at t0%+v = %v, %v; want %v, true", c.now.Sub(t0), d, ok, c.want)
		}
	}
}

func TestSetHeader(t *testing.T) {
	withDeadline := func(dl time.Time) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), dl)
		t.Cleanup(cancel)
		return ctx
	}
	cases := []struct {
		name     string
		ctx      context.Context
		reserve  time.Duration
		want     time.Duration
		ok       bool
		wantHead []string // nil: header absent
	}{
		{"no deadline removes the header", context.Background(), 0, 0, false, nil},
		{"budget less reserve", withDeadline(t0.Add(2 * time.Second)), 100 * time.Millisecond,
			1900 * time.Millisecond, true, []string{"1900000u"}},
		{"no reserve", withDeadline(t0.Add(2 * time.Second)), 0, 2 * time.Second, true, []string{"2000000u"}},
		{"negative reserve counts as 0", withDeadline(t0.Add(2 * time.Second)), -time.Hour,
			2 * time.Second, true, []string{"2000000u"}},
		{"rounded down, and the rounded value returned", withDeadline(t0.Add(2*time.Second + 999)), 0,
			2 * time.Second, true, []string{"2000000u"}},
		{"budget equal to reserve is spent", withDeadline(t0.Add(time.Second)), time.Second, 0, true, []string{"0n"}},
		{"deadline passed", withDeadline(t0.Add(-time.Second)), 0, 0, true, []string{"0n"}},
		{"deadline far in the past (Sub saturates) with a reserve", withDeadline(time.Time{}), time.Second,
			0, true, []string{"0n"}},
		{"far future", withDeadline(t0.Add(2000 * 24 * time.Hour)), 0, 2880000 * time.Minute, true, []string{"2880000M"}},
	}
	for _, c := range cases {
		h := header(HTTPHeader, "7S", HTTPHeader, "8S", "Other", "kept")
		d, ok := SetHeader(h, c.ctx, t0, c.reserve)
		if d != c.want || ok != c.ok {
			t.Errorf("%s: SetHeader = %v, %v; want %v, %v", c.name, d, ok, c.want, c.ok)
		}
		got := h[HTTPHeader]
		if strings.Join(got, "|") != strings.Join(c.wantHead, "|") || (got == nil) != (c.wantHead == nil) {
			t.Errorf("%s: header = %q, want %q", c.name, got, c.wantHead)
		}
		if h.Get("Other") != "kept" {
			t.Errorf("%s: other header lost", c.name)
		}
		if ok {
			// What the callee reads is what SetHeader said it wrote.
			if back, _, err := FromHeader(h); err != nil || back != d {
				t.Errorf("%s: callee reads %v, %v; SetHeader returned %v", c.name, back, err, d)
			}
		}
	}
}

func TestWithBudget(t *testing.T) {
	bg := context.Background()
	deadlineOf := func(ctx context.Context) time.Time {
		t.Helper()
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		return dl
	}

	ctx, cancel := WithBudget(bg, t0, 5*time.Second)
	defer cancel()
	if got, want := deadlineOf(ctx), t0.Add(5*time.Second); !got.Equal(want) {
		t.Errorf("deadline = %v, want %v", got, want)
	}

	early, cancelEarly := context.WithDeadline(bg, t0.Add(time.Second))
	defer cancelEarly()
	ctx, cancel = WithBudget(early, t0, 5*time.Second)
	defer cancel()
	if got, want := deadlineOf(ctx), t0.Add(time.Second); !got.Equal(want) {
		t.Errorf("under an earlier parent deadline: %v, want the parent's %v", got, want)
	}

	late, cancelLate := context.WithDeadline(bg, t0.Add(time.Minute))
	defer cancelLate()
	ctx, cancel = WithBudget(late, t0, 5*time.Second)
	defer cancel()
	if got, want := deadlineOf(ctx), t0.Add(5*time.Second); !got.Equal(want) {
		t.Errorf("under a later parent deadline: %v, want %v", got, want)
	}

	ctx, cancel = WithBudget(bg, t0, maxDur)
	defer cancel()
	if got := deadlineOf(ctx); !got.After(t0) {
		t.Errorf("WithBudget(MaxInt64) deadline %v is not after now (wrapped?)", got)
	}

	// A spent budget is done at once. now is the real time here only because
	// context compares the deadline with the real clock; nothing is timed.
	ctx, cancel = WithBudget(bg, time.Now(), 0)
	defer cancel()
	select {
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("Err = %v, want DeadlineExceeded", ctx.Err())
		}
	default:
		t.Error("WithBudget(now, 0) is not done")
	}
}

func TestFeasible(t *testing.T) {
	const ms = time.Millisecond
	cases := []struct {
		remaining, wait, service time.Duration
		want                     bool
	}{
		{0, 0, 0, false},
		{-ms, 0, 0, false},
		{math.MinInt64, 0, 0, false},
		{1, 0, 0, true},
		{100 * ms, 30 * ms, 70 * ms, false}, // would finish exactly at the deadline
		{100*ms + 1, 30 * ms, 70 * ms, true},
		{100 * ms, 50 * ms, 60 * ms, false},
		{100 * ms, 0, 99 * ms, true},
		{100 * ms, 99 * ms, 0, true},
		{100 * ms, -time.Hour, 70 * ms, true}, // a negative estimate counts as 0
		{100 * ms, 70 * ms, -time.Hour, true},
		{100 * ms, 120 * ms, -time.Hour, false},
		{maxDur, maxDur, 1, false}, // the sum saturates instead of wrapping negative
		{maxDur, maxDur, maxDur, false},
		{maxDur, 1, 1, true},
		{ms, math.MinInt64, math.MinInt64, true},
	}
	for _, c := range cases {
		if got := Feasible(c.remaining, c.wait, c.service); got != c.want {
			t.Errorf("Feasible(%d, %d, %d) = %v, want %v",
				int64(c.remaining), int64(c.wait), int64(c.service), got, c.want)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	h := header(HTTPHeader, "250m")
	buf := make([]byte, 0, 16)
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(time.Second))
	defer cancel()
	for name, f := range map[string]func(){
		"ParseTimeout":  func() { _, _ = ParseTimeout(" 12345678m ") },
		"AppendTimeout": func() { buf = AppendTimeout(buf[:0], 1234567890123) },
		"FromHeader":    func() { _, _, _ = FromHeader(h) },
		"Remaining":     func() { _, _ = Remaining(ctx, t0) },
		"Feasible":      func() { _ = Feasible(time.Second, time.Millisecond, time.Millisecond) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

func BenchmarkParseTimeout(b *testing.B) {
	in := []string{"250m", "99999999n", "1H", " 30S "}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := ParseTimeout(in[i&3]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendTimeout(b *testing.B) {
	ds := []time.Duration{250 * time.Millisecond, 37, time.Hour, 1234567890123}
	buf := make([]byte, 0, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = AppendTimeout(buf[:0], ds[i&3])
	}
}

func BenchmarkFromHeader(b *testing.B) {
	h := header(HTTPHeader, "250m")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := FromHeader(h); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkSetHeader(b *testing.B) {
	ctx, cancel := context.WithDeadline(context.Background(), t0.Add(time.Second))
	defer cancel()
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		SetHeader(h, ctx, t0, 5*time.Millisecond)
	}
}
