package sim

import (
	"math"
	"slices"

	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/shed"
)

var codel = Scenario{
	Name:    "codel",
	Ref:     "codel_vs_taildrop",
	Chart:   true,
	Summary: "a burst into a 300-deep queue: tail drop (shed.Queue) against a CoDel-like sojourn dropper (shed.CoDel)",
	Bind: func(f *Flags) Runner {
		var p codelParams
		seed := f.Seed("seed", 5, "random seed for the arrivals")
		p.service = f.Float("service", 0.010, Positive, "service time per request, seconds (fixed)")
		p.limit = f.Int("limit", 300, Positive, 1e6, "queue capacity; arrivals to a full queue are dropped (tail drop)")
		p.target = f.Float("target", 0.050, Positive, "CoDel target sojourn time, seconds")
		p.interval = f.Float("interval", 0.100, Positive, "CoDel interval, seconds")
		p.end = f.Int("end", 12, Positive, 86400, "seconds simulated (whole seconds; rate × end at most 5e6 arrivals)")
		p.baseRate = f.Float("base-rate", 80, Positive, "arrivals per second outside the burst (Poisson)")
		p.burstRate = f.Float("burst-rate", 200, Positive, "arrivals per second during the burst")
		p.burstFrom = f.Float("burst-from", 2, NonNegative, "burst start, seconds")
		p.burstTo = f.Float("burst-to", 5, NonNegative, "burst end, seconds (not before --burst-from)")
		rfc := f.Bool("rfc8289", false, "also run RFC 8289 CoDel (same target and interval) and print it after the reference text")
		return func() (*Report, error) {
			p.seed, p.rfc, p.blame = *seed, *rfc, f.Blame
			return runCodel(p)
		}
	},
}

const codelMaxArrivals = 5e6

type codelParams struct {
	seed                                    uint32
	rfc                                     bool
	service, target, interval               *float64
	baseRate, burstRate, burstFrom, burstTo *float64
	limit, end                              *int
	blame                                   func(names ...string) string // Flags.Blame
}

// codelOutcome is one queue's run: per-second sums and every served
// request's sojourn time.
type codelOutcome struct {
	drops  []int     // per second: refused at a full queue or dropped by CoDel
	delay  []float64 // per second: sum of the served requests' sojourn times
	served []int     // per second
	wait   []float64 // sojourn of every served request, sorted at the end
}

func runCodel(p codelParams) (*Report, error) {
	end := *p.end
	if *p.burstTo < *p.burstFrom {
		return nil, Badf(p.blame("burst-to", "burst-from"), "--burst-to %s is before --burst-from %s", Num(*p.burstTo), Num(*p.burstFrom))
	}
	if n := math.Max(*p.baseRate, *p.burstRate) * float64(end); n > codelMaxArrivals {
		rate := "burst-rate"
		if *p.baseRate > *p.burstRate {
			rate = "base-rate"
		}
		return nil, Badf(p.blame("end", rate), "--%s %s × --end %d = %s arrivals; at most %s", rate, Num(n/float64(end)), end, Num(n), Num(codelMaxArrivals))
	}
	arr := codelArrivals(p)
	td, err := codelRun(p, arr, nil)
	if err != nil {
		return nil, err
	}
	cd, err := codelRun(p, arr, &shed.CoDelConfig{Target: *p.target, Interval: *p.interval, Law: shed.Cutoff})
	if err != nil {
		return nil, err
	}
	runs := []codelOutcome{td, cd}
	names := []string{"tail drop", "CoDel-like"}
	keys := []string{"tail_drop", "codel_like"}
	if p.rfc {
		rf, err := codelRun(p, arr, &shed.CoDelConfig{Target: *p.target, Interval: *p.interval, Law: shed.RFC8289})
		if err != nil {
			return nil, err
		}
		runs, names, keys = append(runs, rf), append(names, "RFC 8289 CoDel"), append(keys, "rfc8289")
	}

	r := &Report{}
	r.Println("second   tail-drop: delay / drops   CoDel-like: delay / drops")
	for s := 0; s < end; s++ {
		r.Println(PadStart(Int(s), 4) + PadStart(td.cell(s), 22) + PadStart(cd.cell(s), 26))
	}
	r.Println("tail-drop : " + td.summary())
	r.Println("CoDel-like: " + cd.summary())
	if p.rfc {
		rf := runs[2]
		r.Println("")
		r.Println("second   RFC 8289 CoDel: delay / drops")
		for s := 0; s < end; s++ {
			r.Println(PadStart(Int(s), 4) + PadStart(rf.cell(s), 22))
		}
		r.Println("RFC 8289  : " + rf.summary())
	}

	cols := []string{"second"}
	for _, k := range keys {
		cols = append(cols, k+"_delay_ms", k+"_drops")
	}
	perSecond := r.Table("per_second", cols...)
	secs := make([]float64, end)
	for s := range secs {
		secs[s] = float64(s)
		row := []any{s}
		for _, o := range runs {
			row = append(row, o.meanDelayMs(s), o.drops[s])
		}
		perSecond.Add(row...)
	}
	summary := r.Table("summary", "queue", "served", "dropped", "p99_ms", "waited_over_1s")
	delayChart := r.Chart("Mean queueing delay of the requests served in each second", "time (s)", "mean delay (ms)")
	dropChart := r.Chart("Requests dropped in each second", "time (s)", "drops")
	for i, o := range runs {
		summary.Add(keys[i], len(o.wait), o.dropped(), o.p99Ms(), o.waitedOver(1))
		delays, drops := make([]float64, end), make([]float64, end)
		for s := range end {
			delays[s], drops[s] = o.meanDelayMs(s), float64(o.drops[s])
		}
		delayChart.Line(names[i], secs, delays)
		dropChart.Line(names[i], secs, drops)
	}
	return r, nil
}

// codelArrivals draws Poisson arrival times until one falls at or past the
// end; the rate is the burst rate while the previous arrival lies in
// [burst-from, burst-to).
func codelArrivals(p codelParams) []float64 {
	src := rng.New(p.seed)
	end := float64(*p.end)
	var arr []float64
	for t := 0.0; t < end; {
		rate := *p.baseRate
		if t >= *p.burstFrom && t < *p.burstTo {
			rate = *p.burstRate
		}
		t += -rng.Log(1-src.Float64()) / rate
		arr = append(arr, t)
	}
	return arr
}

// codelRun serves the arrivals one at a time, service seconds each, from a
// shed.Queue of capacity --limit in FIFO order. With a dropper
// configuration, a shed.CoDel is consulted for each request taken from the
// queue; nil is plain tail drop. The run ends when the clock reaches the end
// or the queue is empty with no arrival left.
func codelRun(p codelParams, arr []float64, dropper *shed.CoDelConfig) (codelOutcome, error) {
	end, service := *p.end, *p.service
	o := codelOutcome{drops: make([]int, end), delay: make([]float64, end), served: make([]int, end)}
	q, err := shed.NewQueue[struct{}](shed.QueueConfig{Capacity: *p.limit})
	if err != nil {
		return o, Badf("limit", "%v", err)
	}
	var cd *shed.CoDel
	if dropper != nil {
		if cd, err = shed.NewCoDel(*dropper); err != nil {
			return o, Badf("", "%v", err)
		}
	}
	i, now := 0, 0.0
	for now < float64(end) {
		for ; i < len(arr) && arr[i] <= now; i++ {
			if !q.Push(arr[i], struct{}{}) {
				o.drops[int(arr[i])]++
			}
		}
		e, st := q.Pop(now)
		if st == shed.Empty {
			if i == len(arr) {
				break // idle with nothing left to arrive
			}
			now = arr[i]
			if cd != nil {
				cd.Idle()
			}
			continue
		}
		sec := int(now)
		if cd != nil && cd.Drop(now, e.At) {
			o.drops[sec]++
			continue
		}
		sojourn := now - e.At
		o.wait = append(o.wait, sojourn)
		o.delay[sec] += sojourn
		o.served[sec]++
		now += service
	}
	slices.Sort(o.wait)
	return o, nil
}

// meanDelayMs is the mean sojourn of the requests served in second s, in
// milliseconds; NaN when none was served.
func (o codelOutcome) meanDelayMs(s int) float64 {
	if o.served[s] == 0 {
		return math.NaN()
	}
	return 1000 * o.delay[s] / float64(o.served[s])
}

// cell prints second s as "DELAY ms / DROPS"; a second with nothing served
// prints "- ms" (the reference script would print "NaN ms").
func (o codelOutcome) cell(s int) string {
	d := "-"
	if o.served[s] > 0 {
		d = Fixed(o.meanDelayMs(s), 0)
	}
	return d + " ms / " + Int(o.drops[s])
}

func (o codelOutcome) dropped() int {
	n := 0
	for _, d := range o.drops {
		n += d
	}
	return n
}

// p99Ms is the nearest-rank 99th percentile sojourn in milliseconds; NaN
// when nothing was served.
func (o codelOutcome) p99Ms() float64 {
	if len(o.wait) == 0 {
		return math.NaN()
	}
	return 1000 * NearestRank(o.wait, 0.99)
}

func (o codelOutcome) waitedOver(limit float64) int {
	n := 0
	for _, w := range o.wait {
		if w > limit {
			n++
		}
	}
	return n
}

// summary prints the reference's summary line; with nothing served the p99
// prints as "-" (the reference would print "NaN").
func (o codelOutcome) summary() string {
	p99 := "-"
	if len(o.wait) > 0 {
		p99 = Fixed(o.p99Ms(), 0)
	}
	return "served " + Int(len(o.wait)) + ", dropped " + Int(o.dropped()) + ", p99 " + p99 + " ms, waited > 1 s: " + Int(o.waitedOver(1))
}
