package sim

import (
	"sort"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/rng"
)

var tokenVsLeaky = Scenario{
	Name:    "token-vs-leaky",
	Ref:     "token_vs_leaky",
	Summary: "token bucket (meter) against leaky bucket (queue) on one bursty stream",
	Bind: func(f *Flags) Runner {
		var p tokenVsLeakyParams
		p.seed = f.Seed("seed", 7, "random seed of the arrival stream")
		p.rate = f.Float("rate", 10, Positive, "limit r, requests per second: the token refill rate and the queue's release rate")
		p.burst = f.Int("burst", 20, Positive, 1e6, "token bucket size b, also the leaky queue's size (at most 1e6)")
		p.background = f.Float("background", 6, NonNegative, "background Poisson arrivals per second over the fixed 10 s (at most 1e6)")
		p.burstSize = f.Int("burst-size", 35, NonNegative, 1e6, "requests in each of the two bursts (fixed at 2 s and 6 s, uniform over 0.2 s; at most 1e6)")
		return p.run
	},
}

type tokenVsLeakyParams struct {
	seed       *uint32
	rate       *float64
	burst      *int
	background *float64
	burstSize  *int
}

// The experiment's fixed shape, as in the reference.
const (
	tvlSeconds     = 10  // length of the run and of the per-second table
	tvlBurstSpread = 0.2 // each burst arrives uniformly within this many seconds
	tvlMaxRate     = 1e6 // cap on --background: at most 1e7 background arrivals
)

var tvlBurstAt = [2]float64{2, 6}

type tvlSecond struct{ in, tbOk, tbNo, lqOk, lqNo, lqOut int }

func (p tokenVsLeakyParams) run() (*Report, error) {
	if *p.background > tvlMaxRate {
		return nil, Badf("background", "must be at most %d arrivals per second", int(tvlMaxRate))
	}
	limit := ratelimit.Limit{Rate: *p.rate, Burst: *p.burst}
	tb, err := ratelimit.NewTokenBucket(limit)
	if err != nil {
		return nil, Badf("rate", "%v", err)
	}
	lq, err := ratelimit.NewLeakyQueue(limit)
	if err != nil {
		return nil, Badf("rate", "%v", err)
	}

	arrivals := tvlArrivals(rng.New(*p.seed), *p.background, *p.burstSize)
	var sec [tvlSeconds]tvlSecond
	var tbState ratelimit.TokenBucketState // zero: full, as the reference's tokens = B at 0
	var lqState ratelimit.LeakyQueueState
	maxWait := 0.0
	for _, t := range arrivals {
		s := &sec[int(t)]
		s.in++
		if tb.Decide(&tbState, t, 1).Allowed {
			s.tbOk++
		} else {
			s.tbNo++
		}
		d := lq.Decide(&lqState, t, 1)
		if !d.Allowed {
			s.lqNo++
			continue
		}
		s.lqOk++
		if d.Delay > maxWait {
			maxWait = d.Delay
		}
		if d.Start < tvlSeconds {
			sec[int(d.Start)].lqOut++
		}
	}
	return tvlReport(sec[:], maxWait), nil
}

// tvlArrivals draws the background stream (exponential gaps, -ln(1-u)/rate as
// the reference writes it) and the two bursts, in the reference's order, and
// sorts them.
func tvlArrivals(r *rng.Mulberry32, background float64, burstSize int) []float64 {
	var arr []float64
	for t := 0.0; ; {
		t += -rng.Log(1-r.Float64()) / background
		if !(t < tvlSeconds) {
			break
		}
		arr = append(arr, t)
	}
	for _, start := range tvlBurstAt {
		for range burstSize {
			arr = append(arr, start+r.Float64()*tvlBurstSpread)
		}
	}
	sort.Float64s(arr)
	return arr
}

func tvlReport(sec []tvlSecond, maxWait float64) *Report {
	r := &Report{}
	r.Println("sec  in | token bucket ok rej | leaky queue ok rej sent")
	rows := r.Table("seconds", "sec", "in", "token_bucket_ok", "token_bucket_rej", "leaky_queue_ok", "leaky_queue_rej", "leaky_queue_sent")
	tbPeak, lqPeak := 0, 0
	for i, s := range sec {
		r.Println(PadStart(Int(i), 3) + PadStart(Int(s.in), 4) + " |" + PadStart(Int(s.tbOk), 16) + PadStart(Int(s.tbNo), 4) +
			" |" + PadStart(Int(s.lqOk), 15) + PadStart(Int(s.lqNo), 4) + PadStart(Int(s.lqOut), 5))
		rows.Add(i, s.in, s.tbOk, s.tbNo, s.lqOk, s.lqNo, s.lqOut)
		tbPeak, lqPeak = max(tbPeak, s.tbOk), max(lqPeak, s.lqOut)
	}
	r.Println("max admitted in one second: token bucket " + Int(tbPeak) + ", leaky bucket sends " + Int(lqPeak))
	r.Println("leaky bucket longest wait in queue: " + Fixed(maxWait*1000, 0) + " ms")
	r.Table("summary", "token_bucket_max_per_s", "leaky_queue_max_sent_per_s", "leaky_queue_max_wait_ms").
		Add(tbPeak, lqPeak, maxWait*1000)
	return r
}
