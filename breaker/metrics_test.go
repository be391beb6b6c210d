package breaker

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollector(t *testing.T) {
	b := mustNew(t, Config{Window: CountWindow, WindowCalls: 2, FailureRate: 0.5, SlowCall: 1, Recovery: 5})
	// ok, slow ok, failure: OPEN at 2; two rejections; a trial fails (OPEN
	// again), another succeeds (CLOSED); a cancelled call counts nowhere.
	play(t, b, "S0 S1+1 F2 S3 S4 F7 S12")
	tk, _ := b.Allow(13)
	tk.Cancel()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b.Collector("payments"))
	const want = `
# HELP spillway_breaker_calls_total Calls seen by the circuit breaker, by outcome: success, slow (succeeded slowly), failure (slow or not), rejected (not made: the breaker was open).
# TYPE spillway_breaker_calls_total counter
spillway_breaker_calls_total{breaker="payments",outcome="failure"} 2
spillway_breaker_calls_total{breaker="payments",outcome="rejected"} 2
spillway_breaker_calls_total{breaker="payments",outcome="slow"} 1
spillway_breaker_calls_total{breaker="payments",outcome="success"} 2
# HELP spillway_breaker_state State of the circuit breaker as the last call left it: 0 closed, 1 open, 2 half-open.
# TYPE spillway_breaker_state gauge
spillway_breaker_state{breaker="payments"} 0
# HELP spillway_breaker_transitions_total State changes of the circuit breaker, by states left and entered.
# TYPE spillway_breaker_transitions_total counter
spillway_breaker_transitions_total{breaker="payments",from="closed",to="open"} 1
spillway_breaker_transitions_total{breaker="payments",from="half_open",to="closed"} 1
spillway_breaker_transitions_total{breaker="payments",from="half_open",to="open"} 1
spillway_breaker_transitions_total{breaker="payments",from="open",to="half_open"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	play(t, b, "F20 F20") // OPEN
	const wantOpen = `
# HELP spillway_breaker_state State of the circuit breaker as the last call left it: 0 closed, 1 open, 2 half-open.
# TYPE spillway_breaker_state gauge
spillway_breaker_state{breaker="payments"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantOpen), "spillway_breaker_state"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(b.Collector("payments")); n != 9 {
		t.Fatalf("%d series, want 9", n)
	}
	if k := b.Counters(); k.Cancelled != 1 {
		t.Fatalf("cancelled %d, want 1", k.Cancelled)
	}
}
