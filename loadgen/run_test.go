package loadgen

import (
	"context"
	"errors"
	"testing"
	"time"
)

// At a constant 200 req/s for 5 s against a server that keeps up, the
// server sees the asked rate within 2%, and every arrival is offered once.
func TestConstantRate(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, nil)
	defer srv.Close()
	res := run(t, Config{
		Targets: []Target{{URL: srv.URL}},
		Steps:   []Step{{Rate: 200, Duration: 5 * time.Second}},
	})
	if len(res.Steps) != 1 {
		t.Fatalf("%d steps, want 1", len(res.Steps))
	}
	s := res.Steps[0]
	if s.Offered != 1000 || s.Sent+s.Unsent != 1000 {
		t.Errorf("Offered %d, Sent %d, Unsent %d; want 1000 offered, all sent or unsent", s.Offered, s.Sent, s.Unsent)
	}
	stamps := srv.stampsAll()
	if len(stamps) != s.Sent {
		t.Errorf("server saw %d requests, Sent %d", len(stamps), s.Sent)
	}
	if len(stamps) < 900 {
		t.Fatalf("server saw %d requests of 1000", len(stamps))
	}
	first, last := stamps[0], stamps[0]
	for _, st := range stamps {
		if st.Before(first) {
			first = st
		}
		if st.After(last) {
			last = st
		}
	}
	rate := float64(len(stamps)-1) / last.Sub(first).Seconds()
	if rate < 196 || rate > 204 {
		t.Errorf("server-side rate %.2f req/s, want 200 ± 2%%", rate)
	}
	if s.Good < 990 || s.Statuses[200] != s.OK {
		t.Errorf("Good %d, OK %d, statuses %v; want ≥ 990 good", s.Good, s.OK, s.Statuses)
	}
	if s.Elapsed != 5*time.Second || s.Partial {
		t.Errorf("Elapsed %v, Partial %v; want 5s, false", s.Elapsed, s.Partial)
	}
	t.Logf("rate %.2f req/s; latency %+v; send lag %+v", rate, s.Latency, s.SendLag)
}

// Cancelling ctx mid-run returns at once with the step under way marked
// partial, and leaves no goroutine behind.
func TestCancelMidRun(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, slow(300*time.Millisecond))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(1500*time.Millisecond, cancel)
	var done []StepResult
	start := time.Now()
	res, err := Run(ctx, Config{
		Targets:  []Target{{URL: srv.URL}},
		Steps:    []Step{{Rate: 100, Duration: time.Second}, {Rate: 100, Duration: 10 * time.Second}, {Rate: 100, Duration: time.Second}},
		StepDone: func(s StepResult) { done = append(done, s) },
	})
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if took > 4*time.Second {
		t.Errorf("Run returned %v after the start, %v after the cancel", took, took-1500*time.Millisecond)
	}
	if len(res.Steps) != 2 || len(done) != 2 {
		t.Fatalf("%d steps (StepDone %d), want 2", len(res.Steps), len(done))
	}
	if s := res.Steps[0]; s.Offered != 100 || s.Good < 95 {
		t.Errorf("step 0: Offered %d, Good %d; want 100 offered and answered", s.Offered, s.Good)
	}
	s := res.Steps[1]
	if !s.Partial || s.Elapsed > 2*time.Second || s.Offered == 0 || s.Offered > 100 {
		t.Errorf("step 1: Partial %v, Elapsed %v, Offered %d; want partial, about 0.5 s, about 20 offered", s.Partial, s.Elapsed, s.Offered)
	}
	if s.Offered != s.Good+s.Failed || s.Failed > s.Offered/5 {
		t.Errorf("step 1: Offered %d, Good %d, Failed %d; calls cut by the stop must not count", s.Offered, s.Good, s.Failed)
	}
}
