package sim

import (
	"math"

	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/rng"
)

// Bounds that keep retry-storm's memory and time small whatever the flags.
const (
	retryStormMaxEnd      = 36000 // seconds
	retryStormMaxArrivals = 2e6   // expected new requests, --new × --end
	retryStormMaxRetries  = 10
	retryStormBackoffBase = 0.5 // seconds; the reference's jitter is rand()·0.5·2^n
)

var retryStorm = Scenario{
	Name:    "retry-storm",
	Ref:     "retry_storm",
	Summary: "retries during a capacity dip: immediate, backoff + jitter, a retry budget, dropping expired work (--policies real: the library's throttle, retry policy and breaker)",
	Chart:   true,
	Bind: func(f *Flags) Runner {
		seed := f.Seed("seed", 9, "random seed")
		end := f.Int("end", 240, Positive, retryStormMaxEnd, "seconds simulated (at most 36000); the \"load/s 120-180 s\" column always averages seconds 120 to 180, as in the reference")
		timeout := f.Float("timeout", 1, Positive, "client timeout, seconds: an attempt not answered within it failed, and is retried this long (plus backoff) after it was sent")
		newRate := f.Float("new", 70, Positive, "new requests per second, Poisson (--new × --end at most 2000000)")
		capacity := f.Float("capacity", 100, Positive, "FIFO server capacity, requests per second (exponential service times)")
		dipCap := f.Float("dip-capacity", 50, Positive, "server capacity during the dip, requests per second")
		dipFrom := f.Float("dip-from", 30, NonNegative, "start of the capacity dip, seconds")
		dipTo := f.Float("dip-to", 60, NonNegative, "end of the dip, seconds (the dip is [dip-from, dip-to)); the recovery search starts here")
		maxRetries := f.Int("max-retries", 3, NonNegative, retryStormMaxRetries, "retries per request at most (at most 10); backoff is full jitter with base 0.5 s")
		ratio := f.Float("budget-ratio", 0.1, Positive, "retry budget: tokens each new request deposits")
		budgetMax := f.Float("budget-max", 10, Positive, "retry budget: capacity in tokens (the bucket starts full)")
		realFlags := bindRetryStormReal(f)
		return func() (*Report, error) {
			if !(*dipTo > *dipFrom) {
				return nil, Badf(f.Blame("dip-to", "dip-from"), "the dip must end after it starts: --dip-from %s, --dip-to %s", Num(*dipFrom), Num(*dipTo))
			}
			if *newRate*float64(*end) > retryStormMaxArrivals {
				return nil, Badf(f.Blame("new", "end"), "--new × --end must be at most %s new requests, got %s", Num(retryStormMaxArrivals), Num(*newRate*float64(*end)))
			}
			p := retryStormParams{
				seed: *seed, end: *end, timeout: *timeout, newRate: *newRate, capacity: *capacity,
				dipCap: *dipCap, dipFrom: *dipFrom, dipTo: *dipTo, maxRetries: *maxRetries,
				budget: retry.BudgetConfig{Max: *budgetMax, Ratio: *ratio},
			}
			if err := realFlags.check(f); err != nil {
				return nil, err
			}
			if realFlags.policies == retryStormReal {
				return runRetryStormReal(p, realFlags)
			}
			return runRetryStorm(p)
		}
	},
}

type retryStormParams struct {
	seed             uint32
	end              int
	timeout, newRate float64
	capacity, dipCap float64
	dipFrom, dipTo   float64
	maxRetries       int
	budget           retry.BudgetConfig
}

// The client policies the seed compares.
var retryStormPolicies = []struct {
	name                  string // as the reference prints it
	full                  string // for JSON
	short                 string // for the chart legend
	backoff, budget, drop bool
}{
	{"immediate retry", "immediate retry", "immediate retry", false, false, false},
	{"backoff + jitter", "backoff + jitter", "backoff + jitter", true, false, false},
	{"backoff + jitter + budget", "backoff + jitter + budget", "+ retry budget", true, true, false},
	{"  + server drops expired", "backoff + jitter + budget + server drops expired", "+ drop expired", true, true, true},
}

func runRetryStorm(p retryStormParams) (*Report, error) {
	r := &Report{}
	r.Println("client policy              load/s in dip  load/s 120-180 s  recovery after " + Num(p.dipTo) + " s")
	table := r.Table("policies", "policy", "load_per_s_in_dip", "load_x_in_dip", "load_per_s_120_180",
		"load_x_120_180", "recovery_after_s")
	secs := make([]float64, p.end)
	capY := make([]float64, p.end)
	for i := range secs {
		secs[i] = float64(i)
		capY[i] = p.capAt(float64(i))
	}
	load := r.Chart("Retry storm: offered load (attempts per second)", "time (s)", "attempts/s")
	good := r.Chart("Retry storm: goodput (attempts answered within the timeout per second)", "time (s)", "answered in time/s")
	for _, pol := range retryStormPolicies {
		att, ok, err := p.simulate(pol.backoff, pol.budget, pol.drop)
		if err != nil {
			return nil, err
		}
		s := p.summarize(att, ok, nil)
		r.Println(PadEnd(pol.name, 26) + PadStart(s.dipText, 14) + PadStart(s.lateText, 18) + "  " + s.recText)
		table.Add(pol.full, s.dipRate, s.dipRate/p.newRate, s.lateRate, s.lateRate/p.newRate, s.recovery)
		load.Line(pol.short, secs, att)
		good.Line(pol.short, secs, ok)
	}
	load.Line("server capacity", secs, capY)
	good.Line("server capacity", secs, capY)
	return r, nil
}

// retryStormSummary is one policy's row: offered load in the dip and in
// 120-180 s, and the recovery time (nil: never).
type retryStormSummary struct {
	dipRate, lateRate float64 // attempts per second
	dipText, lateText string  // "75 (1.07x)"
	recovery          any     // seconds after dip-to, or nil
	recText           string  // "30 s" or "never (by 240 s)"
}

// summarize computes a row from the attempts sent and answered in time per
// second. Recovery is the first rec = dip-to + k, k = 0, 1, … (as the
// reference counts) at which the 5 s window [rec, rec+5) had at least 95% of
// its attempts answered in time and, when newPerSec is not nil, as many
// answers in time as 95% of the new requests that arrived in it (so that a
// client refusing everything locally does not count as recovered).
func (p retryStormParams) summarize(att, ok, newPerSec []float64) retryStormSummary {
	var s retryStormSummary
	amp := func(i, j float64) (float64, string) {
		rate := retryStormSliceSum(att, i, j) / (j - i)
		return rate, Fixed(rate, 0) + " (" + Fixed(rate/p.newRate, 2) + "x)"
	}
	end := float64(p.end)
	rec := p.dipTo
	for rec < end-5 {
		good := retryStormSliceSum(ok, rec, rec+5)
		if good >= 0.95*retryStormSliceSum(att, rec, rec+5) &&
			(newPerSec == nil || good >= 0.95*retryStormSliceSum(newPerSec, rec, rec+5)) {
			break
		}
		rec++
	}
	s.dipRate, s.dipText = amp(p.dipFrom, p.dipTo)
	s.lateRate, s.lateText = amp(120, 180)
	s.recText = "never (by " + Int(p.end) + " s)"
	if rec < end-5 {
		s.recovery = rec - p.dipTo
		s.recText = Num(rec-p.dipTo) + " s"
	}
	return s
}

// arrivals draws the new requests' arrival instants in [0, end) from rnd,
// first thing, as the reference does.
func (p retryStormParams) arrivals(rnd *rng.Mulberry32) []float64 {
	var a []float64
	for t := rnd.Exp(1 / p.newRate); t < float64(p.end); t += rnd.Exp(1 / p.newRate) {
		a = append(a, t)
	}
	return a
}

// capAt is the server's capacity at t: dipCap in [dipFrom, dipTo).
func (p retryStormParams) capAt(t float64) float64 {
	if t >= p.dipFrom && t < p.dipTo {
		return p.dipCap
	}
	return p.capacity
}

// simulate runs one client policy and returns, per second, the attempts
// sent and the attempts answered within the timeout.
//
// It follows the reference's event loop exactly: events are kept in 1 ms
// buckets keyed by floor(t × 1000) and processed bucket by bucket in
// insertion order (not by t within a bucket); every arrival is drawn before
// the first service time; per event the service time is drawn (unless the
// server drops it as expired), then the jitter (when retrying with backoff).
// Here the buckets are a heap ordered by (bucket, insertion number); the new
// requests, inserted first, are a sorted slice merged in front of the heap.
func (p retryStormParams) simulate(backoff, useBudget, dropExpired bool) (att, ok []float64, err error) {
	rnd := rng.New(p.seed)
	end := float64(p.end)
	arrivals := p.arrivals(rnd)
	var budget *retry.Budget
	if useBudget {
		if budget, err = retry.NewBudget(p.budget); err != nil {
			return nil, nil, &UsageError{Msg: err.Error()}
		}
	}
	// A cap of Base·2^maxRetries never binds: n ≤ maxRetries.
	bo := retry.Backoff{Base: retryStormBackoffBase, Cap: math.Ldexp(retryStormBackoffBase, p.maxRetries), Jitter: retry.FullJitter}

	att, ok = make([]float64, p.end), make([]float64, p.end)
	limit := int64(p.end) * 1000
	var retries retryStormHeap
	var seq uint64
	free := 0.0
	for next := 0; ; {
		var ev retryStormEvent
		switch {
		case next < len(arrivals) && (len(retries) == 0 || retryStormBucket(arrivals[next]) <= retries[0].bucket):
			ev = retryStormEvent{t: arrivals[next], bucket: retryStormBucket(arrivals[next]), n: 1}
			next++
		case len(retries) > 0:
			ev = retries.pop()
		default:
			return att, ok, nil
		}
		if ev.bucket >= limit { // every event left is in a bucket the reference never visits
			return att, ok, nil
		}
		t := ev.t
		if ev.n == 1 && useBudget {
			budget.RecordRequest(t)
		}
		att[int(t)]++
		start := math.Max(free, t)
		expired := dropExpired && start-t > p.timeout
		if !expired {
			free = start + rnd.Exp(1/p.capAt(start))
			if free-t <= p.timeout {
				ok[int(t)]++
				continue
			}
		}
		if ev.n > p.maxRetries || (useBudget && !budget.TryRetry(t)) {
			continue // give up
		}
		delay := 0.0
		if backoff {
			delay = bo.Delay(ev.n, 0, rnd)
		}
		if at := t + p.timeout + delay; at < end {
			seq++
			retries.push(retryStormEvent{t: at, bucket: retryStormBucket(at), seq: seq, n: ev.n + 1})
		}
	}
}

func retryStormBucket(t float64) int64 { return int64(math.Floor(t * 1000)) }

// retryStormSliceSum sums a[i:j] with JavaScript's slice rules for the
// non-negative, possibly fractional bounds the reference passes: each bound
// is truncated and clamped to the array.
func retryStormSliceSum(a []float64, i, j float64) float64 {
	lo := int(math.Min(math.Trunc(i), float64(len(a))))
	hi := int(math.Min(math.Trunc(j), float64(len(a))))
	s := 0.0
	for k := lo; k < hi; k++ {
		s += a[k]
	}
	return s
}

type retryStormEvent struct {
	t      float64
	bucket int64  // floor(t × 1000)
	seq    uint64 // insertion number
	n      int    // attempt number, 1 for a new request
}

// retryStormHeap is the queue of retries, by (bucket, seq).
type retryStormHeap = minHeap[retryStormEvent]

func (e retryStormEvent) before(o retryStormEvent) bool {
	return e.bucket < o.bucket || (e.bucket == o.bucket && e.seq < o.seq)
}
