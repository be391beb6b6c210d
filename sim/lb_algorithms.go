package sim

import (
	"math"
	"sort"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/rng"
)

const (
	lbMaxRequests = 5_000_000
	lbMaxServers  = 1000
	lbMaxWork     = 100_000_000 // requests × servers: each request looks at every queue
	// Bounds that keep every time finite: a tiny rate or speed would push
	// arrival or service times past the float64 range.
	lbMinRho, lbMaxRho     = 0.001, 100
	lbMinSpeed, lbMaxSpeed = 0.001, 1e6
)

var lbAlgorithms = Scenario{
	Name:    "lb-algorithms",
	Ref:     "lb_algorithms",
	Summary: "round robin, random, least connections and two choices on servers of unequal speed, fresh and stale",
	Chart:   true,
	Bind: func(f *Flags) Runner {
		traceSeed := f.Seed("trace-seed", 14, "seed of the request trace (arrivals and sizes), shared by every algorithm")
		pickSeed := f.Seed("pick-seed", 7, "seed of the pickers' random draws; each algorithm starts afresh from it")
		rho := f.Float("rho", 0.65, Positive, "offered load as a share of total capacity (0.65 = 65%; 0.001 to 100)")
		requests := f.Int("requests", 50000, Positive, lbMaxRequests, "requests in the trace (at most 5000000; requests × servers at most 1e8)")
		stale := f.Float("stale", 50, NonNegative, "age in ms of the queue lengths the stale runs see (0 = fresh)")
		speeds := f.Floats("speeds", []float64{1.5, 1.5, 1.25, 1.25, 1, 1, 1, 1, 0.75, 0.75}, Positive,
			"server speeds in work units per ms (0.001 to 1e6), one per server, at most 1000 servers; a job averages 10 units")
		return func() (*Report, error) {
			for i, v := range *speeds {
				if v < lbMinSpeed || v > lbMaxSpeed {
					return nil, Badf("speeds", "item %d (%s) must be between %s and %s", i+1, Num(v), Num(lbMinSpeed), Num(lbMaxSpeed))
				}
			}
			switch n := len(*speeds); {
			case *rho < lbMinRho || *rho > lbMaxRho:
				return nil, Badf("rho", "must be between %s and %s, got %s", Num(lbMinRho), Num(lbMaxRho), Num(*rho))
			case n > lbMaxServers:
				return nil, Badf("speeds", "at most %d servers, got %d", lbMaxServers, n)
			case *requests*n > lbMaxWork:
				return nil, Badf(f.Blame("requests", "speeds"), "--requests × servers (--speeds) must be at most %d, got %d × %d", lbMaxWork, *requests, n)
			}
			return runLBAlgorithms(*traceSeed, *pickSeed, *rho, *requests, *stale, *speeds), nil
		}
	},
}

// lbJob is one request of the trace: arrival time (ms) and work (units).
type lbJob struct{ at, size float64 }

// lbTrace draws Poisson arrivals at rate rho·capacity/10 per ms (the mean job
// is 10 units), 90% small jobs (mean 6 units) and 10% big (mean 46).
func lbTrace(seed uint32, rho, capacity float64, n int) []lbJob {
	r := rng.New(seed)
	lambda := rho * capacity / 10
	trace := make([]lbJob, n)
	t := 0.0
	for i := range trace {
		t += r.Exp(1 / lambda)
		size := 0.0
		if r.Float64() < 0.9 {
			size = r.Exp(6)
		} else {
			size = r.Exp(46)
		}
		trace[i] = lbJob{t, size}
	}
	return trace
}

// lbRun replays the trace on one FIFO worker per server. Before each pick the
// balancer's view of the queue lengths is refreshed if it is staleMs old; the
// picker sees only that view. It returns the sorted latencies (ms) and the
// longest queue a request joined (counting itself).
func lbRun(trace []lbJob, speed []float64, p balancer.Picker, staleMs float64) ([]float64, int) {
	n := len(speed)
	fin := make([][]float64, n) // finish times per server, in order
	ptr := make([]int, n)       // first unfinished entry of fin[s]
	q := make([]int, n)
	view := make([]int, n)
	var set balancer.Loads = balancer.IntLoads(view)
	lat := make([]float64, len(trace))
	maxQ, next := 0, 0.0
	for i, job := range trace {
		for s := range q {
			for ptr[s] < len(fin[s]) && fin[s][ptr[s]] <= job.at {
				ptr[s]++
			}
			q[s] = len(fin[s]) - ptr[s]
		}
		if job.at >= next {
			copy(view, q)
			next = job.at + staleMs
		}
		s, _ := p.Pick(set) // never fails: the set has n ≥ 1 servers
		last := 0.0
		if k := len(fin[s]); k > 0 {
			last = fin[s][k-1]
		}
		done := math.Max(job.at, last) + job.size/speed[s]
		fin[s] = append(fin[s], done)
		lat[i] = done - job.at
		maxQ = max(maxQ, q[s]+1)
	}
	sort.Float64s(lat)
	return lat, maxQ
}

func runLBAlgorithms(traceSeed, pickSeed uint32, rho float64, requests int, staleMs float64, speed []float64) *Report {
	capacity := Sum(speed)
	trace := lbTrace(traceSeed, rho, capacity, requests)
	r := &Report{}
	r.Println("capacity " + Num(capacity) + " units/ms, offered load " + Num(rho*100) + "%, " + Int(requests) + " requests")
	r.Println("algorithm                  mean ms   p99 ms  maxQ")
	r.Table("setup", "capacity_units_per_ms", "offered_load_pct", "requests").Add(capacity, rho*100, requests)
	table := r.Table("algorithms", "algorithm", "mean_ms", "p99_ms", "max_q", "stale_ms")
	chart := r.Chart("Latency tail per algorithm", "latency ms", "% of requests taking x or longer (log)")
	chart.LogY = true
	stale := Num(staleMs)
	for _, a := range []struct {
		name  string
		short string // legend name
		stale float64
		make  func(rand balancer.Rand) balancer.Picker
	}{
		{"Round robin", "Round robin", 0, func(balancer.Rand) balancer.Picker { return &balancer.RoundRobin{} }},
		{"Random", "Random", 0, func(r balancer.Rand) balancer.Picker { return &balancer.Random{Rand: r} }},
		{"Least connections", "Least connections", 0, func(balancer.Rand) balancer.Picker { return &balancer.LeastOutstanding{} }},
		{"Power of two choices", "Two choices", 0, func(r balancer.Rand) balancer.Picker { return &balancer.P2C{Rand: r} }},
		{"Least conn, " + stale + " ms stale", "Least conn, stale", staleMs, func(balancer.Rand) balancer.Picker { return &balancer.LeastOutstanding{} }},
		{"Power of two, " + stale + " ms stale", "Two choices, stale", staleMs, func(r balancer.Rand) balancer.Picker { return &balancer.P2C{Rand: r} }},
	} {
		lat, maxQ := lbRun(trace, speed, a.make(rng.New(pickSeed)), a.stale)
		mean := Sum(lat) / float64(requests) // summed in sorted order, as the reference does
		p99 := NearestRank(lat, 0.99)
		r.Println(PadEnd(a.name, 27) + PadStart(Fixed(mean, 1), 7) + PadStart(Fixed(p99, 1), 9) + PadStart(Int(maxQ), 6))
		table.Add(a.name, mean, p99, maxQ, a.stale)
		x, y := lbTail(lat)
		chart.Line(a.short, x, y)
	}
	return r
}

// lbTail samples the empirical tail of sorted latencies: points (x, y) where
// y is the percentage of requests taking x or longer, about 20 per decade of
// y from 100% down to 0.01% (or to a single request, if that is more).
func lbTail(sorted []float64) (x, y []float64) {
	n := len(sorted)
	floor := max(1, (n+9999)/10000)
	prev := -1
	for j := 0; ; j++ {
		m := max(floor, int(math.Round(float64(n)*math.Pow(10, -float64(j)/20))))
		if m != prev {
			x = append(x, sorted[n-m])
			y = append(y, 100*float64(m)/float64(n))
			prev = m
		}
		if m == floor {
			return x, y
		}
	}
}
