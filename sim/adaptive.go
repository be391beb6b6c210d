package sim

import (
	"errors"
	"math"
	"slices"
	"strings"

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
		p.queue = new(limit.Discipline)
		f.FlagSet().Var(disciplineValue{p.queue}, "queue",
			"what the Limiter does with a request its class's share refuses: reject, or queue it (fifo, adaptive-lifo, codel)")
		p.maxWait = f.Float("max-wait", 0.1, Positive,
			"with a queue: the longest wait, seconds (at most 3600); the waiter is then refused (expired), or cancelled at --timeout if that is sooner")
		p.target = f.Float("target", limit.DefaultCoDelTarget, Positive, "--queue codel: CoDel's target queue wait, seconds (at most 3600)")
		p.interval = f.Float("interval", limit.DefaultCoDelWindow, Positive, "--queue codel: CoDel's interval, seconds (at most 3600)")
		return func() (*Report, error) {
			p.seed, p.blame = *seed, f.Blame
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
	adaptiveStep           = 5    // seconds per time-series bucket (longer runs use duration/40)
	adaptiveMaxQueueTime   = 3600 // seconds: the largest --max-wait, --target, --interval
)

type adaptiveParams struct {
	seed                                     uint32
	concurrency                              *int
	latency, load, critical, sheddable       *float64
	duration, dipFrom, dipTo, timeout, noise *float64
	queue                                    *limit.Discipline
	maxWait, target, interval                *float64
	blame                                    func(names ...string) string // Flags.Blame
}

// disciplineValue is the --queue flag: a limit.Discipline by the name its
// String method gives, checked as it is parsed.
type disciplineValue struct{ p *limit.Discipline }

func (v disciplineValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v disciplineValue) Set(s string) error {
	d, ok := limit.ParseDiscipline(s)
	if !ok {
		return errors.New("must be reject, fifo, adaptive-lifo or codel")
	}
	*v.p = d
	return nil
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
	arrivals     int        // requests offered
	crit, critOK int
	shed, shedOK int
	rejected     int                   // refused, for any reason
	refused      [limit.NumReasons]int // refusals by reason (index limit.Admitted unused)
	served       int                   // given a place, at once or from the queue
	waitSum      float64               // their queue waits, seconds (0 for those admitted at once)
	timedOut     int                   // admitted, answered after the timeout
	bucketLimit  []float64             // per time bucket: mean limit
	bucketGood   []float64             // good answers completed in the bucket, as % of capacity
	bucketP99    []float64             // p99 of those, ms (0 if none)
}

func runAdaptive(p adaptiveParams) (*Report, error) {
	C, L, load, dur := *p.concurrency, *p.latency, *p.load, *p.duration
	capacity := float64(C) / L
	switch {
	case dur > adaptiveMaxDuration:
		return nil, Badf("duration", "at most %d seconds, got %s", adaptiveMaxDuration, Num(dur))
	case !(load*capacity*dur <= adaptiveMaxArrivals):
		return nil, Badf(p.blame("load", "duration", "concurrency", "latency"), "--load × capacity × --duration = %s arrivals; at most %s (capacity = --concurrency/--latency = %s/s)",
			Num(load*capacity*dur), Num(adaptiveMaxArrivals), Num(capacity))
	case *p.critical+*p.sheddable > 1:
		return nil, Badf(p.blame("sheddable", "critical"), "--critical %s + --sheddable %s exceed 1", Num(*p.critical), Num(*p.sheddable))
	case *p.dipTo < *p.dipFrom:
		return nil, Badf(p.blame("dip-to", "dip-from"), "--dip-to %s is before --dip-from %s", Num(*p.dipTo), Num(*p.dipFrom))
	case *p.noise > adaptiveMaxNoise:
		return nil, Badf("noise", "at most %d, got %s", adaptiveMaxNoise, Num(*p.noise))
	case *p.maxWait > adaptiveMaxQueueTime:
		return nil, Badf("max-wait", "at most %d seconds, got %s", adaptiveMaxQueueTime, Num(*p.maxWait))
	case *p.target > adaptiveMaxQueueTime:
		return nil, Badf("target", "at most %d seconds, got %s", adaptiveMaxQueueTime, Num(*p.target))
	case *p.interval > adaptiveMaxQueueTime:
		return nil, Badf("interval", "at most %d seconds, got %s", adaptiveMaxQueueTime, Num(*p.interval))
	}
	maxLimit := max(1000, 4*C)
	algs := []adaptiveAlg{
		{"fixed", func() (limit.Algorithm, error) { return limit.NewFixed(C) }},
		{"aimd", func() (limit.Algorithm, error) {
			return limit.NewAIMD(limit.AIMDConfig{LearnBaseline: true, Tolerance: 1.2, MaxLimit: maxLimit})
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
	queueOn := *p.queue != limit.Reject
	if queueOn {
		line := "queue " + p.queue.String() + " (per class at most ⌈limit ÷ RTT × max wait⌉ ≤ " + Int(limit.DefaultMaxQueue) +
			" waiters), max wait " + Num(*p.maxWait) +
			" s; a waiter is refused (expired) at max wait, cancelled at the client timeout if sooner"
		if *p.queue == limit.CoDel {
			line += "; CoDel target " + Num(*p.target) + " s, interval " + Num(*p.interval) + " s"
		}
		r.Println(line)
	}
	r.Println("")
	r.Println("algorithm   limit before  during  after  goodput  p99 ms  critical ok  sheddable ok  rejects")
	cols := []string{"algorithm", "limit_before", "limit_during", "limit_after", "goodput_pct", "p99_ms",
		"critical_ok_pct", "sheddable_ok_pct", "rejects", "timeouts"}
	if queueOn {
		cols = append(cols, "wait_ms")
		for _, why := range adaptiveReasons {
			cols = append(cols, "refused_"+why.String())
		}
	}
	table := r.Table("results", cols...)
	var queueLines []string
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
		row := []any{a.name, res.phaseLimit[0], res.phaseLimit[1], res.phaseLimit[2], goodPct, p99ms,
			critPct, shedPct, res.rejected, res.timedOut}
		if queueOn {
			waitMs := math.NaN()
			if res.served > 0 {
				waitMs = 1000 * res.waitSum / float64(res.served)
			}
			row = append(row, waitMs)
			line := PadEnd(a.name, 12) + PadStart(adaptiveCell(waitMs, 1, ""), 7)
			for k, why := range adaptiveReasons {
				row = append(row, res.refused[why])
				line += PadStart(Int(res.refused[why]), len(adaptiveReasonHead[k]))
			}
			queueLines = append(queueLines, line)
		}
		table.Add(row...)
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

	if queueOn {
		r.Println("")
		r.Println("queue " + p.queue.String() + ": mean queue wait of the requests given a place (0 for those admitted at once), refusals by reason")
		r.Println("algorithm   wait ms" + strings.Join(adaptiveReasonHead[:], ""))
		for _, line := range queueLines {
			r.Println(line)
		}
	}

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

// adaptiveReasons are the refusal reasons the adaptive scenario reports,
// and adaptiveReasonHead their right-aligned column headings in the text.
var (
	adaptiveReasons    = [...]limit.Reason{limit.ReasonLimit, limit.ReasonQueueFull, limit.ReasonExpired, limit.ReasonCoDel, limit.ReasonCancelled}
	adaptiveReasonHead = [...]string{"    limit", "  queue_full", "  expired", "    codel", "  cancelled"}
)

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
	at     float64       // when the server answers
	seq    int           // admission order, to break ties
	tk     *limit.Ticket // its place
	pooled bool          // tk is the simulator's to reuse (not a Waiter's)
	start  float64       // when the request arrived
	class  shed.Class
}

// adaptiveHeap is the queue of completions, by (at, seq).
type adaptiveHeap = minHeap[adaptiveEvent]

func (e adaptiveEvent) before(o adaptiveEvent) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

// adaptiveWaiter is a request in the Limiter's wait queue, as the simulator
// tracks it.
type adaptiveWaiter struct {
	w       *limit.Waiter
	at      float64 // arrival
	class   shed.Class
	settled bool // granted or refused by the Limiter (its Ready fired)
	gaveUp  bool // cancelled by the simulator (its client gave up)
}

// adaptivePending holds one class's waiters not yet settled, in arrival
// order: a deque, popped at both ends (see adaptiveSim). Given-up waiters
// stay in it until they reach an end; all it holds arrived after its oldest
// waiter still waiting, so at most arrival rate × min(max wait, timeout)
// entries (plus the given-up ones at its ends, popped at the next drain).
type adaptivePending struct {
	s    []*adaptiveWaiter
	head int
}

func (d *adaptivePending) push(w *adaptiveWaiter) {
	if d.head > 0 && d.head == len(d.s) { // empty (popped entries are nil): start over
		d.s, d.head = d.s[:0], 0
	} else if d.head >= 1024 && 2*d.head >= len(d.s) { // mostly popped: move the rest down
		n := copy(d.s, d.s[d.head:])
		clear(d.s[n:])
		d.s, d.head = d.s[:n], 0
	}
	d.s = append(d.s, w)
}

// drain removes the waiters at either end that are settled or given up,
// stopping at each end on the first one still waiting, and calls settle for
// each settled one, front end first.
func (d *adaptivePending) drain(settle func(*adaptiveWaiter)) {
	for d.head < len(d.s) {
		w := d.s[d.head]
		if !w.gaveUp && !adaptiveReady(w) {
			break
		}
		d.s[d.head] = nil
		d.head++
		if !w.gaveUp {
			settle(w)
		}
	}
	for d.head < len(d.s) {
		n := len(d.s) - 1
		w := d.s[n]
		if !w.gaveUp && !adaptiveReady(w) {
			break
		}
		d.s[n] = nil
		d.s = d.s[:n]
		if !w.gaveUp {
			settle(w)
		}
	}
}

// adaptiveReady reports whether the Limiter has settled w (granted or
// refused it), taking the signal from its Ready channel.
func adaptiveReady(w *adaptiveWaiter) bool {
	if w.settled {
		return true
	}
	select {
	case <-w.w.Ready():
		w.settled = true
		return true
	default:
		return false
	}
}

// adaptiveSim runs one algorithm: Poisson arrivals for the duration (the
// same for every algorithm: their own random stream), each admitted by a
// limit.Limiter or, when its class's share is full, refused at once
// (--queue reject) or queued (limit.Limiter.Enqueue). A request that starts
// service at s with n in flight (itself included) takes L × max(1, n / C_s)
// plus noise, where C_s is C, or C/2 during the dip, at s. Its completion is
// an event; it is reported to the Limiter as Success, or as Dropped when it
// answered later than the timeout after its arrival (the client had given
// up: wasted work). After the last arrival the remaining events are run, so
// every request is answered, timed out or refused.
//
// The queue in virtual time. There are no goroutines: a waiter is settled
// (granted a place or refused) only inside the Limiter's Enqueue and
// Ticket.Done calls, which signal its Ready channel, so after each such call
// the simulator looks for the waiters just settled. It keeps each class's
// waiters in arrival order, as the Limiter's class queue does, and the
// Limiter only ever removes a waiter from either end of that queue (FIFO
// and CoDel serve, expire and drop the oldest; adaptive LIFO also serves
// the newest) or, reclaiming room, removes ones the simulator cancelled.
// So the waiters still queued are a contiguous run of the arrival order
// once cancelled ones are skipped: the settled ones are found by popping
// from each end while the end waiter is settled or cancelled, and stopping
// at the first one still waiting. Each waiter is popped once and each look
// that stops costs O(1) per class, so the search is O(1) amortised per
// event. A granted waiter starts service at that instant; its queue wait
// counts towards its client's timeout. A waiter's client gives up (as the
// admit.Gate adapter does) at arrival + min(max wait, timeout): the
// simulator cancels it then with ReasonExpired, or ReasonCancelled when the
// timeout comes first, unless it was settled before. These instants follow
// arrival order, so they are a FIFO, merged with the completion heap;
// at equal instants a completion runs first.
func adaptiveSim(p adaptiveParams, alg limit.Algorithm, step float64, nb int) (adaptiveRun, error) {
	C, L, dur, timeout := float64(*p.concurrency), *p.latency, *p.duration, *p.timeout
	rate := *p.load * C / L
	critShare, shedShare, noise := *p.critical, *p.sheddable, *p.noise*L
	res := adaptiveRun{bucketLimit: make([]float64, nb), bucketGood: make([]float64, nb), bucketP99: make([]float64, nb)}
	cfg := limit.LimiterConfig{}
	queueOn := *p.queue != limit.Reject
	giveUpAfter, giveUpWhy := *p.maxWait, limit.ReasonExpired
	if queueOn {
		cfg.Queue = limit.QueueConfig{Discipline: *p.queue, MaxWait: *p.maxWait}
		if *p.queue == limit.CoDel {
			cfg.Queue.Target, cfg.Queue.Interval = *p.target, *p.interval
		}
		if timeout < giveUpAfter {
			giveUpAfter, giveUpWhy = timeout, limit.ReasonCancelled
		}
	}
	lim, err := limit.NewLimiter(alg, cfg)
	if err != nil {
		return res, Badf("", "%v", err)
	}
	arrivals := rng.New(p.seed)
	noiseSrc := rng.New(p.seed ^ 0x9e3779b9)

	var (
		h        adaptiveHeap
		free     []*limit.Ticket
		seq      int
		lat      []float64 // good answers' latencies
		bucketLt = make([][]float64, nb)
		phaseSum [3]float64
		phaseLen [3]float64
		lastT    float64
		pending  [shed.MaxClasses]adaptivePending
		giveUps  []*adaptiveWaiter // queued waiters by give-up instant (= arrival order)
		giveHead int
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
	// serve starts the service of a request that arrived at arrival and was
	// given the place tk at now.
	serve := func(now, arrival float64, tk *limit.Ticket, pooled bool, class shed.Class) {
		res.served++
		res.waitSum += now - arrival
		cNow := C
		if now >= *p.dipFrom && now < *p.dipTo {
			cNow = C / 2
		}
		rtt := L * math.Max(1, float64(lim.InFlight())/cNow)
		if noise > 0 {
			rtt += noiseSrc.Exp(noise)
		}
		seq++
		h.push(adaptiveEvent{at: now + rtt, seq: seq, tk: tk, pooled: pooled, start: arrival, class: class})
	}
	// settled runs after each Enqueue and Done at now: it serves the waiters
	// the Limiter granted in that call and counts those it refused.
	var settledAt float64
	settleOne := func(w *adaptiveWaiter) {
		if why := w.w.Reason(); why != limit.Admitted {
			res.refused[why]++
			res.rejected++
			return
		}
		serve(settledAt, w.at, w.w.Ticket(), false, w.class)
	}
	settled := func(now float64) {
		settledAt = now
		for c := range lim.Classes() {
			pending[c].drain(settleOne)
		}
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
		e.tk.Done(e.at, out)
		if e.pooled {
			free = append(free, e.tk)
		}
		if queueOn {
			settled(e.at)
		}
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
	// giveUp cancels w, whose client stops waiting at now, unless the
	// Limiter settled it first.
	giveUp := func(w *adaptiveWaiter, now float64) {
		if w.settled || w.gaveUp {
			return
		}
		if lim.Cancel(w.w, now, giveUpWhy) {
			w.gaveUp = true
			res.refused[giveUpWhy]++
			res.rejected++
		}
		// Otherwise it was settled in an Enqueue or Done call already
		// followed by settled; that cannot leave it unseen.
	}
	// runUntil runs the completions and give-ups due at or before t, in
	// time order.
	runUntil := func(t float64) {
		for {
			nextC, nextG := math.Inf(1), math.Inf(1)
			if len(h) > 0 {
				nextC = h[0].at
			}
			if giveHead < len(giveUps) {
				nextG = giveUps[giveHead].at + giveUpAfter
			}
			switch {
			case len(h) > 0 && nextC <= t && nextC <= nextG:
				complete(h.pop())
			case giveHead < len(giveUps) && nextG <= t:
				w := giveUps[giveHead]
				giveUps[giveHead] = nil
				giveHead++
				giveUp(w, nextG)
			default:
				return
			}
		}
	}
	for t := arrivals.Exp(1 / rate); t < dur; t += arrivals.Exp(1 / rate) {
		res.arrivals++
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
		runUntil(t)
		integrate(t)
		var tk *limit.Ticket
		if n := len(free); n > 0 {
			tk, free = free[n-1], free[:n-1]
		} else {
			tk = new(limit.Ticket)
		}
		var ok bool
		*tk, ok = lim.Acquire(t, class)
		if ok {
			serve(t, t, tk, true, class)
			continue
		}
		free = append(free, tk)
		if !queueOn {
			res.refused[limit.ReasonLimit]++
			res.rejected++
			continue
		}
		w := &adaptiveWaiter{w: limit.NewWaiter(), at: t, class: class}
		if why := lim.Enqueue(t, limit.Request{Class: class}, w.w); why != limit.Admitted {
			res.refused[why]++
			res.rejected++
			continue
		}
		pending[class].push(w) // the three classes are the Limiter's default ones
		if giveHead > 0 && 2*giveHead >= len(giveUps) {
			n := copy(giveUps, giveUps[giveHead:])
			clear(giveUps[n:])
			giveUps, giveHead = giveUps[:n], 0
		}
		giveUps = append(giveUps, w)
		settled(t)
	}
	integrate(dur)
	runUntil(math.Inf(1))

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
