// Benchmarks against failsafe-go's circuit breaker, in the same run as ours
// and gobreaker's (see breaker_test.go).

package breaker_test

import (
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
)

func init() {
	peers = append(peers, peer{"failsafe", failsafeCaller})
}

func failsafeCaller(scenario string) func() func() {
	bld := circuitbreaker.NewBuilder[any]().WithDelay(time.Hour)
	switch scenario {
	case "count":
		bld = bld.WithFailureThresholdRatio(50, 100)
	case "time":
		bld = bld.WithFailureRateThreshold(0.5, 10, time.Minute)
	case "open":
		bld = bld.WithFailureThreshold(1)
	default:
		bld = bld.WithFailureThreshold(5)
	}
	cb := bld.Build()
	if scenario == "open" {
		cb.TryAcquirePermit()
		cb.RecordFailure()
	}
	return func() func() {
		return func() {
			if cb.TryAcquirePermit() {
				cb.RecordSuccess()
			}
		}
	}
}
