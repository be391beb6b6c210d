package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// leaseCounting is a global store that counts its calls (round trips) per
// key, and can be made to fail.
type leaseCounting struct {
	inner Keyed
	calls atomic.Int64
	fail  atomic.Bool
	mu    sync.Mutex
	byKey map[string]int
}

var errLeaseDown = fmt.Errorf("%w: test store down", ErrStoreUnavailable)

func newLeaseCounting(t testing.TB, spec Spec) *leaseCounting {
	return &leaseCounting{inner: mustMemory(t, spec, MemoryConfig{}), byKey: map[string]int{}}
}

func (c *leaseCounting) AllowN(ctx context.Context, key string, now float64, cost int) (Decision, error) {
	c.calls.Add(1)
	c.mu.Lock()
	c.byKey[key]++
	c.mu.Unlock()
	if c.fail.Load() {
		return Decision{}, errLeaseDown
	}
	return c.inner.AllowN(ctx, key, now, cost)
}

func mustLeased(t testing.TB, global Keyed, cfg LeaseConfig) *Leased {
	t.Helper()
	l, err := NewLeased(global, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// leaseAdmitted is an admitted request: when and how many units.
type leaseAdmitted struct {
	t    float64
	cost int
}

// Three nodes lease from one global GCRA of 10/s, burst 10, with leases of
// 5 units for TTL 1 s. The units admitted in any window [a, b] never exceed
// limit(b − a + TTL) = 10 + 10·(b − a + 1), the documented bound; they do
// exceed the global limit(b − a) (the overshoot leasing causes), and a
// scripted case shows by how much.
func TestLeaseOvershootBound(t *testing.T) {
	const rate, burst, ttl = 10.0, 10, 1.0
	limit := func(span float64) float64 { return burst + rate*span }
	check := func(t *testing.T, admitted []leaseAdmitted) (worstOver float64) {
		worstOver = -burst
		for i := range admitted {
			units := 0
			for j := i; j < len(admitted); j++ {
				units += admitted[j].cost
				span := admitted[j].t - admitted[i].t
				if float64(units) > limit(span+ttl)+1e-9 {
					t.Fatalf("%d units admitted in [%v, %v], bound limit(W + TTL) = %v",
						units, admitted[i].t, admitted[j].t, limit(span+ttl))
				}
				worstOver = max(worstOver, float64(units)-limit(span))
			}
		}
		return worstOver
	}
	newNodes := func(t *testing.T) (*leaseCounting, []*Leased) {
		global := newLeaseCounting(t, Spec{Rate: rate, Per: 1, Burst: burst})
		var nodes []*Leased
		for range 3 {
			nodes = append(nodes, mustLeased(t, global, LeaseConfig{Size: 5, TTL: ttl}))
		}
		return global, nodes
	}

	t.Run("scripted", func(t *testing.T) {
		_, nodes := newNodes(t)
		var admitted []leaseAdmitted
		ask := func(node int, now float64, n int) {
			for range n {
				if d, err := nodes[node].AllowN(context.Background(), "tenant", now, 1); err != nil {
					t.Fatal(err)
				} else if d.Allowed {
					admitted = append(admitted, leaseAdmitted{now, 1})
				}
			}
		}
		ask(0, 0, 1)    // node 0 leases 5, spends 1
		ask(1, 0, 1)    // node 1 leases 5, spends 1: the bucket is empty
		ask(2, 0.9, 10) // 9 units refilled: node 2 leases 5, then the 4 left
		ask(0, 0.95, 10)
		ask(1, 0.95, 10) // nodes 0 and 1 spend their last 4 each
		got := 0
		for _, a := range admitted {
			if a.t >= 0.9 {
				got += a.cost
			}
		}
		// In [0.9, 0.95]: 9 (node 2) + 4 + 4 = 17 units, against a global
		// limit(0.05) = 10.5 and a bound limit(1.05) = 20.5.
		if got != 17 {
			t.Errorf("%d units admitted in [0.9, 0.95], want 17", got)
		}
		if over := check(t, admitted); over != 6.5 {
			t.Errorf("largest excess over limit(W) = %v, want 6.5 (17 − 10.5)", over)
		}
	})

	t.Run("random", func(t *testing.T) {
		global, nodes := newNodes(t)
		r := newRand(11)
		var admitted []leaseAdmitted
		now, decisions := 0.0, 0
		for now < 60 {
			now += r.ExpFloat64() / 40 // 40 requests a second over the three nodes
			if r.Float64() < 0.02 {
				now += r.Float64() // a quiet spell: leases age
			}
			cost := 1
			if r.Float64() < 0.1 {
				cost = 1 + r.IntN(4)
			}
			decisions++
			if d, _ := nodes[r.IntN(3)].AllowN(context.Background(), "tenant", now, cost); d.Allowed {
				admitted = append(admitted, leaseAdmitted{now, cost})
			}
		}
		over := check(t, admitted)
		units := 0
		for _, a := range admitted {
			units += a.cost
		}
		t.Logf("%d decisions, %d admitted (%d units) in %.1f s, %d round trips; largest excess over limit(W): %.2f units (bound allows %v more)",
			decisions, len(admitted), units, now, global.calls.Load(), over, rate*ttl)
		if over <= 0 {
			t.Errorf("no window exceeded limit(W): the test does not exercise leasing's overshoot")
		}
		if float64(units) > limit(now+ttl) {
			t.Errorf("%d units over the whole run, more than the global limit allows", units)
		}
	})
}

// With leases of 10, a key costs one round trip per ten decisions: exactly
// 0.1 from one goroutine; concurrently, a little more (a goroutine that
// finds the lease empty while another fetches goes to the global store).
func TestLeaseRoundTripsPerDecision(t *testing.T) {
	spec := Spec{Rate: 1e6, Per: 1, Burst: 1e6}
	t.Run("sequential", func(t *testing.T) {
		for _, c := range []struct {
			refill, trips, local int
		}{
			// Refill 5 (the default): a key's first decision leases, and the
			// decisions that leave 5 units (the 5th, 15th, 25th, ...) lease
			// the next 10: 144 round trips for 1428 or 1429 decisions, 1008
			// for the 7 keys.
			// Every decision but the 7 first is served locally.
			{0, 1008, 10_000 - 7},
			// Refill −1: a round trip when the lease is empty, at decisions
			// 1, 11, 21, ...: ⌈1429/10⌉ + 6·⌈1428/10⌉ = 1001.
			// Every decision that leases is not served locally.
			{-1, 1001, 10_000 - 1001},
		} {
			global := newLeaseCounting(t, spec)
			l := mustLeased(t, global, LeaseConfig{Size: 10, Refill: c.refill})
			const n = 10_000
			for i := range n {
				l.AllowN(context.Background(), fmt.Sprint("k", i%7), float64(i)*1e-4, 1)
			}
			if got := global.calls.Load(); got != int64(c.trips) {
				t.Errorf("Refill %d: %d round trips for %d decisions, want %d", c.refill, got, n, c.trips)
			}
			st := l.Stats()
			if st.RoundTrips != uint64(c.trips) || st.Local != uint64(c.local) || st.LeasedUnits != 10*uint64(c.trips) {
				t.Errorf("Refill %d: stats %+v", c.refill, st)
			}
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		global := newLeaseCounting(t, spec)
		l := mustLeased(t, global, LeaseConfig{Size: 10})
		const goroutines, per = 4, 10_000
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					l.AllowN(context.Background(), fmt.Sprint("k", (i+g)%4), float64(i)*1e-4, 1)
				}
			}()
		}
		wg.Wait()
		ratio := float64(global.calls.Load()) / (goroutines * per)
		t.Logf("%d round trips for %d decisions: %.4f per decision; %+v", global.calls.Load(), goroutines*per, ratio, l.Stats())
		if ratio > 0.11 {
			t.Errorf("%.4f round trips per decision with leases of 10, target ≤ 0.11", ratio)
		}
	})
}

// A lease expires TTL after it was taken: its unspent units are stranded.
func TestLeaseExpiry(t *testing.T) {
	global := newLeaseCounting(t, Spec{Rate: 100, Per: 1, Burst: 100})
	l := mustLeased(t, global, LeaseConfig{Size: 10, TTL: 1})
	ctx := context.Background()
	for i, s := range []struct {
		now    float64
		n      int
		trips  int64 // after the step
		remain int   // of the step's last decision
	}{
		{0, 1, 1, 9 + 90},    // lease A of 10 at 0, until 1: the global store has 90 left
		{0.5, 9, 2, 10 + 90}, // the 4th leaves 5 (Refill): lease B of 10, until 1.5; A is spent first
		{0.6, 1, 2, 9 + 90},  // from B, no round trip
		{1.6, 1, 3, 9 + 90},  // B expired at 1.5 with 9 units (stranded): lease 10 more
	} {
		var d Decision
		for range s.n {
			d, _ = l.AllowN(ctx, "k", s.now, 1)
		}
		if !d.Allowed || global.calls.Load() != s.trips || d.Remaining != s.remain {
			t.Errorf("step %d %+v: %+v, %d round trips", i, s, d, global.calls.Load())
		}
	}
	if st := l.Stats(); st.StrandedUnits != 9 {
		t.Errorf("stats %+v, want 9 stranded units", st)
	}
}

// The global store's errors come back as they are, and leave no lease stuck
// "fetching": the next call leases again.
func TestLeaseGlobalErrors(t *testing.T) {
	global := newLeaseCounting(t, Spec{Rate: 100, Per: 1, Burst: 100})
	l := mustLeased(t, global, LeaseConfig{})
	global.fail.Store(true)
	if _, err := l.AllowN(context.Background(), "k", 0, 1); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("error %v, want the global store's", err)
	}
	global.fail.Store(false)
	for i := range 3 {
		if d, err := l.AllowN(context.Background(), "k", 0, 1); err != nil || !d.Allowed {
			t.Fatalf("call %d after recovery: %+v, %v", i, d, err)
		}
	}
	if got := global.calls.Load(); got != 2 {
		t.Errorf("%d round trips, want 2 (the failed one and one lease)", got)
	}
}

// A refused lease falls back to the global store's Remaining, and a request
// refused there is refused.
func TestLeaseFallsBackToRemaining(t *testing.T) {
	global := newLeaseCounting(t, Spec{Rate: 1, Per: 3600, Burst: 7})
	l := mustLeased(t, global, LeaseConfig{Size: 5})
	var allowed int
	for range 10 {
		if d, _ := l.AllowN(context.Background(), "k", 0, 1); d.Allowed {
			allowed++
		}
	}
	// Request 1 leases 5 (1 trip); request 3 leaves 2 units and refills:
	// refused (2 left of 7), not to be tried again for 3 hours (1 trip);
	// request 6 finds the lease empty: 5 refused with Remaining 2, so it
	// leases 2 (2 trips); request 7 spends the last unit; requests 8 to 10
	// are refused with Remaining 0 (1 trip each).
	if allowed != 7 || global.calls.Load() != 7 {
		t.Errorf("%d allowed in %d round trips, want 7 in 7", allowed, global.calls.Load())
	}
}

// With Hot, only hot keys are leased; the rest go straight to the global
// store, one round trip each.
func TestLeaseHotKeysOnly(t *testing.T) {
	global := newLeaseCounting(t, Spec{Rate: 1e6, Per: 1, Burst: 1e6})
	hot := mustHeavyHitters(t, HotKeysConfig{TopK: 4, MinCount: 50, Shards: 1})
	l := mustLeased(t, global, LeaseConfig{Size: 10, Hot: hot})
	for i := range 1000 {
		now := float64(i) * 1e-3 // within the leases' TTL of 1 s
		l.AllowN(context.Background(), "big-tenant", now, 1)
		if i%5 == 0 {
			l.AllowN(context.Background(), fmt.Sprint("small-", i), now, 1)
		}
	}
	global.mu.Lock()
	defer global.mu.Unlock()
	for k, n := range global.byKey {
		if k != "big-tenant" && n != 1 {
			t.Errorf("%s: %d round trips, want 1", k, n)
		}
	}
	// 49 decisions before the key is hot (estimate < 50), then 951 leased:
	// 96 round trips.
	if n := global.byKey["big-tenant"]; n != 49+96 {
		t.Errorf("big-tenant: %d round trips for 1000 decisions, want 145", n)
	}
}

// The lease table is bounded; a full one drops leases (their units are
// stranded) rather than grow.
func TestLeaseMaxKeys(t *testing.T) {
	global := newLeaseCounting(t, Spec{Rate: 1e6, Per: 1, Burst: 1e6})
	l := mustLeased(t, global, LeaseConfig{MaxKeys: 64, Shards: 4})
	for i := range 10_000 {
		l.AllowN(context.Background(), fmt.Sprint("k", i), 0, 1)
	}
	if st := l.Stats(); st.Leases > 64 || st.StrandedUnits < 9*(10_000-64) {
		t.Errorf("stats %+v: want ≤ 64 leases and the dropped leases' units stranded", st)
	}
}

// The local tier refuses floods without a round trip.
func TestTiered(t *testing.T) {
	local := mustMemory(t, Spec{Rate: 5, Per: 1, Burst: 5}, MemoryConfig{})
	global := newLeaseCounting(t, Spec{Rate: 3, Per: 1, Burst: 3})
	tier, err := NewTiered(local, global)
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for range 20 {
		if d, _ := tier.AllowN(context.Background(), "k", 0, 1); d.Allowed {
			allowed++
		}
	}
	// Local admits 5 of 20; of those the global admits 3.
	if allowed != 3 || global.calls.Load() != 5 {
		t.Errorf("%d allowed with %d round trips, want 3 with 5", allowed, global.calls.Load())
	}
	if _, err := NewTiered(nil, global); !errors.Is(err, ErrInvalidKeyedConfig) {
		t.Errorf("nil local tier: %v", err)
	}
}

func TestNewLeasedErrors(t *testing.T) {
	global := newLeaseCounting(t, Spec{Rate: 1, Per: 1})
	for _, c := range []struct {
		cfg   LeaseConfig
		field string
	}{
		{LeaseConfig{Size: -1}, "Size"},
		{LeaseConfig{TTL: -1}, "TTL"},
		{LeaseConfig{MaxKeys: -5}, "MaxKeys"},
		{LeaseConfig{Shards: 6}, "Shards"},
	} {
		if _, err := NewLeased(global, c.cfg); !errors.Is(err, ErrInvalidKeyedConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.field)
		}
	}
	if _, err := NewLeased(nil, LeaseConfig{}); !errors.Is(err, ErrInvalidKeyedConfig) {
		t.Errorf("nil global: %v", err)
	}
}

// leaseGate is a global store whose calls block until released, to hold a
// fetch in flight.
type leaseGate struct {
	inner   Keyed
	calls   atomic.Int64
	entered chan string
	release chan struct{}
}

func newLeaseGate(t testing.TB) *leaseGate {
	return &leaseGate{inner: mustMemory(t, Spec{Rate: 1e6, Per: 1, Burst: 1e6}, MemoryConfig{}),
		entered: make(chan string, 16), release: make(chan struct{}, 16)}
}

func (g *leaseGate) AllowN(ctx context.Context, key string, now float64, cost int) (Decision, error) {
	g.calls.Add(1)
	g.entered <- key
	<-g.release
	return g.inner.AllowN(ctx, key, now, cost)
}

// leaseNoLeak fails t if goroutines started after before are still running
// after a poll of at most 10 s (it ends as soon as they have; a loaded
// machine may take seconds to run them to their end).
func leaseNoLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the test", runtime.NumGoroutine(), before)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leaseWaiting polls (for at most 10 s) until n decisions have waited for a
// fetch in flight.
func leaseWaiting(t *testing.T, l *Leased, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.Stats().Waited < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d decisions waiting, want %d", l.Stats().Waited, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// leaseAsync runs AllowN in a goroutine and returns its result's channel.
func leaseAsync(ctx context.Context, l *Leased, key string) chan error {
	out := make(chan error, 1)
	go func() {
		d, err := l.AllowN(ctx, key, 0, 1)
		if err == nil && !d.Allowed {
			err = fmt.Errorf("refused: %+v", d)
		}
		out <- err
	}()
	return out
}

// A goroutine that finds the lease empty while another fetches it waits for
// that fetch instead of making a round trip of its own.
func TestLeaseWaitsForFetchInFlight(t *testing.T) {
	before := runtime.NumGoroutine()
	g := newLeaseGate(t)
	l := mustLeased(t, g, LeaseConfig{Size: 10, Refill: -1})
	a := leaseAsync(context.Background(), l, "k")
	<-g.entered // a's fetch is in flight
	b := leaseAsync(context.Background(), l, "k")
	leaseWaiting(t, l, 1)
	g.release <- struct{}{}
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if err := <-b; err != nil {
		t.Fatal(err)
	}
	if n := g.calls.Load(); n != 1 {
		t.Errorf("%d round trips, want 1: the waiter went to the global store", n)
	}
	leaseNoLeak(t, before)
}

// A waiter gives up when its context ends, with an error the fail mode
// handles; a lease dropped during its fetch still wakes its waiters.
func TestLeaseWaitEnds(t *testing.T) {
	before := runtime.NumGoroutine()
	g := newLeaseGate(t)
	l := mustLeased(t, g, LeaseConfig{Size: 10, Refill: -1, MaxKeys: 1, Shards: 1})
	a := leaseAsync(context.Background(), l, "k1")
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := leaseAsync(ctx, l, "k1")
	waiter := leaseAsync(context.Background(), l, "k1")
	leaseWaiting(t, l, 2)
	cancel()
	if err := <-cancelled; !errors.Is(err, ErrStoreUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled waiter: %v, want ErrStoreUnavailable and context.Canceled", err)
	}
	// k2 takes the only place: k1's lease (being fetched) is dropped.
	c := leaseAsync(context.Background(), l, "k2")
	if key := <-g.entered; key != "k2" {
		t.Fatalf("fetch for %s, want k2", key)
	}
	// Two fetches are in flight (k1's, k2's); the waiter may need a round
	// trip of its own if k2's lease takes the place again before it runs.
	for range 3 {
		g.release <- struct{}{}
	}
	for _, ch := range []chan error{a, waiter, c} {
		select {
		case err := <-ch:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a request still waits: a dropped lease's waiters were not woken")
		}
	}
	leaseNoLeak(t, before)
}
