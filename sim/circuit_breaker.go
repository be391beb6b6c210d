package sim

import (
	"strings"

	"github.com/spillwayhq/spillway/breaker"
)

// maxBreakerTimes bounds the --times list.
const maxBreakerTimes = 100000

var circuitBreaker = Scenario{
	Name:    "circuit-breaker",
	Ref:     "circuit_breaker",
	Summary: "a consecutive-failures circuit breaker in front of a service that fails its first calls",
	Bind: func(f *Flags) Runner {
		threshold := f.Int("threshold", 3, Positive, 1e9, "consecutive failures that open the breaker")
		recovery := f.Float("recovery", 5, Positive, "seconds the breaker stays OPEN before a trial call")
		times := f.Floats("times", []float64{0, 1, 2, 3, 10, 11}, Any,
			"seconds at which calls are made, in order (at most 100000; printed as JavaScript numbers)")
		failures := f.Int("failures", 3, NonNegative, 1e9, "the service fails this many of its first calls, then succeeds")
		return func() (*Report, error) {
			if len(*times) > maxBreakerTimes {
				return nil, Badf("times", "at most %d calls, got %d", maxBreakerTimes, len(*times))
			}
			return runCircuitBreaker(*threshold, *recovery, *times, *failures)
		}
	},
}

// The reference's output text (Bengali, copied from circuit_breaker.out).
const (
	breakerRejectedText = "REJECTED (fast-fail, ব্রেকার OPEN)"
	breakerTotalText    = "সার্ভিসকে মোট কতবার আসলে কল করা হয়েছে:"
	breakerSkippedText  = " সময় ব্রেকার OPEN থাকায় কল হয়নি)"
)

func runCircuitBreaker(threshold int, recovery float64, times []float64, failures int) (*Report, error) {
	b, err := breaker.New(breaker.Config{Threshold: threshold, Recovery: recovery})
	if err != nil {
		return nil, &UsageError{Msg: err.Error()}
	}
	r := &Report{}
	calls := r.Table("calls", "t_s", "result", "state", "failures", "service_called")
	served := 0
	var rejected []string
	for _, t := range times {
		label := Num(t)
		tk, err := b.Allow(t)
		var result string
		if err != nil {
			result = breakerRejectedText
			rejected = append(rejected, "t="+label)
			s := b.Snapshot()
			calls.Add(t, "rejected", s.State.String(), s.Failures, false)
		} else {
			served++
			ok := served > failures
			tk.Done(t, ok)
			s := b.Snapshot()
			if ok {
				result = "SUCCESS (state=" + s.State.String() + ")"
				calls.Add(t, "success", s.State.String(), s.Failures, true)
			} else {
				result = "FAILURE (state=" + s.State.String() + ", failures=" + Int(s.Failures) + ")"
				calls.Add(t, "failure", s.State.String(), s.Failures, true)
			}
		}
		r.Println("t=" + PadStart(label, 2) + "  ->  " + result)
	}
	r.Println("")
	// The reference names the skipped call's time in the text ("t=3"); here
	// the times come from the run, and the remark is left out when no call
	// was skipped.
	line := breakerTotalText + " " + Int(served)
	if len(rejected) > 0 {
		line += " (" + strings.Join(rejected, ", ") + breakerSkippedText
	}
	r.Println(line)
	r.Table("summary", "service_calls", "rejected").Add(served, len(rejected))
	return r, nil
}
