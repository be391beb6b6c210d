package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/ratelimit"
)

// flakyStore is a Keyed whose health the test switches; it counts calls.
// Up, it allows everything with Remaining 7.
type flakyStore struct {
	mu    sync.Mutex
	down  bool
	err   error // returned while down; nil means one wrapping ErrStoreUnavailable
	calls int
}

func (f *flakyStore) set(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *flakyStore) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *flakyStore) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		if f.err != nil {
			return ratelimit.Decision{}, f.err
		}
		return ratelimit.Decision{}, fmt.Errorf("flaky: %w", ratelimit.ErrStoreUnavailable)
	}
	return ratelimit.Decision{Allowed: true, Remaining: 7}, nil
}

// floorStore is a tiny in-memory Keyed: one GCRA limiter per key (Rate
// 1/s, Burst 2), as a caller's loose local floor.
type floorStore struct {
	mu   sync.Mutex
	keys map[string]*ratelimit.Limiter[ratelimit.GCRAState]
}

func (f *floorStore) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	f.mu.Lock()
	lim := f.keys[key]
	if lim == nil {
		g, err := ratelimit.NewGCRA(ratelimit.Limit{Rate: 1, Burst: 2})
		if err != nil {
			f.mu.Unlock()
			return ratelimit.Decision{}, err
		}
		lim = ratelimit.NewLimiter[ratelimit.GCRAState](g)
		if f.keys == nil {
			f.keys = map[string]*ratelimit.Limiter[ratelimit.GCRAState]{}
		}
		f.keys[key] = lim
	}
	f.mu.Unlock()
	return lim.AllowN(now, cost), nil
}

// guardStep is one request of a fail-mode step table.
type guardStep struct {
	now     float64
	down    bool  // the store's health from this step on
	allowed bool  // the decision
	rem     int   // its Remaining
	err     error // nil, or what the error must wrap
	calls   int   // store calls so far
	state   breaker.State
}

func runGuard(t *testing.T, g *ratelimit.Guarded, store *flakyStore, steps []guardStep) {
	t.Helper()
	for i, st := range steps {
		store.set(st.down)
		d, err := g.AllowN(context.Background(), "k", st.now, 1)
		switch {
		case d.Allowed != st.allowed || d.Remaining != st.rem:
			t.Errorf("step %d (now=%v): %+v, want allowed=%v remaining=%d", i, st.now, d, st.allowed, st.rem)
		case st.err == nil && err != nil, st.err != nil && !errors.Is(err, st.err):
			t.Errorf("step %d (now=%v): error %v, want %v", i, st.now, err, st.err)
		case store.count() != st.calls:
			t.Errorf("step %d (now=%v): %d store calls, want %d", i, st.now, store.count(), st.calls)
		case g.Breaker().State != st.state:
			t.Errorf("step %d (now=%v): breaker %v, want %v", i, st.now, g.Breaker().State, st.state)
		}
	}
}

// The breaker opens after 3 consecutive failures (at now = 12) and tries
// again after Recovery = 1 s.
func TestGuardedFailOpenWithFloor(t *testing.T) {
	store := &flakyStore{}
	g, err := ratelimit.NewGuarded(store, ratelimit.GuardConfig{Mode: ratelimit.FailOpen, Floor: &floorStore{}})
	if err != nil {
		t.Fatal(err)
	}
	runGuard(t, g, store, []guardStep{
		{10, false, true, 7, nil, 1, breaker.Closed},  // the store decides
		{11, true, true, 1, nil, 2, breaker.Closed},   // fails: the floor decides (burst 2)
		{11, true, true, 0, nil, 3, breaker.Closed},   // floor: last unit
		{12, true, true, 0, nil, 4, breaker.Open},     // third failure opens; the floor refilled 1
		{12, true, false, 0, nil, 4, breaker.Open},    // no store call; the floor refuses
		{12.5, false, false, 0, nil, 4, breaker.Open}, // the store is back, unnoticed yet
		{13, false, true, 7, nil, 5, breaker.Closed},  // the trial succeeds and closes
		{13, false, true, 7, nil, 6, breaker.Closed},  // the store decides again
		{20, true, true, 1, nil, 7, breaker.Closed},   // a new outage: floor refilled to 2
		{20, true, true, 0, nil, 8, breaker.Closed},   // floor
		{20, true, false, 0, nil, 9, breaker.Open},    // third failure opens; the floor refuses
		{21, true, true, 0, nil, 10, breaker.Open},    // trial fails: open again, floor allows
		{21.9, true, false, 0, nil, 10, breaker.Open}, // no call
		{22, false, true, 7, nil, 11, breaker.Closed}, // the trial succeeds
		{22, false, true, 7, nil, 12, breaker.Closed},
	})
	if s := g.Stats(); s != (ratelimit.GuardStats{Calls: 12, Failures: 7, Skipped: 3, Degraded: 10}) {
		t.Errorf("Stats %+v", s)
	}
}

func TestGuardedFailOpenWithoutFloor(t *testing.T) {
	store := &flakyStore{}
	g, err := ratelimit.NewGuarded(store, ratelimit.GuardConfig{Breaker: breaker.Config{Threshold: 1, Recovery: 5}})
	if err != nil {
		t.Fatal(err)
	}
	runGuard(t, g, store, []guardStep{
		{0, true, true, 0, nil, 1, breaker.Open},
		{1, true, true, 0, nil, 1, breaker.Open},
		{4.9, false, true, 0, nil, 1, breaker.Open},
		{5, false, true, 7, nil, 2, breaker.Closed},
	})
}

func TestGuardedFailClosed(t *testing.T) {
	store := &flakyStore{}
	g, err := ratelimit.NewGuarded(store, ratelimit.GuardConfig{Mode: ratelimit.FailClosed, Floor: &floorStore{}})
	if err != nil {
		t.Fatal(err)
	}
	unavailable := ratelimit.ErrStoreUnavailable
	runGuard(t, g, store, []guardStep{
		{10, false, true, 7, nil, 1, breaker.Closed},
		{11, true, false, 0, unavailable, 2, breaker.Closed}, // the floor is not used when closed
		{11, true, false, 0, unavailable, 3, breaker.Closed},
		{11, true, false, 0, unavailable, 4, breaker.Open},
		{11.5, true, false, 0, breaker.ErrOpen, 4, breaker.Open}, // refused without a call
		{11.5, false, false, 0, ratelimit.ErrStoreOpen, 4, breaker.Open},
		{12, false, true, 7, nil, 5, breaker.Closed},
	})
	store.set(true)
	d, err := g.AllowN(context.Background(), "k", 13, 1)
	if d.Allowed || d.RetryAfter != ratelimit.DefaultGuardRecovery || !errors.Is(err, unavailable) {
		t.Errorf("refusal %+v, %v: want RetryAfter = Recovery and an error wrapping ErrStoreUnavailable", d, err)
	}
}

// An error that does not say "unavailable" is still a store failure, and
// is wrapped so the HTTP layer recognises it.
func TestGuardedWrapsForeignErrors(t *testing.T) {
	boom := errors.New("boom")
	store := &flakyStore{err: boom}
	store.set(true)
	g, err := ratelimit.NewGuarded(store, ratelimit.GuardConfig{Mode: ratelimit.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.AllowN(context.Background(), "k", 0, 1)
	if !errors.Is(err, boom) || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("error %v, want it wrapping boom and ErrStoreUnavailable", err)
	}
}

// A caller that went away says nothing about the store: no failure is
// counted, the breaker stays closed.
func TestGuardedIgnoresCallerCancellation(t *testing.T) {
	store := &flakyStore{}
	store.set(true)
	g, err := ratelimit.NewGuarded(store, ratelimit.GuardConfig{Breaker: breaker.Config{Threshold: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 5 {
		if _, err := g.AllowN(ctx, "k", float64(i), 1); err == nil {
			t.Fatalf("call %d: no error for a cancelled caller", i)
		}
	}
	if s := g.Breaker(); s.State != breaker.Closed || s.Failures != 0 {
		t.Fatalf("breaker %+v after cancelled calls, want closed with no failure", s)
	}
	if s := g.Stats(); s.Calls != 5 || s.Failures != 0 || s.Degraded != 0 {
		t.Fatalf("Stats %+v", s)
	}
}

func TestNewGuardedValidates(t *testing.T) {
	for i, tc := range []struct {
		primary ratelimit.Keyed
		cfg     ratelimit.GuardConfig
		field   string
	}{
		{nil, ratelimit.GuardConfig{}, "primary"},
		{&flakyStore{}, ratelimit.GuardConfig{Mode: 7}, "Mode"},
		{&flakyStore{}, ratelimit.GuardConfig{Breaker: breaker.Config{Threshold: -1}}, "Threshold"},
		{&flakyStore{}, ratelimit.GuardConfig{Breaker: breaker.Config{Recovery: -1}}, "Recovery"},
	} {
		if _, err := ratelimit.NewGuarded(tc.primary, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("case %d: %v, want an error naming %s", i, err, tc.field)
		}
	}
}

func TestParseFailMode(t *testing.T) {
	for in, want := range map[string]ratelimit.FailMode{"": ratelimit.FailOpen, "open": ratelimit.FailOpen,
		" Closed ": ratelimit.FailClosed, "CLOSED": ratelimit.FailClosed} {
		if got, err := ratelimit.ParseFailMode(in); err != nil || got != want {
			t.Errorf("ParseFailMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ratelimit.ParseFailMode("ajar"); err == nil {
		t.Error("ParseFailMode(ajar): no error")
	}
	if ratelimit.FailOpen.String() != "open" || ratelimit.FailClosed.String() != "closed" {
		t.Error("String")
	}
}

// TestGuardedConcurrent hammers a Guarded whose store flips between up and
// down from many goroutines (run with -race); every answer follows the
// table: allowed with Remaining 7 from the store, or allowed with nil error
// by the fail-open mode.
func TestGuardedConcurrent(t *testing.T) {
	store := &flakyStore{}
	g, err := ratelimit.NewGuarded(store, ratelimit.GuardConfig{Breaker: breaker.Config{Threshold: 2, Recovery: 0.001}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 2000 {
				if w == 0 && i%100 == 0 {
					store.set(i%200 == 0)
				}
				d, err := g.AllowN(context.Background(), "k", float64(i)*0.0001, 1)
				if err != nil || !d.Allowed || (d.Remaining != 7 && d.Remaining != 0) {
					t.Errorf("%+v, %v", d, err)
					return
				}
			}
		})
	}
	wg.Wait()
	s := g.Stats()
	if s.Calls+s.Skipped != 16*2000 || s.Failures > s.Calls || s.Degraded != s.Failures+s.Skipped {
		t.Fatalf("inconsistent Stats %+v", s)
	}
}

// A fail-open rule over a store that is down: the floor decides, and after
// Threshold failures the store is not called at all.
func ExampleGuarded() {
	store := &flakyStore{down: true} // say, Redis, unreachable
	g, err := ratelimit.NewGuarded(store, ratelimit.GuardConfig{
		Mode:    ratelimit.FailOpen,
		Floor:   &floorStore{}, // in memory: 1/s, burst 2
		Breaker: breaker.Config{Threshold: 3, Recovery: 1},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, now := range []float64{0, 0, 0, 0.5, 1.5} {
		d, err := g.AllowN(context.Background(), "u42", now, 1)
		fmt.Printf("t=%.1f allowed=%v err=%v store calls=%d breaker=%v\n", now, d.Allowed, err, store.calls, g.Breaker().State)
	}
	// Output:
	// t=0.0 allowed=true err=<nil> store calls=1 breaker=CLOSED
	// t=0.0 allowed=true err=<nil> store calls=2 breaker=CLOSED
	// t=0.0 allowed=false err=<nil> store calls=3 breaker=OPEN
	// t=0.5 allowed=false err=<nil> store calls=3 breaker=OPEN
	// t=1.5 allowed=true err=<nil> store calls=4 breaker=OPEN
}

// upStore always allows, without locking: the Guarded's own cost.
type upStore struct{}

func (upStore) AllowN(context.Context, string, float64, int) (ratelimit.Decision, error) {
	return ratelimit.Decision{Allowed: true}, nil
}

// downStore always fails.
type downStore struct{}

var errDown = fmt.Errorf("down: %w", ratelimit.ErrStoreUnavailable)

func (downStore) AllowN(context.Context, string, float64, int) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errDown
}

// BenchmarkGuarded is the wrapper's overhead per request: through a
// healthy store (breaker closed), and with the breaker open (fail closed,
// no store call).
func BenchmarkGuarded(b *testing.B) {
	ctx := context.Background()
	b.Run("closed", func(b *testing.B) {
		g, _ := ratelimit.NewGuarded(upStore{}, ratelimit.GuardConfig{})
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			g.AllowN(ctx, "k", float64(i), 1)
		}
	})
	b.Run("open", func(b *testing.B) {
		g, _ := ratelimit.NewGuarded(downStore{}, ratelimit.GuardConfig{Mode: ratelimit.FailClosed, Breaker: breaker.Config{Recovery: 1e9}})
		for range 3 {
			g.AllowN(ctx, "k", 0, 1)
		}
		b.ReportAllocs()
		for b.Loop() {
			g.AllowN(ctx, "k", 1, 1)
		}
	})
}
