package loadgen

import (
	"time"
)

// Arrivals is the arrival process of a step.
type Arrivals int

const (
	// Constant sends one request every 1/rate seconds.
	Constant Arrivals = iota
	// Poisson sends requests at exponentially distributed gaps of mean 1/rate.
	Poisson
)

// Step holds Rate (requests per second) for Duration.
type Step struct {
	Rate     float64
	Duration time.Duration
}

// Quantiles are latency quantiles, from intended send to the end of the
// response body (or the timeout), and their mean.
type Quantiles struct {
	P50, P90, P99, P999, Max time.Duration
	// Mean is the histogram's mean (to its 3 significant digits): what
	// Little's law multiplies by a rate to give the calls in flight.
	Mean time.Duration
}

// StepResult is what one step did. Counts are by arrival: an arrival
// belongs to the step in which it was due, and is counted once it ended
// (answered, failed, timed out, or unsent).
type StepResult struct {
	Index    int
	Rate     float64       // asked, requests per second
	Duration time.Duration // asked
	Elapsed  time.Duration // measured: from the step's start to its last arrival's intended time plus one gap

	Offered  int // arrivals due in the step
	Sent     int // of which sent (first attempts)
	Unsent   int // not sent on time: in-flight bound full, or overdue by the timeout
	OK       int // answered 2xx (at any time)
	Good     int // answered 2xx within the timeout, measured from the intended send
	Failed   int // Offered − Good: errors, timeouts, late answers and unsent
	Timeouts int // no answer within the timeout (unsent included)
	Retries  int // retries sent by the client policy for this step's arrivals
	Attempts int // attempts sent during the step's window, whatever their arrival's step: the load the server saw

	Throughput float64 // OK per second of Elapsed
	Goodput    float64 // Good per second of Elapsed

	Latency     Quantiles // every arrival; an unsent one counts as Timeout, a timed-out one as the time it was given up (Timeout to Deadline)
	GoodLatency Quantiles // the good calls only (the seed's tables report this p99)
	SendLag     Quantiles // actual − intended send time of the sent ones
	Invalid     bool      // SendLag.P99 > Config.MaxSendLag: the generator was late
	// Partial: the run stopped (ctx ended or an abort) before the step was
	// over; it counts the arrivals that ended before the stop, and calls
	// cut short by the stop are not counted at all.
	Partial bool

	Statuses map[int]int               // final answers by HTTP status; 0: transport error or timeout
	Refusals map[string]map[string]int // class → Spillway-Reason → count (answers that carried one)
	Classes  map[string]ClassResult    // class → its counts ("" when no class mix)
}

// ClassResult counts one criticality class's arrivals in a step.
type ClassResult struct {
	Offered, Good int
}

// ErrorRate is the share of offered arrivals that did not succeed (any
// non-2xx, transport error, timeout or unsent), in [0, 1].
func (s StepResult) ErrorRate() float64 {
	if s.Offered == 0 {
		return 0
	}
	return float64(s.Offered-s.OK) / float64(s.Offered)
}

// GoodShare is Good over Offered, in [0, 1].
func (s StepResult) GoodShare() float64 {
	if s.Offered == 0 {
		return 0
	}
	return float64(s.Good) / float64(s.Offered)
}

// Progress is the state of the running step, reported about once a second.
type Progress struct {
	Step       int
	Rate       float64       // asked
	Elapsed    time.Duration // in the step
	Sent       int           // in the step so far
	Unsent     int
	InFlight   int
	Goodput    float64 // good answers per second over the last report interval
	P99        time.Duration
	ErrorRate  float64 // over the last report interval
	SendLagP99 time.Duration
}
