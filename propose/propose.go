// Package propose turns a load test's knee into gateway limits: the
// arithmetic behind `spillway load --propose`. Make takes the knee that
// loadgen found and the steps it measured, and returns a Proposal — a rate
// limit and a concurrency limit 10% below the knee, a queue max wait from
// the service time, a request timeout from the p99 at the knee — whose
// YAML is a complete minimal gateway configuration that config.Parse (and
// so `spillway validate`) accepts as it is, with comments giving each
// number's formula and inputs.
//
// The rules, once:
//
//   - safe rate = loadgen.SafeShare (0.9) × the knee rate. The rate limit
//     is the safe rate on a shared (Redis) store, which counts across
//     every gateway; on the memory store each gateway counts alone, so
//     with N replicas each gets safe ÷ N.
//   - concurrency at the knee = knee rate × mean latency there (Little's
//     law, L = λW; the p50 when the mean is not known); the limit is 90% of
//     it, ÷ N per gateway (admission always counts per gateway).
//   - queue max_wait = 2 × the service time, the p50 at the lowest step,
//     where nothing queues: a request admitted from the queue then ends
//     within about 3 service times, the bound the knee itself allows its
//     p99 (KneeCriteria.P99Factor).
//   - request timeout = 2 × the p99 at the knee, rounded up to two
//     significant digits.
package propose

import (
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/spillwayhq/spillway/loadgen"
)

// ErrNoKnee is returned when the knee holds no sustained rate: there is
// nothing to take 10% below.
var ErrNoKnee = errors.New("propose: no knee (no step was sustained)")

// Factors of the rules above.
const (
	WaitFactor    = 2.0 // queue max_wait = WaitFactor × service time
	TimeoutFactor = 2.0 // request timeout = TimeoutFactor × p99 at the knee
)

// Options describe the gateway the proposal is for.
type Options struct {
	Route    string // name of the route and its cluster; "": "app"
	Endpoint string // host:port of the tested service, the cluster's endpoint (required)
	TLS      bool   // the service was tested over https: the cluster speaks TLS to it
	Replicas int    // gateway instances sharing the traffic; 0 or 1: one
	// Redis is the host:port of a Redis every gateway shares: the rate
	// limit is then global (the safe rate itself); "": the memory store,
	// each gateway counting alone (safe ÷ Replicas).
	Redis  string
	Listen string // the gateway's listener; "": 127.0.0.1:8080
	Source string // what was measured, for the header comment (a URL); "": Endpoint
}

// Proposal is the limits and what they were computed from.
type Proposal struct {
	Options

	Knee      loadgen.Knee
	KneeStep  loadgen.StepResult // the step run at the knee rate
	BaseStep  loadgen.StepResult // the lowest trusted step: the service time
	Safe      float64            // SafeShare × knee rate, for the whole fleet
	RateLimit float64            // the rule's rate: Safe, or Safe ÷ Replicas on the memory store
	// Latency is the W of Little's law, the mean at the knee (or its p50
	// when the mean is 0: LatencyName says which).
	Latency     time.Duration
	LatencyName string
	InFlight    float64       // knee rate × Latency: the calls in flight at the knee
	Concurrency int           // ⌊SafeShare × InFlight ÷ Replicas⌋, at least 1
	Service     time.Duration // BaseStep's p50
	MaxWait     time.Duration // WaitFactor × Service, rounded up to the millisecond
	P99         time.Duration // KneeStep's p99
	Timeout     time.Duration // TimeoutFactor × P99, rounded up to 2 significant digits
	Global      bool          // the rate limit counts across gateways (Redis)
}

// Make computes the proposal for knee k over steps (the ramp; k.Probes and
// k.Confirmations that passed are searched too for the step at the knee
// rate).
func Make(k loadgen.Knee, steps []loadgen.StepResult, o Options) (*Proposal, error) {
	if !(k.Rate > 0) || math.IsInf(k.Rate, 0) {
		return nil, ErrNoKnee
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	p := &Proposal{Options: o.withDefaults(), Knee: k}
	var ok bool
	if p.BaseStep, ok = lowestTrusted(steps); !ok {
		return nil, errors.New("propose: no trusted step to take the service time from")
	}
	if p.KneeStep, ok = stepAt(k.Rate, steps, k.Probes, passed(k.Confirmations)); !ok {
		return nil, fmt.Errorf("propose: no step at the knee rate %v req/s", k.Rate)
	}
	n := float64(p.Replicas)
	p.Safe = loadgen.SafeShare * k.Rate
	p.Global = p.Redis != ""
	p.RateLimit = p.Safe
	if !p.Global {
		p.RateLimit = p.Safe / n
	}
	p.RateLimit = floorSig(p.RateLimit, 3)
	p.Latency, p.LatencyName = p.KneeStep.Latency.Mean, "mean"
	if p.Latency <= 0 {
		p.Latency, p.LatencyName = p.KneeStep.Latency.P50, "p50"
	}
	p.InFlight = k.Rate * p.Latency.Seconds()
	p.Concurrency = max(1, int(math.Floor(loadgen.SafeShare*p.InFlight/n+1e-9)))
	p.Service = p.BaseStep.Latency.P50
	p.MaxWait = max(time.Millisecond, ceilTo(time.Duration(WaitFactor*float64(p.Service)), time.Millisecond))
	p.P99 = p.KneeStep.Latency.P99
	p.Timeout = max(time.Millisecond, ceilSig(time.Duration(TimeoutFactor*float64(p.P99)), 2))
	return p, nil
}

// Check refuses options the configuration would refuse, naming the field
// (Make checks them too; a command checks them before its run).
func (o Options) Check() error {
	if _, _, err := net.SplitHostPort(o.Endpoint); err != nil || o.Endpoint == "" {
		return fmt.Errorf("propose: endpoint: want host:port, got %q", o.Endpoint)
	}
	if o.Redis != "" {
		if _, _, err := net.SplitHostPort(o.Redis); err != nil {
			return fmt.Errorf("propose: redis: want host:port, got %q", o.Redis)
		}
	}
	if o.Replicas < 0 {
		return fmt.Errorf("propose: replicas: must be 0 or more, got %d", o.Replicas)
	}
	if o.Route != "" && !validName(o.Route) {
		return fmt.Errorf("propose: route: want 1 to 55 letters, digits, '.', '_' or '-', got %q", o.Route)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Route == "" {
		o.Route = "app"
	}
	if o.Replicas < 1 {
		o.Replicas = 1
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8080"
		if o.Endpoint == o.Listen {
			o.Listen = "127.0.0.1:8081"
		}
	}
	if o.Source == "" {
		o.Source = o.Endpoint
	}
	return o
}

// validName is the config's name kind, leaving room for the rule id's
// "-safe-rate" suffix (ids are at most 64 bytes).
func validName(s string) bool {
	if len(s) < 1 || len(s) > 55 {
		return false
	}
	for _, r := range s {
		ok := r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !ok {
			return false
		}
	}
	return true
}

func trusted(s loadgen.StepResult) bool { return !s.Invalid && !s.Partial && s.Offered > 0 }

// lowestTrusted is the trusted step of the lowest rate (FindKnee's base).
func lowestTrusted(steps []loadgen.StepResult) (loadgen.StepResult, bool) {
	var best loadgen.StepResult
	found := false
	for _, s := range steps {
		if trusted(s) && (!found || s.Rate < best.Rate) {
			best, found = s, true
		}
	}
	return best, found
}

// stepAt is the last trusted step run at rate, among the ramp's steps,
// then the probes, then the confirmations that passed (the knee is the
// rate of one of them; a passing confirmation replaces the measurement
// that failed at its rate).
func stepAt(rate float64, steps, probes, confirmed []loadgen.StepResult) (loadgen.StepResult, bool) {
	var at loadgen.StepResult
	found := false
	for _, list := range [][]loadgen.StepResult{steps, probes, confirmed} {
		for _, s := range list {
			if s.Rate == rate && trusted(s) {
				at, found = s, true
			}
		}
	}
	return at, found
}

// passed are the steps of the confirmations that passed.
func passed(cfs []loadgen.Confirmation) []loadgen.StepResult {
	var out []loadgen.StepResult
	for _, cf := range cfs {
		if cf.Passed() {
			out = append(out, cf.Step)
		}
	}
	return out
}

// floorSig rounds x > 0 down to d significant digits, and a number of 10^d
// or more down to a whole one: a limit is never rounded above what was
// measured.
func floorSig(x float64, d int) float64 {
	if !(x > 0) {
		return 0
	}
	scale := max(1, math.Pow(10, float64(d)-math.Ceil(math.Log10(x))))
	return math.Floor(x*scale+1e-9) / scale
}

// ceilSig rounds d up to n significant digits of milliseconds (at least a
// whole millisecond): 241.3ms → 250ms, 1.234s → 1.3s.
func ceilSig(d time.Duration, n int) time.Duration {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= 1 {
		return time.Millisecond
	}
	step := math.Pow(10, math.Ceil(math.Log10(ms))-float64(n))
	step = max(step, 1)
	return time.Duration(math.Ceil(ms/step-1e-9)*step) * time.Millisecond
}

// ceilTo rounds d up to a multiple of unit.
func ceilTo(d, unit time.Duration) time.Duration {
	return (d + unit - 1) / unit * unit
}
