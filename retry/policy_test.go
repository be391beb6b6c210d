package retry

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/quick"

	"github.com/spillwayhq/spillway/rng"
)

func mustPolicy(t testing.TB, p Policy) *Policy {
	t.Helper()
	q, err := NewPolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// One decision per row, worked out by hand. Backoff: NoJitter with Base 1,
// so the delay after N attempts is 2^N (capped at 30), unless noted.
func TestNextTable(t *testing.T) {
	exact := Backoff{Base: 1, Cap: 30, Jitter: NoJitter}
	year := float64(365 * 24 * 3600)
	for i, c := range []struct {
		p         Policy
		a         Attempt
		u         float64
		wantDelay float64
		want      Verdict
		draws     int
	}{
		{Policy{Backoff: exact}, Attempt{N: 1, After: -1}, 0, 2, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 2, After: -1}, 0, 4, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 3, After: -1}, 0, 0, StopAttempts, 0}, // default 3 attempts
		{Policy{MaxAttempts: 5, Backoff: exact}, Attempt{N: 4, After: -1}, 0, 16, Retry, 0},
		{Policy{MaxAttempts: 5, Backoff: exact}, Attempt{N: 5, After: -1}, 0, 0, StopAttempts, 0},
		{Policy{MaxAttempts: 1, Backoff: exact}, Attempt{N: 1, After: -1}, 0, 0, StopAttempts, 0},
		{Policy{MaxAttempts: -4, Backoff: exact}, Attempt{N: 1, After: -1}, 0, 0, StopAttempts, 0}, // negative: 1
		{Policy{Backoff: exact}, Attempt{N: 1, After: -1, NoRetry: true}, 0, 0, StopServer, 0},
		{Policy{Backoff: exact}, Attempt{N: 9, After: 5, NoRetry: true}, 0, 0, StopServer, 0}, // server first
		// The server's delay wins when longer.
		{Policy{Backoff: exact}, Attempt{N: 1, After: 10}, 0, 10, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, After: 2}, 0, 2, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, After: 1.5}, 0, 2, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, After: 0}, 0, 2, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, After: math.NaN()}, 0, 2, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, After: math.Inf(1)}, 0, year, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, After: 1e300}, 0, year, Retry, 0},
		// Deadlines: Now 100, delay 2, Expected 0.5 → the retry ends at 102.5.
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: 102.5, Expected: 0.5, After: -1}, 0, 0, StopDeadline, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: 102.51, Expected: 0.5, After: -1}, 0, 2, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: 102, After: -1}, 0, 0, StopDeadline, 0},           // Expected unknown: starts at the deadline
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: 102.01, Expected: -1, After: -1}, 0, 2, Retry, 0}, // negative Expected counts as 0
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: 102.01, Expected: math.NaN(), After: -1}, 0, 2, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: 104, After: 5}, 0, 0, StopDeadline, 0}, // the server's delay counts
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: 99, After: -1}, 0, 0, StopDeadline, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: 0, Expected: 1e9, After: -1}, 0, 2, Retry, 0}, // 0: none
		{Policy{Backoff: exact}, Attempt{N: 1, Now: 100, Deadline: math.NaN(), After: -1}, 0, 2, Retry, 0},
		{Policy{Backoff: exact}, Attempt{N: 1, Now: -10, Deadline: -7.5, After: -1}, 0, 2, Retry, 0}, // a negative deadline is a deadline
		// Jitter: one draw, only when the policy gets that far.
		{Policy{Backoff: Backoff{Base: 0.5}}, Attempt{N: 2, After: -1}, 0.5, 1, Retry, 1}, // 0.5 · 0.5·2²
		{Policy{Backoff: Backoff{Base: 0.5}}, Attempt{N: 3, After: -1}, 0.5, 0, StopAttempts, 0},
		{Policy{Backoff: Backoff{Base: 1, Jitter: DecorrelatedJitter}}, Attempt{N: 2, Prev: 4, After: -1}, 0.5, 6.5, Retry, 1}, // 1 + 0.5·(12 − 1)
		{Policy{}, Attempt{N: 1, Now: 0, Deadline: 0.4, After: -1}, 0.5, 0, StopDeadline, 1},                                   // 0.5 · 1
	} {
		r := &fixedRand{u: c.u}
		p := c.p // not validated: Next must cope with a negative MaxAttempts
		d, v := p.Next(c.a, r)
		if d != c.wantDelay || v != c.want || r.draws != c.draws {
			t.Errorf("row %d: %+v Next(%+v) = %v, %v (%d draws), want %v, %v (%d draws)", i, c.p, c.a, d, v, r.draws, c.wantDelay, c.want, c.draws)
		}
	}
}

// The budget pays only for retries that everything else allows.
func TestNextSpendsBudgetLast(t *testing.T) {
	b := mustBudget(t, BudgetConfig{Max: 2, Ratio: 0.5})
	p := mustPolicy(t, Policy{Backoff: Backoff{Base: 1, Jitter: NoJitter}, Budget: b})
	for i, s := range []struct {
		a      Attempt
		want   Verdict
		tokens float64 // after the decision
	}{
		{Attempt{N: 1, NoRetry: true, After: -1}, StopServer, 2},
		{Attempt{N: 3, After: -1}, StopAttempts, 2},
		{Attempt{N: 1, Deadline: 1, After: -1}, StopDeadline, 2},
		{Attempt{N: 1, After: -1}, Retry, 1},
		{Attempt{N: 2, After: -1}, Retry, 0},
		{Attempt{N: 1, After: -1}, StopBudget, 0},
	} {
		if _, v := p.Next(s.a, nil); v != s.want {
			t.Fatalf("step %d: Next(%+v) = %v, want %v", i, s.a, v, s.want)
		}
		if got := b.Tokens(); got != s.tokens {
			t.Fatalf("step %d: %v tokens left, want %v", i, got, s.tokens)
		}
	}
	p.RecordRequest(0)
	p.RecordRequest(0) // two new calls: 1 token
	if _, v := p.Next(Attempt{N: 1, After: -1}, nil); v != Retry {
		t.Fatalf("after two new calls: %v, want retry", v)
	}
}

// The test: under a flood of failures (every attempt fails, each
// call retried until the policy stops it), retries never exceed the budget:
// Max + Ratio × calls, plus the floor's burst and rate over the time covered.
// With Max ≥ 1 + Ratio no deposit is lost to a full bucket, so the retries
// also reach Ratio × calls, less one token: the budget is not stricter than
// it says.
func TestRetriesNeverExceedBudgetUnderFlood(t *testing.T) {
	m := rng.New(11)
	for trial := 0; trial < 50; trial++ {
		c := BudgetConfig{Max: float64(2 + m.Uint32()%20), Ratio: float64(1+m.Uint32()%300) / 1000}
		if trial%2 == 1 {
			c.MinPerSecond = float64(1+m.Uint32()%40) / 10
		}
		p := mustPolicy(t, Policy{MaxAttempts: 2 + int(m.Uint32()%5), Budget: mustBudget(t, c)})
		calls, retries := 1000+int(m.Uint32()%4000), 0
		const rate = 100.0 // calls per second
		for i := 0; i < calls; i++ {
			now := float64(i) / rate
			p.RecordRequest(now)
			a := Attempt{N: 1, Now: now, After: -1}
			for {
				d, v := p.Next(a, m)
				if v != Retry {
					break
				}
				retries++
				a.N++
				a.Prev = d // the retry fails at once: time stands still
			}
		}
		bound := c.Max + c.Ratio*float64(calls)
		if c.MinPerSecond > 0 {
			bound += math.Max(1, math.Ceil(c.MinPerSecond)) + c.MinPerSecond*float64(calls)/rate
		}
		if float64(retries) > bound+1e-9 {
			t.Fatalf("%+v, %d attempts: %d retries for %d calls, bound %v", c, p.MaxAttempts, retries, calls, bound)
		}
		if float64(retries) < c.Ratio*float64(calls)-1 {
			t.Fatalf("%+v: only %d retries for %d calls: the budget was not used", c, retries, calls)
		}
	}
}

// Property: a retry never comes earlier than the server asked, and never
// when it cannot finish before the deadline.
func TestNextNeverEarlyNeverLate(t *testing.T) {
	p := mustPolicy(t, Policy{MaxAttempts: 10, Backoff: Backoff{Base: 0.1, Cap: 5, Jitter: EqualJitter}})
	prop := func(n uint8, now, after, expected, left uint32, u uint32) bool {
		a := Attempt{
			N:        1 + int(n%8),
			Now:      float64(now) / 1000,
			After:    float64(after%20000)/1000 - 1, // [-1, 19) seconds
			Expected: float64(expected%5000) / 1000,
			Deadline: float64(now)/1000 + float64(left%30000)/1000,
		}
		uf := float64(u) / 4294967296
		backoff := p.Backoff.Delay(a.N, 0, &fixedRand{u: uf}) // Backoff itself is tested in backoff_test.go
		d, v := p.Next(a, &fixedRand{u: uf})
		switch v {
		case Retry:
			return d == math.Max(backoff, a.After) && a.Now+d+a.Expected < a.Deadline
		case StopDeadline:
			return d == 0 && a.Now+math.Max(backoff, a.After)+a.Expected >= a.Deadline
		}
		return false
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 5000}); err != nil {
		t.Error(err)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Retry: "retry", StopAttempts: "attempts", StopBudget: "budget", StopDeadline: "deadline", StopServer: "server", 42: "Verdict(42)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", uint8(v), got, want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, c := range []struct {
		p     Policy
		field string // "" means valid
	}{
		{Policy{}, ""},
		{Policy{MaxAttempts: 1}, ""},
		{Policy{MaxAttempts: 100, Backoff: Backoff{Base: 1, Cap: 2}}, ""},
		{Policy{MaxAttempts: -1}, "Policy.MaxAttempts"},
		{Policy{Backoff: Backoff{Base: -1}}, "Backoff.Base"},
		{Policy{Backoff: Backoff{Base: 2, Cap: 1}}, "Backoff.Cap"},
	} {
		got, err := NewPolicy(c.p)
		switch {
		case c.field == "" && (err != nil || got == nil):
			t.Errorf("%+v: unexpected error %v", c.p, err)
		case c.field != "" && (err == nil || got != nil):
			t.Errorf("%+v: no error, want one about %s", c.p, c.field)
		case c.field != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.field)):
			t.Errorf("%+v: error %q does not wrap ErrConfig or name %s", c.p, err, c.field)
		}
	}
	// NewPolicy copies: changing the argument later changes nothing.
	src := Policy{MaxAttempts: 4}
	p := mustPolicy(t, src)
	src.MaxAttempts = 1
	if p.MaxAttempts != 4 {
		t.Error("NewPolicy did not copy its argument")
	}
	(&Policy{}).RecordRequest(0) // no budget: nothing to do, no panic
}

func TestIdempotent(t *testing.T) {
	key := http.Header{"Idempotency-Key": {"8e03978e-40d5-43e8-bc93-6894a57f9324"}}
	xkey := http.Header{"X-Idempotency-Key": {"abc"}}
	empty := http.Header{"Idempotency-Key": {""}}
	for _, c := range []struct {
		method string
		h      http.Header
		want   bool
	}{
		{"GET", nil, true}, {"HEAD", nil, true}, {"OPTIONS", nil, true}, {"TRACE", nil, true},
		{"PUT", nil, true}, {"DELETE", nil, true}, {"", nil, true},
		{"POST", nil, false}, {"PATCH", nil, false}, {"CONNECT", nil, false}, {"PROPFIND", nil, false},
		{"get", nil, false}, {"Post", nil, false},
		{"POST", key, true}, {"PATCH", key, true}, {"POST", xkey, true},
		{"POST", empty, false}, {"POST", http.Header{"Idempotency-Key": {}}, false},
		{"POST", http.Header{"idempotency-key": {"abc"}}, false}, // not canonical: net/http never stores it so
		{"GET", key, true},
	} {
		if got := Idempotent(c.method, c.h); got != c.want {
			t.Errorf("Idempotent(%q, %v) = %v, want %v", c.method, c.h, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { Idempotent("POST", key) }); n != 0 {
		t.Errorf("Idempotent allocates %v times", n)
	}
}

func BenchmarkNext(b *testing.B) {
	p := mustPolicy(b, Policy{Budget: mustBudget(b, BudgetConfig{})})
	r := rng.New(1)
	b.ReportAllocs()
	for b.Loop() {
		p.RecordRequest(0)
		p.Next(Attempt{N: 1, Now: 0, Deadline: 10, Expected: 0.1, After: -1}, r)
	}
}

// Retry-After and pushback values, parsed, reach Next as Attempt.After and
// Attempt.NoRetry: the retry waits at least what the server asked (the
// backoff, full jitter below 2·Base = 1 s for the first retry, is shorter).
func TestServerDelayRespected(t *testing.T) {
	p := mustPolicy(t, Policy{})
	for _, c := range []struct {
		after, pushback string
		want            float64
		v               Verdict
	}{
		{"120", "", 120, Retry},
		{"Sun, 30 Nov 2025 12:02:00 GMT", "", 120, Retry},
		{"", "1500", 1.5, Retry},
		{"", "-1", 0, StopServer},
		{"", "soon", 0, StopServer},
	} {
		a := Attempt{N: 1, Now: 50, After: -1}
		if d, ok := ParseRetryAfter(c.after, afterNow); ok {
			a.After = d.Seconds()
		}
		if d, retry, ok := ParsePushback(c.pushback); ok {
			a.NoRetry = !retry
			a.After = d.Seconds()
		}
		if d, v := p.Next(a, rng.New(3)); d != c.want || v != c.v {
			t.Errorf("Retry-After %q, pushback %q: Next = %v, %v, want %v, %v", c.after, c.pushback, d, v, c.want, c.v)
		}
	}
}

// A retry of an attempt that never left the client (breaker refusal) is not
// paid from the budget; every other check still applies.
func TestUnsentRetryIsFree(t *testing.T) {
	b, err := NewBudget(BudgetConfig{Max: 1, Ratio: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(Policy{MaxAttempts: 10, Backoff: Backoff{Jitter: NoJitter}, Budget: b})
	if err != nil {
		t.Fatal(err)
	}
	if _, v := p.Next(Attempt{N: 1, Now: 1, After: -1}, nil); v != Retry {
		t.Fatalf("first retry: %v, want retry (the one token)", v)
	}
	if _, v := p.Next(Attempt{N: 2, Now: 1, After: -1}, nil); v != StopBudget {
		t.Fatalf("second retry: %v, want budget (no token left)", v)
	}
	for n := 2; n < 10; n++ {
		if _, v := p.Next(Attempt{N: n, Now: 1, After: -1, Unsent: true}, nil); v != Retry {
			t.Fatalf("unsent retry %d: %v, want retry without a token", n, v)
		}
	}
	if _, v := p.Next(Attempt{N: 10, Now: 1, After: -1, Unsent: true}, nil); v != StopAttempts {
		t.Fatalf("unsent at the attempts cap: %v, want attempts", v)
	}
	if _, v := p.Next(Attempt{N: 2, Now: 1, After: -1, Unsent: true, Deadline: 1.5}, nil); v != StopDeadline {
		t.Fatalf("unsent past the deadline: %v, want deadline", v)
	}
}
