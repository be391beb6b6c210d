package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
)

// counted counts the calls that reach a Keyed.
type counted struct {
	inner ratelimit.Keyed
	n     atomic.Int64
}

func (c *counted) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	c.n.Add(1)
	return c.inner.AllowN(ctx, key, now, cost)
}

// tinyFloor is a local floor: one in-memory GCRA limiter per key, Burst 2
// and a rate so slow that nothing refills during the test.
type tinyFloor struct {
	mu   sync.Mutex
	keys map[string]*ratelimit.Limiter[ratelimit.GCRAState]
}

func (f *tinyFloor) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]*ratelimit.Limiter[ratelimit.GCRAState]{}
	}
	lim := f.keys[key]
	if lim == nil {
		g, err := ratelimit.NewGCRA(ratelimit.Limit{Rate: 1e-6, Burst: 2})
		if err != nil {
			return ratelimit.Decision{}, err
		}
		lim = ratelimit.NewLimiter[ratelimit.GCRAState](g)
		f.keys[key] = lim
	}
	return lim.AllowN(now, cost), nil
}

// TestFailModesRedisKilled: a Redis of the test's own is killed mid-test.
// Fail open serves (the floor applies), fail closed refuses; after three
// failures the breakers stop calling the store (counted), so requests cost
// nothing; Redis is restarted and the breakers' trials notice. The store's
// Timeout is long: a killed Redis refuses at once, and a healthy one on a
// loaded machine must not look dead.
func TestFailModesRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 100 * time.Millisecond, ContextTimeoutEnabled: true, PoolSize: 100})
	t.Cleanup(func() { client.Close() })
	const timeout = 5 // seconds
	st := newStore(t, client, ratelimit.Spec{Rate: 1, Per: 1e9, Burst: 1000}, Config{Rule: "failmode", Timeout: timeout})
	br := breaker.Config{Threshold: 3, Recovery: 1}
	openStore, closedStore := &counted{inner: st}, &counted{inner: st}
	open, err := ratelimit.NewGuarded(openStore, ratelimit.GuardConfig{Mode: ratelimit.FailOpen, Floor: &tinyFloor{}, Breaker: br})
	must(t, err)
	closed, err := ratelimit.NewGuarded(closedStore, ratelimit.GuardConfig{Mode: ratelimit.FailClosed, Breaker: br})
	must(t, err)
	ctx := context.Background()
	now := 100.0

	// Healthy: Redis decides (the floor's burst is 2, Redis's 1000).
	for i := range 3 {
		for _, g := range []*ratelimit.Guarded{open, closed} {
			d, err := g.AllowN(ctx, "healthy", now, 1)
			if err != nil || !d.Allowed || d.Remaining < 990 {
				t.Fatalf("healthy request %d: %+v, %v", i, d, err)
			}
		}
	}

	srv.Kill()
	// Three failures each: open serves from the floor (2 of 3), closed refuses.
	var openAllowed int
	for i := range 3 {
		d, err := open.AllowN(ctx, "u", now, 1)
		if err != nil {
			t.Fatalf("fail open, request %d: error %v", i, err)
		}
		if d.Allowed {
			openAllowed++
		}
		d, err = closed.AllowN(ctx, "u", now, 1)
		if d.Allowed || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
			t.Fatalf("fail closed, request %d: %+v, %v; want refused with ErrStoreUnavailable", i, d, err)
		}
	}
	if openAllowed != 2 {
		t.Errorf("fail open served %d of 3 with a floor of 2", openAllowed)
	}
	if open.Breaker().State != breaker.Open || closed.Breaker().State != breaker.Open {
		t.Fatalf("breakers %v and %v after 3 failures, want OPEN", open.Breaker().State, closed.Breaker().State)
	}
	callsOpen, callsClosed := openStore.n.Load(), closedStore.n.Load()

	// While open: no call, no wait.
	start := time.Now()
	openAllowed = 0
	for i := range 100 {
		d, err := open.AllowN(ctx, "v", now+0.5, 1)
		if err != nil {
			t.Fatalf("fail open with the breaker open, request %d: %v", i, err)
		}
		if d.Allowed {
			openAllowed++
		}
		if d, err := closed.AllowN(ctx, "v", now+0.5, 1); d.Allowed || !errors.Is(err, ratelimit.ErrStoreOpen) {
			t.Fatalf("fail closed with the breaker open: %+v, %v; want ErrStoreOpen", d, err)
		}
	}
	elapsed := time.Since(start)
	if openStore.n.Load() != callsOpen || closedStore.n.Load() != callsClosed {
		t.Fatalf("the store was called while the breakers were open: %d and %d calls, want %d and %d",
			openStore.n.Load(), closedStore.n.Load(), callsOpen, callsClosed)
	}
	if openAllowed != 2 {
		t.Errorf("fail open served %d of 100 for a new key, want the floor's 2", openAllowed)
	}
	// No call was made (counted above); and none waited: all 200 took less
	// than one store Timeout.
	if elapsed > timeout*time.Second {
		t.Errorf("200 requests with the breakers open took %v, more than one store Timeout", elapsed)
	}

	// Redis comes back (empty: no persistence). Each Recovery second one
	// trial goes to the store; the first that succeeds closes the breaker.
	srv.Restart()
	for _, g := range []struct {
		name  string
		guard *ratelimit.Guarded
		calls *counted
	}{{"open", open, openStore}, {"closed", closed, closedStore}} {
		before := g.calls.n.Load()
		t0 := now
		for try := 1; ; try++ {
			t0 += br.Recovery
			d, err := g.guard.AllowN(ctx, "w-"+g.name, t0, 1)
			if got := g.calls.n.Load() - before; got != int64(try) {
				t.Fatalf("%s: %d store calls in %d trials", g.name, got, try)
			}
			if err == nil && d.Allowed && d.Remaining == 999 {
				break // Redis decided
			}
			if try == 20 {
				t.Fatalf("%s: no recovery after %d trials: %+v, %v", g.name, try, d, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if s := g.guard.Breaker().State; s != breaker.Closed {
			t.Fatalf("%s: breaker %v after a successful trial", g.name, s)
		}
		d, err := g.guard.AllowN(ctx, "w-"+g.name, t0, 1)
		if err != nil || d.Remaining != 998 {
			t.Fatalf("%s: after recovery %+v, %v; want Redis's answer", g.name, d, err)
		}
	}
}
