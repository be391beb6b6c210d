package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/faultproxy"
	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
)

// outageStore is a Store (burst 1000, Timeout 5 s) on a Redis of the
// test's own through a fault proxy, whose client holds n idle connections.
func outageStore(t *testing.T, n int) (*redistest.Server, *faultproxy.Proxy, *Store) {
	srv := redistest.Start(t)
	px := faultproxy.Start(t, srv.Addr())
	st := newStore(t, outageClient(t, px, n), ratelimit.Spec{Rate: 1, Per: 1e9, Burst: 1000}, Config{Rule: "lost", Timeout: 5})
	return srv, px, st
}

// outageClient is a client of Redis srv through fault proxy px with the
// gateway's options (no go-redis retries, the context's deadline), whose
// pipeline pool (of n) holds n idle connections, all opened through px.
// Rounds of n pipelines that each block 1 s in Redis fill it: the
// pipelines of a round overlap unless the machine holds their goroutines
// back, and the pool only grows.
func outageClient(t *testing.T, px *faultproxy.Proxy, n int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, PoolSize: n, PipelinePoolSize: n})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); idlePipelineConns(c) < uint32(n); {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections after 30 s of rounds of %d pipelines, want %d", idlePipelineConns(c), n, n)
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					return p.BLPop(ctx, time.Second, "lostconn:none").Err()
				})
				if errors.Is(err, redis.Nil) {
					err = nil
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, err)
		}
	}
	return c
}

// TestLostConnsAfterOutage: Redis is black-holed, then killed, then
// restarts and the network heals, with 8 connections idle in the pool all
// the while. Each of them is dead now (the restarted Redis answers its
// first packet with a reset), and none of the decisions after the outage
// may fail for it: a batch whose connection is found dead is sent again on
// another.
func TestLostConnsAfterOutage(t *testing.T) {
	srv, px, st := outageStore(t, 8)
	px.BlackHole()
	srv.Kill()
	waitGone(t, px, 8)
	srv.Restart()
	px.Pass()
	for i := range 10 {
		d, err := st.AllowN(context.Background(), "k", 100, 1)
		if err != nil || !d.Allowed || d.Remaining != 999-i {
			t.Fatalf("decision %d after the outage: %+v, %v; want allowed on Redis, %d remaining", i, d, err, 999-i)
		}
	}
	if s := px.Stats(); s.Resets < 8 {
		t.Errorf("the proxy reset %d connections, want the 8 pooled during the outage", s.Resets)
	}
}

// TestLostConnsFreshFailing: behind a proxy that accepts connections and
// resets them (its target is gone), a decision fails at once with
// ErrStoreUnavailable: connections that die fresh are not tried again and
// again until the timeout.
func TestLostConnsFreshFailing(t *testing.T) {
	_, px, st := outageStore(t, 2)
	px.Reset()
	before := px.Stats().Accepted
	began := time.Now()
	_, err := st.AllowN(context.Background(), "k", 100, 1)
	took := time.Since(began)
	if !errors.Is(err, ratelimit.ErrStoreUnavailable) || errors.Is(err, ErrTimeout) {
		t.Fatalf("decision behind a resetting proxy: %v; want ErrStoreUnavailable, not a timeout", err)
	}
	// Not a connection per retry until maxLostConns or the 5 s timeout:
	// a fresh connection that dies ends the retries.
	if n := px.Stats().Accepted - before; n >= maxLostConns || took > 2500*time.Millisecond {
		t.Errorf("%d connections opened for one decision, in %v; want fewer than %d, in under half the 5 s timeout", n, took, maxLostConns)
	}
	t.Logf("failed after %v, %d connections opened", took, px.Stats().Accepted-before)
}

// waitGone waits until the proxy has seen the target's side of n
// connections end in the black hole (at most 5 s).
func waitGone(t *testing.T, px *faultproxy.Proxy, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); px.Stats().Gone < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy saw %d of %d connections' targets end", px.Stats().Gone, n)
		}
	}
}
