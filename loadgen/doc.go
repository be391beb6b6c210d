// Package loadgen is an open-loop load generator: the library part of
// `spillway load` and of `spillway demo`.
//
// Requests are sent at the times an arrival process (constant or Poisson)
// gives, whether or not earlier ones have been answered, so a slow server
// meets the load it would meet in production instead of slowing the
// generator down (no coordinated omission). Latency is measured from the
// intended send time, as wrk2 does; the lag between intended and actual
// send is measured too, and a step whose lag p99 exceeds MaxSendLag is
// marked invalid: the generator, not the server, was late.
//
// In-flight requests are bounded (MaxInFlight). An arrival that finds the
// bound full, or that the generator could not send before its timeout
// passed, is not dropped silently: it counts as unsent, as a failure in
// goodput and as a timeout in the latency histogram.
//
// A run is a sequence of steps (a rate held for a duration: ramps and
// stairs), and reports per step goodput (successes within the timeout),
// throughput, latency quantiles from HDR histograms, statuses and the
// gateway's refusals by class and reason (Spillway-Reason), and retries.
// FindKnee and Bisect find the highest rate a service sustains;
// ConfirmKnee is FindKnee measuring again (through a Probe, as Bisect's)
// the step the ramp would end at. A trusted step or probe that fails is
// measured once more at its rate, and the rate fails only when the second
// measurement fails too, so one stall of a busy machine (a GC pause, a
// neighbour) is not taken for the service's limit; KneeCriteria.NoConfirm
// saves that step at the failing rate. The confirmations are in
// Knee.Confirmations and in every report.
//
// The generator is an edge of the system: it paces on real timers and reads
// the wall clock (monotonic time), which the policies it drives never do.
package loadgen
