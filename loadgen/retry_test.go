package loadgen

import (
	"net/http"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/deadline"
)

func answer503(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }

// Against a server that answers 503, RetryImmediate with 2 retries sends
// 3 attempts per call; a retry budget sends far fewer retries.
func TestRetries(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, answer503)
	defer srv.Close()
	cfg := Config{
		Targets: []Target{{Method: http.MethodPost, URL: srv.URL, Body: []byte("order")}},
		Steps:   []Step{{Rate: 100, Duration: 500 * time.Millisecond}, {Rate: 100, Duration: 500 * time.Millisecond}},
		Client:  ClientPolicy{Retry: RetryImmediate, Retries: 2},
	}
	res := run(t, cfg)
	sum := total(res)
	if sum.Offered != 100 || srv.count() != 300 {
		t.Fatalf("Offered %d, server saw %d; want 100 calls of 3 attempts", sum.Offered, srv.count())
	}
	if sum.Retries != 200 || sum.Attempts+res.TailAttempts != 300 || sum.Good != 0 {
		t.Errorf("Retries %d, Attempts %d + %d after the end, Good %d; want 200, 300, 0", sum.Retries, sum.Attempts, res.TailAttempts, sum.Good)
	}
	if s := res.Steps[0]; s.Statuses[503] != 50 || s.Retries != 100 {
		t.Errorf("step 0: statuses %v, retries %d; want 50 × 503, 100 retries", s.Statuses, s.Retries)
	}
	for _, r := range srv.seenAll() {
		if r.body != "order" {
			t.Fatalf("a retried POST carried body %q, want %q", r.body, "order")
		}
	}

	immediate := sum.Retries
	budgeted := newServer(t, answer503)
	defer budgeted.Close()
	cfg.Targets[0].URL = budgeted.URL
	cfg.Client = ClientPolicy{Retry: RetryBudget, Retries: 2, BudgetRatio: 0.1, BackoffBase: time.Millisecond, BackoffCap: 5 * time.Millisecond}
	sum = total(run(t, cfg))
	// The budget starts with 10 tokens and earns 0.1 per call: about 20
	// retries for 100 calls.
	if sum.Retries > immediate/4 || budgeted.count() != 100+sum.Retries {
		t.Errorf("budgeted: %d retries (server saw %d requests), immediate: %d; want at most a quarter", sum.Retries, budgeted.count(), immediate)
	}
	t.Logf("retries: immediate %d, budget %d", immediate, sum.Retries)
}

// An attempt that hangs is given up after Timeout and retried; with
// RetryNone the call is a timeout. Each attempt carries its own remaining
// time in Spillway-Timeout.
func TestAttemptTimeout(t *testing.T) {
	defer noLeaks(t)()
	var h hangFirst
	srv := newServer(t, h.serve)
	defer srv.Close()
	const timeout = 500 * time.Millisecond
	cfg := Config{
		Targets: []Target{{URL: srv.URL + "/?id={{seq}}"}},
		Steps:   []Step{{Rate: 20, Duration: time.Second}},
		Timeout: timeout,
		Client:  ClientPolicy{Retry: RetryImmediate, Retries: 1},
	}
	s := run(t, cfg).Steps[0]
	if s.Offered != 20 || s.Good != 20 || s.Retries != 20 || s.Timeouts != 0 {
		t.Errorf("Offered %d, Good %d, Retries %d, Timeouts %d; want 20 calls, each good after one retry", s.Offered, s.Good, s.Retries, s.Timeouts)
	}
	if s.Latency.P50 < timeout || s.GoodLatency.P50 < timeout {
		t.Errorf("latency %+v, good latency %+v; want the lost attempt's timeout counted", s.Latency, s.GoodLatency)
	}
	for _, r := range srv.seenAll() {
		d, ok, err := deadline.FromHeader(r.header)
		if !ok || err != nil || d <= 0 || d > timeout {
			t.Fatalf("an attempt carried Spillway-Timeout %q (%v, %v), want at most %v", r.header.Get(deadline.HTTPHeader), d, err, timeout)
		}
	}

	h.reset()
	cfg.Client = ClientPolicy{}
	s = run(t, cfg).Steps[0]
	if s.Good != 0 || s.Timeouts != 20 || s.Retries != 0 || s.Latency.Max != timeout {
		t.Errorf("RetryNone: Good %d, Timeouts %d, Retries %d, max %v; want 20 timeouts at %v", s.Good, s.Timeouts, s.Retries, s.Latency.Max, timeout)
	}
}

// Attempts count by the window an attempt was sent in, Retries by the
// arrival's step: step 0's late retries are step 1's load, and step 1's
// retries after its end are in no step (TailAttempts).
func TestAttemptsByWindow(t *testing.T) {
	defer noLeaks(t)()
	var h hangFirst
	srv := newServer(t, h.serve)
	defer srv.Close()
	// Arrivals every 50 ms; each first attempt is given up after 320 ms
	// and retried: step 0's retries fall at 0.32 … 0.77 s, four of them
	// before step 1 begins at 0.5 s; step 1's fall at 0.82 … 1.27 s, about
	// six after the run's last window ends at 1 s.
	res := run(t, Config{
		Targets: []Target{{URL: srv.URL + "/?{{seq}}"}},
		Steps:   []Step{{Rate: 20, Duration: 500 * time.Millisecond}, {Rate: 20, Duration: 500 * time.Millisecond}},
		Timeout: 320 * time.Millisecond,
		Client:  ClientPolicy{Retry: RetryImmediate, Retries: 1},
	})
	s0, s1 := res.Steps[0], res.Steps[1]
	if s0.Retries != 10 || s1.Retries != 10 || s0.Good != 10 || s1.Good != 10 {
		t.Errorf("retries %d, %d, good %d, %d; want every call good after one retry", s0.Retries, s1.Retries, s0.Good, s1.Good)
	}
	if s0.Attempts+s1.Attempts+res.TailAttempts != 40 || srv.count() != 40 {
		t.Errorf("attempts %d + %d + %d after the end, server saw %d; want 40", s0.Attempts, s1.Attempts, res.TailAttempts, srv.count())
	}
	if s0.Attempts <= 10 || s0.Attempts > 16 || s1.Attempts < 14 || s1.Attempts > 26 || res.TailAttempts < 2 {
		t.Errorf("attempts by window %d, %d, after the end %d; want 10 + about 4, then 10 + about 6 + about 4, then about 6",
			s0.Attempts, s1.Attempts, res.TailAttempts)
	}
}
