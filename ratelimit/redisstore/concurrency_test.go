package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The race experiment of seed 002, at gateway scale: 4 gateways (separate
// clients and Stores) × 64 goroutines send 10,000 requests for one key
// against a limit of 100.
const (
	raceGateways   = 4
	raceGoroutines = 64
	raceRequests   = 10000
	raceLimit      = 100
)

// raceSpecs: each algorithm with a limit of 100 over a period so long
// (10^9 s) that nothing refills or rolls during the test. The leaky queue
// releases its first unit at once (it never waits), so a queue of 99 plus
// that one make 100.
var raceSpecs = []ratelimit.Spec{
	{Algorithm: ratelimit.AlgGCRA, Rate: raceLimit, Per: 1e9},
	{Algorithm: ratelimit.AlgTokenBucket, Rate: raceLimit, Per: 1e9},
	{Algorithm: ratelimit.AlgLeakyMeter, Rate: raceLimit, Per: 1e9},
	{Algorithm: ratelimit.AlgLeakyQueue, Rate: raceLimit, Per: 1e9, Burst: raceLimit - 1},
	{Algorithm: ratelimit.AlgFixedWindow, Rate: raceLimit, Per: 1e9},
	{Algorithm: ratelimit.AlgSlidingLog, Rate: raceLimit, Per: 1e9},
	{Algorithm: ratelimit.AlgSlidingCounter, Rate: raceLimit, Per: 1e9},
}

// race runs raceRequests decisions over the gateways' deciders from
// raceGoroutines goroutines and returns how many were admitted and failed.
func race(gateways []func(ctx context.Context) (bool, error)) (admitted, failed int64) {
	var next, ok, bad atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range raceGateways * raceGoroutines {
		decide := gateways[g%len(gateways)]
		wg.Go(func() {
			<-start
			for next.Add(1) <= raceRequests {
				allowed, err := decide(context.Background())
				switch {
				case err != nil:
					bad.Add(1)
				case allowed:
					ok.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return ok.Load(), bad.Load()
}

// TestExactUnderConcurrency: every algorithm's script is atomic, so exactly
// 100 of the 10,000 requests pass, whatever the interleaving.
func TestExactUnderConcurrency(t *testing.T) {
	be := testBackend(t)
	for _, spec := range raceSpecs {
		t.Run(spec.Algorithm.Name(), func(t *testing.T) {
			prefix := testPrefix(t)
			var stores []*Store
			var gateways []func(context.Context) (bool, error)
			for range raceGateways {
				st := newStore(t, newClient(t, be.addr), spec, Config{Rule: "race", Prefix: prefix, Timeout: 10})
				stores = append(stores, st)
				gateways = append(gateways, func(ctx context.Context) (bool, error) {
					d, err := st.AllowN(ctx, "hot", 0, 1)
					return d.Allowed, err
				})
			}
			admitted, failed := race(gateways)
			var trips, decisions uint64
			for _, st := range stores {
				s := st.Stats()
				trips += s.RoundTrips
				decisions += s.Decisions
			}
			t.Logf("%s: admitted %d of %d, %d errors, %d decisions in %d round trips", spec.Algorithm, admitted, raceRequests, failed, decisions, trips)
			if failed != 0 || admitted != raceLimit {
				t.Fatalf("admitted %d with %d errors, want exactly %d and no error", admitted, failed, raceLimit)
			}
		})
	}
}

// TestGetThenSetOvershoots is the contrast: the seed's GET-then-SET counter
// (read the count, and if it is below the limit write count+1) run the
// same way on the same Redis admits far more than 100, because many
// goroutines read the same count before any of them writes.
func TestGetThenSetOvershoots(t *testing.T) {
	be := testBackend(t)
	key := testPrefix(t) + ":{hot}:getset"
	var gateways []func(context.Context) (bool, error)
	for range raceGateways {
		c := newClient(t, be.addr)
		gateways = append(gateways, func(ctx context.Context) (bool, error) {
			n, err := c.Get(ctx, key).Int()
			if errors.Is(err, redis.Nil) {
				n, err = 0, nil
			}
			if err != nil || n >= raceLimit {
				return false, err
			}
			return true, c.Set(ctx, key, n+1, time.Minute).Err()
		})
	}
	admitted, failed := race(gateways)
	t.Logf("GET then SET: admitted %d of %d against a limit of %d (%d errors)", admitted, raceRequests, raceLimit, failed)
	if failed != 0 || admitted <= raceLimit {
		t.Fatalf("admitted %d with %d errors, want more than %d: the flaw did not show", admitted, failed, raceLimit)
	}
}
