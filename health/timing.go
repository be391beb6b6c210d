// Package health decides which endpoints may receive traffic: active checks
// (probe every Interval, Fall failures in a row mark an endpoint down, Rise
// successes mark it up) and passive checks (consecutive bad answers in real
// traffic).
//
//   - Tracker is the fall/rise state machine, fed results and instants;
//     Checker runs it for a set of targets, one goroutine each, with HTTP,
//     TCP or gRPC health v1 checks at jittered intervals, and reports
//     transitions (OnChange) — to a balancer.Set, typically.
//   - Detector is passive outlier detection (Envoy's): consecutive 5xx or
//     gateway failures eject an endpoint for a time that grows with each
//     ejection, never more than a share of the fleet.
//   - CheckTiming and PassiveTiming are the timing model of seed 001, which
//     answers "how long until a dead server stops getting traffic, and how
//     many requests fail meanwhile" for a given setting.
//
// Times are float64 seconds in the policy types, as everywhere in
// Spillway's policy code; only Checker reads a clock.
package health

// CheckTiming is an active health-check setting.
type CheckTiming struct {
	Interval float64 // seconds between the starts of two checks (HAProxy "inter")
	Timeout  float64 // seconds a check waits on a hung server before it fails
	Fall     int     // consecutive failed checks that mark a server down
	Rise     int     // consecutive passed checks that mark it up again
}

// WorstDetection is the longest time from a server hanging to it being marked
// down: it hung just after a check had started, so Fall further checks must
// each run into the timeout.
func (c CheckTiming) WorstDetection() float64 {
	return float64(float64(c.Fall)*c.Interval) + c.Timeout
}

// MeanDetection is the mean time to mark a hung server down when the failure
// is uniform between two checks: half an interval until the next check, Fall−1
// more intervals, then the last check's timeout.
func (c CheckTiming) MeanDetection() float64 {
	return c.Interval/2 + float64(float64(c.Fall-1)*c.Interval) + c.Timeout
}

// Recovery is the longest time from a server being fixed to it being marked
// up again: Rise passed checks.
func (c CheckTiming) Recovery() float64 {
	return float64(c.Rise) * c.Interval
}

// PassiveTiming is a passive (outlier-detection) setting: an endpoint is
// ejected after Consecutive bad answers in a row in real traffic.
type PassiveTiming struct {
	Consecutive    int     // bad answers in a row that eject an endpoint
	RequestTimeout float64 // seconds the proxy waits for an answer before it counts as bad
}

// FastErrorDetection is the time to eject an endpoint that fails fast, given
// the requests per second it receives.
func (p PassiveTiming) FastErrorDetection(qps float64) float64 {
	return float64(p.Consecutive) / qps
}

// HungDetection is the time to eject an endpoint that stopped answering: the
// first request's timeout, by which time Consecutive requests have been sent.
func (p PassiveTiming) HungDetection(qps float64) float64 {
	return p.RequestTimeout + float64(p.Consecutive)/qps
}

// CheckRate is the number of active checks per second that lbNodes balancers
// send when each checks each of servers every interval seconds.
func CheckRate(lbNodes, servers int, interval float64) float64 {
	return float64(lbNodes*servers) / interval
}
