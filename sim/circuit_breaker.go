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
	RefArgs: []string{"--seed-text"},
	Summary: "a consecutive-failures circuit breaker in front of a service that fails its first calls",
	Bind: func(f *Flags) Runner {
		threshold := f.Int("threshold", 3, Positive, 1e9, "consecutive failures that open the breaker")
		recovery := f.Float("recovery", 5, Positive, "seconds the breaker stays OPEN before a trial call")
		times := f.Floats("times", []float64{0, 1, 2, 3, 10, 11}, Any,
			"seconds at which calls are made, in order (at most 100000; printed as JavaScript numbers)")
		failures := f.Int("failures", 3, NonNegative, 1e9, "the service fails this many of its first calls, then succeeds")
		seedText := f.Bool("seed-text", false, "print the reference's text exactly as published (two of its lines are in Bengali); default English")
		return func() (*Report, error) {
			if len(*times) > maxBreakerTimes {
				return nil, Badf("times", "at most %d calls, got %d", maxBreakerTimes, len(*times))
			}
			text := breakerEnglish
			if *seedText {
				text = breakerSeed
			}
			return runCircuitBreaker(*threshold, *recovery, *times, *failures, text)
		}
	},
}

// breakerText is the wording of the two lines the reference prints in
// Bengali: the result of a refused call, and the closing count of calls
// that reached the service, followed — when calls were refused — by their
// times ("t=3") between open and close.
type breakerText struct {
	rejected, total, open, close string
}

// breakerSeed is the reference's text, copied from circuit_breaker.out. The
// reference names the refused call's time in the closing line ("t=3"); here
// the times come from the run, and the remark is left out when no call was
// refused.
var breakerSeed = breakerText{
	rejected: "REJECTED (fast-fail, ব্রেকার OPEN)",
	total:    "সার্ভিসকে মোট কতবার আসলে কল করা হয়েছে: ",
	open:     " (",
	close:    " সময় ব্রেকার OPEN থাকায় কল হয়নি)",
}

// breakerEnglish says the same in English (the reference's closing line
// reads "how many times the service was actually called in total: 5 (no
// call at t=3, the breaker being OPEN)").
var breakerEnglish = breakerText{
	rejected: "REJECTED (fast-fail, breaker OPEN)",
	total:    "Calls that reached the service: ",
	open:     " (none at ",
	close:    ": the breaker was OPEN)",
}

func runCircuitBreaker(threshold int, recovery float64, times []float64, failures int, text breakerText) (*Report, error) {
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
			result = text.rejected
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
	line := text.total + Int(served)
	if len(rejected) > 0 {
		line += text.open + strings.Join(rejected, ", ") + text.close
	}
	r.Println(line)
	r.Table("summary", "service_calls", "rejected").Add(served, len(rejected))
	return r, nil
}
