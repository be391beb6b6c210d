package redisstore

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// TestCollectorRoundTripLatency: each pipeline sent is one observation of
// spillway_ratelimit_redis_round_trip_seconds, with its time in the sum;
// the histogram is there only while a rule store is open.
func TestCollectorRoundTripLatency(t *testing.T) {
	b := testBackend(t)
	stores, err := NewStores(newClient(t, b.addr), StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 5, Workers: 1}})
	must(t, err)
	t.Cleanup(func() { stores.Close() })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stores.Collector())
	if n, s := tripHistogram(t, reg); n != 0 || s != 0 {
		t.Fatalf("before any rule: %d round trips, %v s; want no histogram", n, s)
	}
	rs := metricsRuleStore(t, stores, rules.Rule{ID: "rt", Spec: ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 100, Per: 1}})
	const n = 5
	for i := 0; i < n; i++ { // one at a time: each its own pipeline
		if _, err := rs.AllowN(context.Background(), "k", float64(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	trips := rs.redis.Stats().RoundTrips
	got, sum := tripHistogram(t, reg)
	if got < n || got != trips || sum <= 0 || sum > float64(got)*5 {
		t.Fatalf("histogram: %d round trips, sum %v s; want %d (the store's round trips, at least %d), a positive sum below the 5 s timeout each", got, sum, trips, n)
	}
}

// tripHistogram returns the round-trip histogram's count and sum (0, 0:
// absent).
func tripHistogram(t *testing.T, reg *prometheus.Registry) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "spillway_ratelimit_redis_round_trip_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	return 0, 0
}
