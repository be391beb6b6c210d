package sim

import (
	"math"
	"slices"

	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/shed"
)

// adaptive has no reference experiment (Ref ""): it is Spillway's own
// experiment for issue 4, running limit.Limiter with each limit.Algorithm
// against a server whose capacity is hidden from them.
var adaptive = Scenario{
	Name:    "adaptive",
	Ref:     "",
	Chart:   true,
	Summary: "adaptive concurrency limits (limit.Limiter) finding a hidden server capacity at 2× load, through a capacity dip",
	Bind: func(f *Flags) Runner {
		var p adaptiveParams
		seed := f.Seed("seed", 42, "random seed: arrivals (the same for every algorithm) and latency noise")
		p.concurrency = f.Int("concurrency", 100, Positive, adaptiveMaxConcurrency,
			"the server's hidden true concurrency C: past C in flight, latency grows in proportion")
		p.latency = f.Float("latency", 0.040, Positive, "base latency L, seconds; capacity = C/L requests per second")
		p.load = f.Float("load", 2, Positive, "offered load as a multiple of capacity (open-loop Poisson arrivals)")
		p.critical = f.Float("critical", 0.2, Fraction, "share of requests that are critical")
		p.sheddable = f.Float("sheddable", 0.4, Fraction, "share of requests that are sheddable (the rest are default)")
		p.duration = f.Float("duration", 60, Positive, "seconds simulated (at most 3600; load × capacity × duration at most 2e6 arrivals)")
		p.dipFrom = f.Float("dip-from", 20, NonNegative, "the server's concurrency is halved from this instant, seconds")
		p.dipTo = f.Float("dip-to", 40, NonNegative, "... until this instant, seconds (equal to --dip-from: no dip)")
		p.timeout = f.Float("timeout", 1, Positive, "client timeout, seconds: a later answer is wasted work (a Dropped outcome)")
		p.noise = f.Float("noise", 0, NonNegative, "mean of exponential latency noise added to each request, as a multiple of L (at most 100)")
		return func() (*Report, error) {
			p.seed = *seed
			return runAdaptive(p)
		}
	},
}

// Caps on the adaptive scenario's work: arrivals per algorithm run (each run
// keeps the good answers' latencies), the hidden concurrency, the duration.
const (
	adaptiveMaxArrivals    = 2e6
	adaptiveMaxConcurrency = 100000
	adaptiveMaxDuration    = 3600
	adaptiveMaxNoise       = 100
	adaptiveStep           = 5 // seconds per time-series bucket (longer runs use duration/40)
)

type adaptiveParams struct {
	seed                                     uint32
	concurrency                              *int
	latency, load, critical, sheddable       *float64
	duration, dipFrom, dipTo, timeout, noise *float64
}

// adaptiveAlg is one algorithm under test.
type adaptiveAlg struct {
	name string
	make func() (limit.Algorithm, error)
}

// adaptiveRun is one algorithm's results.
type adaptiveRun struct {
	phaseLimit   [3]float64 // time-weighted mean limit before, during, after the dip (NaN: empty phase)
	good         int        // answers within the timeout
	p99          float64    // seconds, of the good answers (0 if none)
	crit, critOK int
	shed, shedOK int
	rejected     int
	timedOut     int       // admitted, answered after the timeout
	bucketLimit  []float64 // per time bucket: mean limit
	bucketGood   []float64 // good answers completed in the bucket, as % of capacity
	bucketP99    []float64 // p99 of those, ms (0 if none)
}

func runAdaptive(p adaptiveParams) (*Report, error) {
	C, L, load, dur := *p.concurrency, *p.latency, *p.load, *p.duration
	capacity := float64(C) / L
	switch {
	case dur > adaptiveMaxDuration:
		return nil, Badf("duration", "at most %d seconds, got %s", adaptiveMaxDuration, Num(dur))
	case !(load*capacity*dur <= adaptiveMaxArrivals):
		return nil, Badf("load", "load × capacity × duration = %s arrivals; at most %s (capacity = concurrency/latency = %s/s)",
			Num(load*capacity*dur), Num(adaptiveMaxArrivals), Num(capacity))
	case *p.critical+*p.sheddable > 1:
		return nil, Badf("sheddable", "--critical %s + --sheddable %s exceed 1", Num(*p.critical), Num(*p.sheddable))
	case *p.dipTo < *p.dipFrom:
		return nil, Badf("dip-to", "%s is before --dip-from %s", Num(*p.dipTo), Num(*p.dipFrom))
	case *p.noise > adaptiveMaxNoise:
		return nil, Badf("noise", "at most %d, got %s", adaptiveMaxNoise, Num(*p.noise))
	}
	maxLimit := max(1000, 4*C)
	algs := []adaptiveAlg{
		{"fixed", func() (limit.Algorithm, error) { return limit.NewFixed(C) }},
		{"aimd", func() (limit.Algorithm, error) {
			return limit.NewAIMD(limit.AIMDConfig{Baseline: L, MaxLimit: maxLimit})
		}},
		{"gradient", func() (limit.Algorithm, error) { return limit.NewGradient(limit.GradientConfig{MaxLimit: maxLimit}) }},
		{"gradient2", func() (limit.Algorithm, error) { return limit.NewGradient2(limit.Gradient2Config{MaxLimit: maxLimit}) }},
		{"vegas", func() (limit.Algorithm, error) { return limit.NewVegas(limit.VegasConfig{MaxLimit: maxLimit}) }},
	}
	const seriesAlg = 2 // gradient: the recommended default

	step := float64(adaptiveStep)
	if dur > 40*adaptiveStep {
		step = dur / 40
	}
	nb := int(math.Ceil(dur / step))
	if nb > 1 && float64(nb-1)*step >= dur { // dur/step rounded up past a whole number
		nb--
	}
	bucketX := make([]float64, nb)
	for i := range bucketX {
		bucketX[i] = math.Min(float64(i+1)*step, dur)
	}

	r := &Report{}
	dipFrom, dipTo := math.Min(*p.dipFrom, dur), math.Min(*p.dipTo, dur)
	r.Println("server: true concurrency " + Int(C) + ", latency " + Num(L*1000) + " ms × max(1, in flight / C), capacity " +
		Fixed(capacity, 0) + "/s; offered " + Num(load) + "× capacity for " + Num(dur) + " s")
	r.Println("concurrency halved to " + Num(float64(C)/2) + " from " + Num(*p.dipFrom) + " s to " + Num(*p.dipTo) +
		" s; client timeout " + Num(*p.timeout) + " s; goodput = answers within the timeout, % of capacity over the run")
	r.Println("")
	r.Println("algorithm   limit before  during  after  goodput  p99 ms  critical ok  sheddable ok  rejects")
	table := r.Table("results", "algorithm", "limit_before", "limit_during", "limit_after", "goodput_pct", "p99_ms",
		"critical_ok_pct", "sheddable_ok_pct", "rejects", "timeouts")
	limChart := r.Chart("Concurrency limit over time", "time (s)", "limit (mean per bucket)")
	goodChart := r.Chart("Goodput over time", "time (s)", "answers within the timeout (% of full capacity)")
	p99Chart := r.Chart("p99 latency of good answers over time", "time (s)", "p99 (ms)")

	// The capacity available over the run, in requests: C/L outside the dip,
	// half inside it.
	avail := capacity * (dur - (dipTo-dipFrom)/2)
	var series adaptiveRun
	for i, a := range algs {
		alg, err := a.make()
		if err != nil {
			return nil, Badf("", "%s: %v", a.name, err)
		}
		res, err := adaptiveSim(p, alg, step, nb)
		if err != nil {
			return nil, err
		}
		goodPct := 100 * float64(res.good) / avail
		p99ms := res.p99 * 1000
		critPct, shedPct := adaptivePct(res.critOK, res.crit), adaptivePct(res.shedOK, res.shed)
		r.Println(PadEnd(a.name, 12) + PadStart(adaptiveCell(res.phaseLimit[0], 1, ""), 12) +
			PadStart(adaptiveCell(res.phaseLimit[1], 1, ""), 8) + PadStart(adaptiveCell(res.phaseLimit[2], 1, ""), 7) +
			PadStart(Fixed(goodPct, 1)+"%", 9) + PadStart(Fixed(p99ms, 0), 8) +
			PadStart(adaptiveCell(critPct, 1, "%"), 13) + PadStart(adaptiveCell(shedPct, 1, "%"), 14) +
			PadStart(Int(res.rejected), 9))
		table.Add(a.name, res.phaseLimit[0], res.phaseLimit[1], res.phaseLimit[2], goodPct, p99ms,
			critPct, shedPct, res.rejected, res.timedOut)
		limChart.Line(a.name, bucketX, res.bucketLimit)
		goodChart.Line(a.name, bucketX, res.bucketGood)
		p99Chart.Line(a.name, bucketX, res.bucketP99)
		if i == seriesAlg {
			series = res
		}
	}
	trueC := make([]float64, nb)
	for i := range trueC {
		trueC[i] = float64(C)
		if mid := bucketX[i] - step/2; mid >= dipFrom && mid < dipTo {
			trueC[i] = float64(C) / 2
		}
	}
	limChart.Line("true concurrency", bucketX, trueC)

	r.Println("")
	r.Println(algs[seriesAlg].name + " over time (each row: the " + Num(step) + " s ending at t)")
	r.Println("   t  limit  goodput  p99 ms")
	ts := r.Table("series_"+algs[seriesAlg].name, "t", "limit", "goodput_pct", "p99_ms")
	for i := range nb {
		r.Println(PadStart(Num(bucketX[i]), 4) + PadStart(Fixed(series.bucketLimit[i], 1), 7) +
			PadStart(Fixed(series.bucketGood[i], 1)+"%", 9) + PadStart(Fixed(series.bucketP99[i], 0), 8))
		ts.Add(bucketX[i], series.bucketLimit[i], series.bucketGood[i], series.bucketP99[i])
	}
	return r, nil
}

// adaptivePct is 100·ok/n, NaN when n is 0.
func adaptivePct(ok, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return 100 * float64(ok) / float64(n)
}

// adaptiveCell formats x with d decimals and a suffix, or "-" for NaN.
func adaptiveCell(x float64, d int, suffix string) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return Fixed(x, d) + suffix
}

// adaptiveEvent is an admitted request's completion.
type adaptiveEvent struct {
	at    float64 // when the server answers
	seq   int     // admission order, to break ties
	slot  int     // index of its Ticket
	start float64
	class shed.Class
}

// adaptiveHeap is a min-heap of completions by (at, seq).
type adaptiveHeap []adaptiveEvent

func (h adaptiveHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h *adaptiveHeap) push(e adaptiveEvent) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s.less(i, parent) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *adaptiveHeap) pop() adaptiveEvent {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && s.less(l, m) {
			m = l
		}
		if r < n && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// adaptiveSim runs one algorithm: Poisson arrivals for the duration (the
// same for every algorithm: their own random stream), each admitted by a
// limit.Limiter or rejected at once; an admitted request started with n in
// flight (itself included) takes L × max(1, n / C_now) plus noise, where
// C_now is C, or C/2 during the dip, at its admission. Its completion is an
// event; it is reported to the Limiter as Success, or as Dropped when it
// took longer than the timeout (the client had given up). After the last
// arrival the remaining completions are drained, so every admitted request
// is answered or timed out.
func adaptiveSim(p adaptiveParams, alg limit.Algorithm, step float64, nb int) (adaptiveRun, error) {
	C, L, dur, timeout := float64(*p.concurrency), *p.latency, *p.duration, *p.timeout
	rate := *p.load * C / L
	critShare, shedShare, noise := *p.critical, *p.sheddable, *p.noise*L
	res := adaptiveRun{bucketLimit: make([]float64, nb), bucketGood: make([]float64, nb), bucketP99: make([]float64, nb)}
	lim, err := limit.NewLimiter(alg, limit.LimiterConfig{})
	if err != nil {
		return res, Badf("", "%v", err)
	}
	arrivals := rng.New(p.seed)
	noiseSrc := rng.New(p.seed ^ 0x9e3779b9)

	var (
		h        adaptiveHeap
		tickets  []*limit.Ticket
		free     []int
		seq      int
		lat      []float64 // good answers' latencies
		bucketLt = make([][]float64, nb)
		phaseSum [3]float64
		phaseLen [3]float64
		lastT    float64
	)
	edges := [4]float64{0, math.Min(*p.dipFrom, dur), math.Min(*p.dipTo, dur), dur}
	// integrate adds the limit in force over [lastT, t) to the phase and
	// bucket means.
	integrate := func(t float64) {
		t = math.Min(t, dur)
		if t <= lastT {
			return
		}
		v := float64(lim.Limit())
		for k := range 3 {
			if lo, hi := math.Max(lastT, edges[k]), math.Min(t, edges[k+1]); hi > lo {
				phaseSum[k] += v * (hi - lo)
				phaseLen[k] += hi - lo
			}
		}
		for b := int(lastT / step); b < nb && float64(b)*step < t; b++ {
			lo, hi := math.Max(lastT, float64(b)*step), math.Min(t, float64(b+1)*step)
			if hi > lo {
				res.bucketLimit[b] += v * (hi - lo)
			}
		}
		lastT = t
	}
	complete := func(e adaptiveEvent) {
		integrate(e.at)
		rtt := e.at - e.start
		ok := rtt <= timeout
		out := limit.Success
		if !ok {
			out = limit.Dropped
			res.timedOut++
		}
		tickets[e.slot].Done(e.at, out)
		free = append(free, e.slot)
		if !ok {
			return
		}
		res.good++
		lat = append(lat, rtt)
		switch e.class {
		case shed.Critical:
			res.critOK++
		case shed.Sheddable:
			res.shedOK++
		}
		if b := int(e.at / step); b < nb {
			bucketLt[b] = append(bucketLt[b], rtt)
		}
	}
	for t := arrivals.Exp(1 / rate); t < dur; t += arrivals.Exp(1 / rate) {
		u := arrivals.Float64()
		class := shed.Default
		switch {
		case u < critShare:
			class = shed.Critical
			res.crit++
		case u < critShare+shedShare:
			class = shed.Sheddable
			res.shed++
		}
		for len(h) > 0 && h[0].at <= t {
			complete(h.pop())
		}
		integrate(t)
		var slot int
		if n := len(free); n > 0 {
			slot, free = free[n-1], free[:n-1]
		} else {
			slot = len(tickets)
			tickets = append(tickets, new(limit.Ticket))
		}
		tk := tickets[slot]
		var ok bool
		*tk, ok = lim.Acquire(t, class)
		if !ok {
			res.rejected++
			free = append(free, slot)
			continue
		}
		cNow := C
		if t >= *p.dipFrom && t < *p.dipTo {
			cNow = C / 2
		}
		rtt := L * math.Max(1, float64(lim.InFlight())/cNow)
		if noise > 0 {
			rtt += noiseSrc.Exp(noise)
		}
		seq++
		h.push(adaptiveEvent{at: t + rtt, seq: seq, slot: slot, start: t, class: class})
	}
	integrate(dur)
	for len(h) > 0 {
		complete(h.pop())
	}

	for k := range 3 {
		res.phaseLimit[k] = math.NaN()
		if phaseLen[k] > 0 {
			res.phaseLimit[k] = phaseSum[k] / phaseLen[k]
		}
	}
	slices.Sort(lat)
	res.p99 = NearestRank(lat, 0.99)
	capacity := C / L
	for b := range nb {
		width := math.Min(float64(b+1)*step, dur) - float64(b)*step
		if width > 0 {
			res.bucketLimit[b] /= width
			res.bucketGood[b] = 100 * float64(len(bucketLt[b])) / (capacity * width)
		}
		slices.Sort(bucketLt[b])
		res.bucketP99[b] = NearestRank(bucketLt[b], 0.99) * 1000
	}
	return res, nil
}
