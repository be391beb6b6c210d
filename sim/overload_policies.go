package sim

import (
	"math"
	"slices"

	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/shed"
)

var overloadPolicies = Scenario{
	Name:    "overload-policies",
	Ref:     "overload_policies",
	Chart:   true,
	Summary: "goodput past capacity with an unbounded queue, a bound that fails fast, and priority shedding (shed.ClassLimiter)",
	Bind: func(f *Flags) Runner {
		var p overloadParams
		seed := f.Seed("seed", 42, "random seed; every (policy, load) run restarts from it")
		p.duration = f.Float("duration", 30, Positive, "seconds simulated per load level, from an empty server")
		p.timeout = f.Float("timeout", 1, Positive, "client timeout, seconds: an answer later than this is wasted work")
		p.service = f.Float("service", 0.010, Positive, "mean service time, seconds (exponential); capacity = 1/service per second")
		p.critical = f.Float("critical", 0.3, Fraction, "share of requests that are critical")
		p.loads = f.Floats("loads", []float64{50, 80, 100, 120, 150, 200}, Positive,
			"offered loads, requests per second (at most 20 levels; load × duration at most 2e6 arrivals each)")
		p.bounded = f.Int("bounded", 50, NonNegative, 1e7, "bounded policy: any request is refused (503) once this many are inside")
		p.prioCrit = f.Int("priority-critical", 50, NonNegative, 1e7, "priority policy: a critical request is refused once this many are inside")
		p.prioOther = f.Int("priority-other", 20, NonNegative, 1e7, "priority policy: any other request is refused once this many are inside (at most --priority-critical)")
		return func() (*Report, error) {
			p.seed, p.blame = *seed, f.Blame
			return runOverloadPolicies(p)
		}
	},
}

// overloadMaxArrivals caps load × duration for one run, to bound memory and
// time: each run keeps every admitted request's finish time.
const (
	overloadMaxArrivals = 2e6
	overloadMaxLoads    = 20
)

type overloadParams struct {
	seed                                 uint32
	duration, timeout, service, critical *float64
	loads                                *[]float64
	bounded, prioCrit, prioOther         *int
	blame                                func(names ...string) string // Flags.Blame
}

// overloadPolicy is one of the three policies: a name and class limits
// [critical, other] for shed.ClassLimiter.
type overloadPolicy struct {
	name   string
	key    string
	limits []int
}

// overloadResult is one (policy, load) run.
type overloadResult struct {
	good       int     // answered within the timeout and before the end
	p99        float64 // seconds, of the good answers; 0 if none
	rejected   int
	crit       int // critical requests that arrived
	critOK     int // of which answered in time
	inFlightAt int // admitted and unfinished at the last arrival before the end
}

func runOverloadPolicies(p overloadParams) (*Report, error) {
	loads, dur := *p.loads, *p.duration
	if len(loads) > overloadMaxLoads {
		return nil, Badf("loads", "at most %d load levels, got %d", overloadMaxLoads, len(loads))
	}
	for _, l := range loads {
		if l*dur > overloadMaxArrivals {
			return nil, Badf(p.blame("loads", "duration"), "load %s × duration %s = %s arrivals per run; at most %s (lower --loads or --duration)",
				Num(l), Num(dur), Num(l*dur), Num(overloadMaxArrivals))
		}
	}
	if *p.prioOther > *p.prioCrit {
		return nil, Badf(p.blame("priority-other", "priority-critical"), "--priority-other %d is above --priority-critical %d; other requests must be shed first", *p.prioOther, *p.prioCrit)
	}
	policies := []overloadPolicy{
		{"unbounded queue", "unbounded", []int{shed.NoLimit, shed.NoLimit}},
		{"bounded queue, fail fast", "bounded", []int{*p.bounded, *p.bounded}},
		{"priority shedding", "priority", []int{*p.prioCrit, *p.prioOther}},
	}

	r := &Report{}
	table := r.Table("results", "policy", "load", "good_per_s", "p99_ms", "rejected", "critical_ok_pct", "queue_at_end")
	good := r.Chart("Goodput against offered load", "offered load (requests/s)", "good answers/s (in time)")
	critChart := r.Chart("Critical requests answered in time", "offered load (requests/s)", "critical ok (%)")
	p99Chart := r.Chart("p99 latency of good answers", "offered load (requests/s)", "p99 (ms)")
	for k, pol := range policies {
		if k > 0 {
			r.Println("")
		}
		r.Println(pol.name)
		r.Println("load  good/s  p99 ms  rejected  critical ok  queue at " + Num(dur) + " s")
		goodY := make([]float64, len(loads))
		critY := make([]float64, len(loads))
		p99Y := make([]float64, len(loads))
		for i, load := range loads {
			res, err := overloadRun(p, pol.limits, load)
			if err != nil {
				return nil, err
			}
			goodPerS := float64(res.good) / dur
			p99ms := res.p99 * 1000
			critCell, critPct := "-", math.NaN()
			if res.crit > 0 {
				critPct = float64(100*res.critOK) / float64(res.crit)
				critCell = Fixed(critPct, 0) + "%"
			}
			r.Println(PadStart(Num(load), 4) + PadStart(Fixed(goodPerS, 1), 8) + PadStart(Fixed(p99ms, 0), 8) +
				PadStart(Int(res.rejected), 10) + PadStart(critCell, 13) + PadStart(Int(res.inFlightAt), 15))
			table.Add(pol.key, load, goodPerS, p99ms, res.rejected, critPct, res.inFlightAt)
			goodY[i], critY[i], p99Y[i] = goodPerS, critPct, p99ms
		}
		good.Line(pol.name, loads, goodY)
		critChart.Line(pol.name, loads, critY)
		p99Chart.Line(pol.name, loads, p99Y)
	}
	good.Line("offered load", loads, loads)
	return r, nil
}

// overloadRun simulates one policy at one load: Poisson arrivals, one FIFO
// server with exponential service, and the policy's shed.ClassLimiter at the
// door. A request is in flight from admission until it finishes; since the
// server is FIFO, requests finish in admission order, so the tokens are
// released from the front as the clock passes their finish times.
func overloadRun(p overloadParams, limits []int, load float64) (overloadResult, error) {
	var res overloadResult
	lim, err := shed.NewClassLimiter(shed.ClassConfig{Limits: limits})
	if err != nil {
		return res, Badf("", "%v", err)
	}
	dur, timeout, service, critShare := *p.duration, *p.timeout, *p.service, *p.critical
	src := rng.New(p.seed)
	var (
		finish []float64     // finish time of each admitted request, non-decreasing
		toks   []*shed.Token // its admission, released when it finishes
		lat    []float64     // latencies of the good answers
		head   int           // first admitted request not yet finished
		free   float64       // when the server finishes its current backlog
	)
	for t := src.Exp(1 / load); t < dur; t += src.Exp(1 / load) {
		isCrit := src.Float64() < critShare
		if isCrit {
			res.crit++
		}
		for head < len(finish) && finish[head] <= t {
			toks[head].Release()
			toks[head] = nil
			head++
		}
		class := shed.Default
		if isCrit {
			class = shed.Critical
		}
		tok, ok := lim.Admit(class)
		if !ok {
			res.rejected++ // 503 at once
			continue
		}
		free = math.Max(free, t) + src.Exp(service)
		finish = append(finish, free)
		toks = append(toks, &tok)
		if free-t <= timeout && free <= dur {
			lat = append(lat, free-t)
			if isCrit {
				res.critOK++
			}
		}
	}
	slices.Sort(lat)
	res.good = len(lat)
	res.p99 = NearestRank(lat, 0.99)
	res.inFlightAt = lim.InFlight()
	return res, nil
}
