package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/clock"
)

// Breakers compared in the same run (issue 5: Allow + record ≤ 50 ns and
// 0 allocs, against github.com/sony/gobreaker/v2 and
// github.com/failsafe-go/failsafe-go):
//
//	cd bench/peers && go test -run '^$' -bench Peers -benchmem -count=5 ./breaker/
//
// BenchmarkPeers/SCENARIO/IMPL makes one call per op: permission, then a
// success report (or, in "open", the refusal). Scenarios, each also run
// with b.RunParallel as SCENARIO-parallel:
//
//	consecutive  opens on 5 consecutive failures
//	count        failure rate 0.5 over the last 100 calls, at least 10 calls
//	time         failure rate 0.5 over the last 60 s in 1 s buckets, at least 10 calls
//	open         the breaker is open: every call is refused
//
// Implementations: "spillway" takes now from the caller (here a counter
// advanced 100 ns per call: the breaker never reads a clock);
// "spillway-clock" reads clock.Real at Allow and at Done, as an adapter
// does; the peers read time.Now themselves (gobreaker at both steps,
// failsafe-go where its policy needs it). gobreaker has no count window.
// failsafe-go's side is in failsafe_test.go.
func BenchmarkPeers(b *testing.B) {
	for _, scenario := range []string{"consecutive", "count", "time", "open"} {
		for _, par := range []bool{false, true} {
			name := scenario
			if par {
				name += "-parallel"
			}
			b.Run(name, func(b *testing.B) {
				for _, p := range peers {
					newCaller := p.build(scenario)
					if newCaller == nil {
						continue
					}
					b.Run(p.name, func(b *testing.B) {
						b.ReportAllocs()
						if par {
							b.RunParallel(func(pb *testing.PB) {
								call := newCaller()
								for pb.Next() {
									call()
								}
							})
							return
						}
						call := newCaller()
						for b.Loop() {
							call()
						}
					})
				}
			})
		}
	}
}

// peer is a breaker implementation under comparison. build returns, for a
// scenario, a function making a caller (one per goroutine, sharing one
// breaker), or nil if the implementation has no such breaker.
type peer struct {
	name  string
	build func(scenario string) func() func()
}

var peers = []peer{
	{"spillway", func(s string) func() func() { return spillwayCaller(s, nil) }},
	{"spillway-clock", func(s string) func() func() { return spillwayCaller(s, clock.NewReal()) }},
	{"gobreaker", gobreakerCaller},
}

var errPeer = errors.New("peer benchmark: failure")

// spillwayConfig is the scenario's breaker.
func spillwayConfig(scenario string) breaker.Config {
	switch scenario {
	case "count":
		return breaker.Config{Window: breaker.CountWindow, WindowCalls: 100, MinCalls: 10, FailureRate: 0.5}
	case "time":
		return breaker.Config{Window: breaker.TimeWindow, WindowSeconds: 60, BucketSeconds: 1, MinCalls: 10, FailureRate: 0.5}
	case "open":
		return breaker.Config{Threshold: 1, Recovery: 1e9}
	}
	return breaker.Config{Threshold: 5}
}

func spillwayCaller(scenario string, clk *clock.Real) func() func() {
	br, err := breaker.New(spillwayConfig(scenario))
	if err != nil {
		panic(err)
	}
	if scenario == "open" {
		tk, _ := br.Allow(0)
		tk.Done(0, false)
	}
	return func() func() {
		if clk != nil {
			return func() {
				if tk, err := br.Allow(clk.Now()); err == nil {
					tk.Done(clk.Now(), true)
				}
			}
		}
		// Each caller's clock on a cache line of its own: adjacent
		// captured variables would make the goroutines of a parallel run
		// contend for a line the breaker does not use.
		c := &struct {
			now float64
			_   [56]byte
		}{now: 1}
		return func() {
			c.now += 1e-7
			if tk, err := br.Allow(c.now); err == nil {
				tk.Done(c.now, true)
			}
		}
	}
}

func gobreakerCaller(scenario string) func() func() {
	st := gobreaker.Settings{Timeout: time.Hour}
	switch scenario {
	case "count":
		return nil
	case "time":
		st.Interval, st.BucketPeriod = time.Minute, time.Second
		st.ReadyToTrip = func(c gobreaker.Counts) bool {
			return c.Requests >= 10 && float64(c.TotalFailures)/float64(c.Requests) >= 0.5
		}
	case "open":
		st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 }
	default:
		st.ReadyToTrip = func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 }
	}
	cb := gobreaker.NewTwoStepCircuitBreaker[any](st)
	if scenario == "open" {
		done, _ := cb.Allow()
		done(errPeer)
	}
	return func() func() {
		return func() {
			if done, err := cb.Allow(); err == nil {
				done(nil)
			}
		}
	}
}
