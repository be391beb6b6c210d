package sim

import (
	"errors"
	"flag"
	"math"
	"strings"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/rng"
	"github.com/spillwayhq/spillway/throttle"
)

// retry-storm --policies real: the seed's retry storm run with the client
// policies of the library (throttle, retry.Policy with its budget and the
// call's deadline, breaker), in the order client.Transport stacks them, under
// virtual time.

// The --policies choices.
const (
	retryStormSeed = iota // the reference's four client policies (the default)
	retryStormReal        // the library's client policies
)

// The --breaker choices.
const (
	retryStormBreakerOff = iota
	retryStormBreakerConsecutive
	retryStormBreakerRate
)

var (
	retryStormPolicyNames  = []string{"seed", "real"}
	retryStormBreakerNames = []string{"off", "consecutive", "rate"}
)

// Real-mode defaults and constants.
const (
	retryStormDeadline = 5 // seconds: each call's overall deadline after it arrives
	// retryStormThrottleSalt derives the throttle's stream of draws from
	// --seed (seed XOR salt), so that the arrivals, service times and
	// jitter are drawn as in the seed's simulation, from rng.New(seed).
	retryStormThrottleSalt = 0x5bd1e995
)

// retryStormRateBreaker is --breaker rate: open when half of the attempts
// reported in the last 10 s (at least 20 of them) failed; after 5 s open,
// three trials, all of which must report, decide.
var retryStormRateBreaker = breaker.Config{
	Window:        breaker.TimeWindow,
	WindowSeconds: 10,
	BucketSeconds: 1,
	MinCalls:      20,
	FailureRate:   0.5,
	Trials:        3,
}

// retryStormRealFlags are the flags of --policies real.
type retryStormRealFlags struct {
	policies  int
	deadline  *float64
	throttleK *float64
	throttleW *float64
	breaker   int
	drop      *bool
}

// bindRetryStormReal declares the real-mode flags on f.
func bindRetryStormReal(f *Flags) *retryStormRealFlags {
	r := &retryStormRealFlags{policies: retryStormSeed, breaker: retryStormBreakerRate}
	f.FlagSet().Var(choiceValue{&r.policies, retryStormPolicyNames}, "policies",
		"client policies: seed (the reference's four, printed as the reference does) or real (the library's throttle, "+
			"retry.Policy with budget and deadline, and breaker, stacked as client.Transport stacks them)")
	r.deadline = f.Float("deadline", retryStormDeadline, Positive,
		"--policies real: each call's overall deadline, seconds after it arrives (no retry that cannot finish before it; an attempt still out then is abandoned)")
	r.throttleK = f.Float("throttle-k", throttle.DefaultK, NonNegative,
		"--policies real: client-side adaptive throttling's K (at least 1; 0 = no throttle)")
	r.throttleW = f.Float("throttle-window", throttle.DefaultWindow, Positive,
		"--policies real: the throttle's sliding window, seconds (at most 36000), counted in 120 slices")
	r.drop = f.Bool("drop-expired", true,
		"--policies real: the server drops an attempt whose client has timed out when it reaches the head of the queue, in every row (=false: it serves it)")
	f.FlagSet().Var(choiceValue{&r.breaker, retryStormBreakerNames}, "breaker",
		"--policies real: circuit breaker around each attempt: off, consecutive (3 failures in a row, 5 s open, 1 trial) "+
			"or rate (≥ 50% of ≥ 20 attempts failed in 10 s, 5 s open, 3 trials)")
	return r
}

// check validates the real-mode flags once all are parsed: they apply to
// --policies real only.
func (r *retryStormRealFlags) check(f *Flags) error {
	if k := *r.throttleK; k != 0 && k < 1 {
		return Badf("throttle-k", "must be 0 (no throttle) or at least 1, got %s", Num(k))
	}
	if w := *r.throttleW; w > retryStormMaxEnd {
		return Badf("throttle-window", "must be at most %s seconds, got %s", Num(retryStormMaxEnd), Num(w))
	}
	if r.policies == retryStormReal {
		return nil
	}
	var err error
	f.FlagSet().Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "deadline", "throttle-k", "throttle-window", "breaker", "drop-expired":
			if err == nil {
				err = Badf(fl.Name, "applies to --policies real only")
			}
		}
	})
	return err
}

// choiceValue is a flag whose value is one of names, stored as its index.
type choiceValue struct {
	p     *int
	names []string
}

func (v choiceValue) String() string {
	if v.p == nil || *v.p < 0 || *v.p >= len(v.names) {
		return ""
	}
	return v.names[*v.p]
}

func (v choiceValue) Set(s string) error {
	for i, n := range v.names {
		if s == n {
			*v.p = i
			return nil
		}
	}
	return errors.New("must be " + strings.Join(v.names, " or "))
}

// retryStormRealRow is one row of the real-mode table. Real rows are
// cumulative: each adds one layer to the row before it.
type retryStormRealRow struct {
	name, short string
	seed        bool // the seed's simulation (backoff + jitter), budget or not
	budget      bool // seed rows: with the seed's budget
	// real rows
	throttle, breaker bool
}

// retryStormRealStats counts, for one real row, what became of the calls.
type retryStormRealStats struct {
	throttled      int    // calls refused by the throttle (nothing sent)
	breakerRefused int    // attempts refused by the open breaker (retried after the backoff, budget-free)
	stops          [5]int // calls whose retry Policy.Next refused, by retry.Verdict
	cut            int    // attempts still out at their call's deadline (abandoned)
}

func runRetryStormReal(p retryStormParams, o *retryStormRealFlags) (*Report, error) {
	k := *o.throttleK
	rows := []retryStormRealRow{
		{name: "seed: no budget", short: "seed: no budget", seed: true},
		{name: "seed: budget", short: "seed: budget", seed: true, budget: true},
		{name: "real: budget", short: "real: budget"},
	}
	layer := func(name string, set func(*retryStormRealRow)) {
		r := rows[len(rows)-1]
		r.name, r.short = "real: "+name, "real: "+name
		set(&r)
		rows = append(rows, r)
	}
	if k != 0 {
		layer("+ throttle", func(r *retryStormRealRow) { r.throttle = true })
	}
	if o.breaker != retryStormBreakerOff {
		layer("+ breaker", func(r *retryStormRealRow) { r.breaker = true })
	}

	r := &Report{}
	dipLen := p.dipTo - p.dipFrom
	r.Println("retry storm, the library's client policies under virtual time: " + Num(p.newRate) + " new requests/s; server capacity " +
		Num(p.capacity) + "/s, " + Num(p.dipCap) + "/s in [" + Num(p.dipFrom) + ", " + Num(p.dipTo) + ") s; attempt timeout " +
		Num(p.timeout) + " s")
	if *o.drop {
		r.Println("server: FIFO; it drops an attempt whose client has timed out when the attempt reaches the head of the queue (every row)")
	} else {
		r.Println("server: FIFO; it serves every attempt, also those whose client has timed out (--drop-expired=false; every row)")
	}
	r.Println("each call as client.Transport makes it: throttle.Allow → retry loop (retry.Policy.Next after each failed attempt) around [breaker.Allow → send → Done]")
	r.Println("  seed: no budget   the seed's simulation, \"backoff + jitter\": up to " + Int(p.maxRetries) + " retries, full jitter, base " +
		Num(retryStormBackoffBase) + " s")
	r.Println("  seed: budget      the seed's simulation, \"backoff + jitter + budget\": " + Num(p.budget.Ratio) + " token per new request, at most " +
		Num(p.budget.Max))
	r.Println("  real: budget      retry.Policy: " + Int(p.maxRetries+1) + " attempts, that backoff and budget, deadline " +
		Num(*o.deadline) + " s after arrival (no retry that cannot end before it), expected attempt time = moving average of answered attempts")
	if k != 0 {
		r.Println("  real: + throttle  and throttle.Throttle before each call, K = " + Num(k) + " over " + Num(*o.throttleW) +
			" s: refuses with p = max(0, (requests − K·accepts)/(requests + 1))")
	}
	switch o.breaker {
	case retryStormBreakerConsecutive:
		r.Println("  real: + breaker   and a breaker around each attempt, consecutive: 3 failures in a row open it for 5 s, then 1 trial; a refused attempt is retried after the backoff, free of the budget")
	case retryStormBreakerRate:
		r.Println("  real: + breaker   and a breaker around each attempt, rate: ≥ 50% of ≥ 20 attempts reported in 10 s failed open it for 5 s, then 3 trials; a refused attempt is retried after the backoff, free of the budget")
	}
	r.Println("ok/s in dip: attempts answered within the timeout per second; recovery: the first 5 s window from " + Num(p.dipTo) +
		" s in which ≥ 95% of the attempts sent and ≥ 95% of the new requests were answered in time")
	r.Println("")
	r.Println(PadEnd("client policy", 18) + PadStart("load/s in dip", 15) + PadStart("load/s 120-180 s", 18) +
		PadStart("ok/s in dip", 13) + "  recovery after " + Num(p.dipTo) + " s")
	table := r.Table("policies", "policy", "load_per_s_in_dip", "load_x_in_dip", "load_per_s_120_180",
		"load_x_120_180", "recovery_after_s", "ok_per_s_in_dip", "answered_share", "throttled", "breaker_refused",
		"stopped_attempts", "stopped_budget", "stopped_deadline", "deadline_cut")
	secs := make([]float64, p.end)
	capY := make([]float64, p.end)
	for i := range secs {
		secs[i] = float64(i)
		capY[i] = p.capAt(float64(i))
	}
	load := r.Chart("Retry storm, library client policies: offered load (attempts per second)", "time (s)", "attempts/s")
	good := r.Chart("Retry storm, library client policies: goodput (attempts answered within the timeout per second)", "time (s)", "answered in time/s")

	newPerSec := make([]float64, p.end)
	arrivals := p.arrivals(rng.New(p.seed))
	for _, t := range arrivals {
		newPerSec[int(t)]++
	}
	for _, row := range rows {
		var att, ok []float64
		var st *retryStormRealStats
		var err error
		if row.seed {
			att, ok, err = p.simulate(true, row.budget, *o.drop)
		} else {
			st = new(retryStormRealStats)
			att, ok, err = p.simulateReal(o, row, st)
		}
		if err != nil {
			return nil, err
		}
		s := p.summarize(att, ok, newPerSec)
		okDip := retryStormSliceSum(ok, p.dipFrom, p.dipTo) / dipLen
		r.Println(PadEnd(row.name, 18) + PadStart(s.dipText, 15) + PadStart(s.lateText, 18) +
			PadStart(Fixed(okDip, 0), 13) + "  " + s.recText)
		share := math.NaN() // no new request: null in JSON
		if len(arrivals) > 0 {
			share = Sum(ok) / float64(len(arrivals))
		}
		vals := []any{row.name, s.dipRate, s.dipRate / p.newRate, s.lateRate, s.lateRate / p.newRate, s.recovery, okDip, share}
		if st == nil {
			vals = append(vals, nil, nil, nil, nil, nil, nil)
		} else {
			vals = append(vals, st.throttled, st.breakerRefused, st.stops[retry.StopAttempts],
				st.stops[retry.StopBudget], st.stops[retry.StopDeadline], st.cut)
		}
		table.Add(vals...)
		load.Line(row.short, secs, att)
		good.Line(row.short, secs, ok)
	}
	load.Line("server capacity", secs, capY)
	good.Line("server capacity", secs, capY)
	return r, nil
}

// Kinds of real-mode events.
const (
	rsSend    = iota // an attempt is sent (a retry; first attempts are the arrivals)
	rsAnswer         // the attempt's answer reaches the client in time
	rsTimeout        // the attempt's timeout fires: it failed
	rsCut            // the call's deadline passes with the attempt still out
)

// retryStormCall is a call in flight, carried by its one pending event.
type retryStormCall struct {
	t       float64 // the event's instant
	seq     uint64  // insertion number: ties go first in, first out
	kind    uint8
	n       int     // attempts made, this one included
	arrival float64 // when the call arrived; its deadline is arrival + --deadline
	sent    float64 // when the current attempt was sent
	prev    float64 // the delay Next returned before the current attempt
	ticket  breaker.Ticket
}

// simulateReal runs one real row and returns, per second, the attempts
// sent and the attempts answered within the timeout (both counted in the
// second the attempt was sent, as the seed's simulation counts them).
//
// Events are processed in time order (ties first in, first out; a new
// request before a pending event at the same instant). The server is the
// seed's FIFO: an attempt sent at t starts at max(free, t) and takes an
// exponential service time at the capacity of that instant, drawn when it
// is sent; with drop, an attempt that would start more than the timeout
// after it was sent is dropped without service. The client learns each
// outcome when it happens: the answer at the end of service, a failure at
// sent + timeout, and reports it then to the breaker (Done, or Cancel when
// the call's own deadline ended the attempt) and the throttle (Record,
// accepted only for an answer). Policy.Next is asked at the failure, with
// the seed's backoff and budget, the call's deadline, and the expected
// attempt time as client.Transport keeps it: a moving average (weight 1/8)
// of the answered attempts' durations.
//
// The pending events are at most one per call in flight, so memory is
// bounded by the arrivals (at most retryStormMaxArrivals in expectation).
func (p retryStormParams) simulateReal(o *retryStormRealFlags, row retryStormRealRow, st *retryStormRealStats) (att, ok []float64, err error) {
	rnd := rng.New(p.seed)
	end := float64(p.end)
	arrivals := p.arrivals(rnd)
	budget, err := retry.NewBudget(p.budget)
	if err != nil {
		return nil, nil, &UsageError{Msg: err.Error()}
	}
	policy, err := retry.NewPolicy(retry.Policy{
		MaxAttempts: p.maxRetries + 1,
		// A cap of Base·2^maxRetries never binds: n ≤ maxRetries.
		Backoff: retry.Backoff{Base: retryStormBackoffBase, Cap: math.Ldexp(retryStormBackoffBase, p.maxRetries), Jitter: retry.FullJitter},
		Budget:  budget,
	})
	if err != nil {
		return nil, nil, &UsageError{Msg: err.Error()}
	}
	var thr *throttle.Throttle
	var u *rng.Mulberry32
	if row.throttle {
		if thr, err = throttle.New(throttle.Config{K: *o.throttleK, Window: *o.throttleW}); err != nil {
			return nil, nil, &UsageError{Flag: "throttle-k", Msg: err.Error()}
		}
		u = rng.New(p.seed ^ retryStormThrottleSalt)
	}
	var br *breaker.Breaker
	if row.breaker {
		cfg := breaker.Config{}
		if o.breaker == retryStormBreakerRate {
			cfg = retryStormRateBreaker
		}
		if br, err = breaker.New(cfg); err != nil {
			return nil, nil, &UsageError{Flag: "breaker", Msg: err.Error()}
		}
	}

	att, ok = make([]float64, p.end), make([]float64, p.end)
	var pending retryStormCallHeap
	var seq uint64
	push := func(c retryStormCall) {
		if c.t < end { // nothing at or after the end changes the counts
			seq++
			c.seq = seq
			pending.push(c)
		}
	}
	free := 0.0 // when the server finishes the work it has
	srtt := 0.0 // moving average of answered attempts' durations; 0: none yet
	for next := 0; ; {
		var c retryStormCall
		switch {
		case next < len(arrivals) && (len(pending) == 0 || arrivals[next] <= pending[0].t):
			t := arrivals[next]
			next++
			if thr != nil && !thr.Allow(t, u.Float64()) {
				st.throttled++
				continue
			}
			policy.RecordRequest(t)
			c = retryStormCall{t: t, kind: rsSend, n: 1, arrival: t}
		case len(pending) > 0:
			c = pending.pop()
		default:
			return att, ok, nil
		}
		t := c.t
		switch c.kind {
		case rsSend:
			if br != nil {
				tk, err := br.Allow(t)
				if err != nil {
					// As client.Transport: retried after the backoff (the
					// breaker may let a trial through by then), without
					// spending the budget — nothing reached the server.
					st.breakerRefused++
					delay, v := policy.Next(retry.Attempt{
						N: c.n, Now: t, Prev: c.prev, Deadline: c.arrival + *o.deadline, Expected: srtt, After: -1, Unsent: true,
					}, rnd)
					if v != retry.Retry {
						st.stops[v]++
						continue
					}
					c.kind, c.t, c.n, c.prev = rsSend, t+delay, c.n+1, delay
					push(c)
					continue
				}
				c.ticket = tk
			}
			att[int(t)]++
			deadline := c.arrival + *o.deadline
			start := math.Max(free, t)
			answered := false
			if !(*o.drop && start-t > p.timeout) {
				free = start + rnd.Exp(1/p.capAt(start))
				answered = free-t <= p.timeout && free < deadline
			}
			c.sent = t
			switch {
			case answered:
				ok[int(t)]++
				c.kind, c.t = rsAnswer, free
			case deadline <= t+p.timeout:
				c.kind, c.t = rsCut, deadline
			default:
				c.kind, c.t = rsTimeout, t+p.timeout
			}
			push(c)
		case rsAnswer:
			c.ticket.Done(t, true)
			if thr != nil {
				thr.Record(t, true)
			}
			if d := t - c.sent; srtt == 0 {
				srtt = d
			} else {
				srtt = float64(0.875*srtt) + float64(0.125*d)
			}
		case rsCut:
			c.ticket.Done(t, false) // the deadline passed: the server was too slow (as client.Transport counts it)
			if thr != nil {
				thr.Record(t, false)
			}
			st.cut++
		case rsTimeout:
			c.ticket.Done(t, false)
			if thr != nil {
				thr.Record(t, false)
			}
			delay, v := policy.Next(retry.Attempt{
				N: c.n, Now: t, Prev: c.prev, Deadline: c.arrival + *o.deadline, Expected: srtt, After: -1,
			}, rnd)
			if v != retry.Retry {
				st.stops[v]++
				continue
			}
			c.kind, c.t, c.n, c.prev, c.ticket = rsSend, t+delay, c.n+1, delay, breaker.Ticket{}
			push(c)
		}
	}
}

// retryStormCallHeap is the queue of calls in flight, by (t, seq).
type retryStormCallHeap = minHeap[retryStormCall]

func (c retryStormCall) before(o retryStormCall) bool {
	return c.t < o.t || (c.t == o.t && c.seq < o.seq)
}
