package limit

import (
	"container/heap"
	"fmt"
	"math"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

// A small closed-loop driver in virtual time. The server has a hidden true
// concurrency C and base latency L: a request admitted with n in flight
// (itself included) takes L × max(1, n/C), plus, when noise > 0, an
// exponentially distributed delay of mean noise × L (drawn from a seeded
// mulberry32, so runs repeat exactly). Clients = 2C, each sends its next
// request as soon as the previous one finishes, and retries after L/2 when
// rejected: twice the load the server can carry at its base latency. The
// driver enforces alg.Limit() and feeds every completion to alg.Update.

type simEvent struct {
	at       float64
	seq      int
	finish   bool    // completion (else: a client's attempt)
	rtt      float64 // completion only
	inFlight int     // completion only: in flight when it started
}

type simHeap []simEvent

func (h simHeap) Len() int { return len(h) }
func (h simHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h simHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *simHeap) Push(x any)   { *h = append(*h, x.(simEvent)) }
func (h *simHeap) Pop() any     { old := *h; e := old[len(old)-1]; *h = old[:len(old)-1]; return e }

// simPhase is one stretch of the run with a given base latency.
type simPhase struct {
	until float64 // end of the phase, seconds
	L     float64 // base latency, seconds
}

// simResult is the mean limit over the last measure seconds of each phase.
type simResult struct {
	mean   []float64 // time-weighted mean limit
	inBand []float64 // share of the time the limit was within ±25% of C
}

func runSim(alg Algorithm, C int, phases []simPhase, measure float64) simResult {
	return runNoisySim(alg, C, phases, measure, 0, 0)
}

// runNoisySim is runSim with latency noise of mean noise × L, drawn from a
// mulberry32 seeded with seed.
func runNoisySim(alg Algorithm, C int, phases []simPhase, measure, noise float64, seed uint32) simResult {
	src := rng.New(seed)
	h := &simHeap{}
	seq := 0
	push := func(e simEvent) { seq++; e.seq = seq; heap.Push(h, e) }
	for i := 0; i < 2*C; i++ {
		push(simEvent{at: float64(i) * 1e-4})
	}
	inFlight := 0
	phase := 0
	res := simResult{mean: make([]float64, len(phases)), inBand: make([]float64, len(phases))}
	var sum, weight, band, lastT float64
	end := phases[len(phases)-1].until
	for h.Len() > 0 {
		e := heap.Pop(h).(simEvent)
		if e.at > end {
			break
		}
		// integrate the limit over time in the measurement windows
		for phase < len(phases) && e.at >= phases[phase].until {
			lastT = phases[phase].until
			if weight > 0 {
				res.mean[phase] = sum / weight
				res.inBand[phase] = band / weight
			}
			sum, weight, band = 0, 0, 0
			phase++
		}
		if phase >= len(phases) {
			break
		}
		from := math.Max(lastT, phases[phase].until-measure)
		if e.at > from {
			l := float64(alg.Limit())
			sum += l * (e.at - from)
			weight += e.at - from
			if l >= 0.75*float64(C) && l <= 1.25*float64(C) {
				band += e.at - from
			}
		}
		lastT = e.at
		L := phases[phase].L
		if e.finish {
			inFlight--
			alg.Update(Sample{Now: e.at, RTT: e.rtt, InFlight: e.inFlight})
		}
		// a completion frees its client, which tries again now
		if inFlight < alg.Limit() {
			inFlight++
			rtt := L * math.Max(1, float64(inFlight)/float64(C))
			if noise > 0 {
				rtt += src.Exp(noise * L)
			}
			push(simEvent{at: e.at + rtt, finish: true, rtt: rtt, inFlight: inFlight})
		} else {
			push(simEvent{at: e.at + L/2})
		}
	}
	if phase < len(phases) && weight > 0 {
		res.mean[phase] = sum / weight
		res.inBand[phase] = band / weight
	}
	return res
}

// TestSettle: each adaptive algorithm's limit settles within ±25% of the
// true concurrency C, and again after the base latency L doubles (at 60 s).
// Measured over the last 20 s of each phase: the time-weighted mean limit,
// and the share of time within ±25% (probes briefly halve the limit).
// Probe settings are the defaults; AIMD learns its baseline and Gradient2
// tolerates 10% (their defaults, 2× and 1.5×1.2×, aim for more latency:
// the limit would settle at about 2C and 1.8C by design).
func TestSettle(t *testing.T) {
	algs := []struct {
		name string
		alg  func() (Algorithm, error)
	}{
		{"AIMD", func() (Algorithm, error) { return NewAIMD(AIMDConfig{LearnBaseline: true, Tolerance: 1.1}) }},
		{"Gradient", func() (Algorithm, error) { return NewGradient(GradientConfig{}) }},
		{"Gradient2", func() (Algorithm, error) { return NewGradient2(Gradient2Config{Tolerance: 1.1, MaxDrift: 1.05}) }},
		{"Vegas", func() (Algorithm, error) { return NewVegas(VegasConfig{}) }},
	}
	// At C=30 Vegas and Gradient2 keep a queue allowance that is large
	// relative to C (3–6×log10(limit) ≈ 5–9, and 4 plus 10% tolerance): they
	// settle about 27–29% above C, so only AIMD and Gradient are held to
	// ±25% there.
	servers := []struct {
		C    int
		L    float64
		only map[string]bool // nil: all algorithms
	}{{100, 0.040, nil}, {30, 0.010, map[string]bool{"AIMD": true, "Gradient": true}}}
	for _, srv := range servers {
		C := srv.C
		phases := []simPhase{{until: 60, L: srv.L}, {until: 120, L: 2 * srv.L}}
		for _, a := range algs {
			if srv.only != nil && !srv.only[a.name] {
				continue
			}
			t.Run(fmt.Sprintf("%s/C=%d", a.name, C), func(t *testing.T) {
				alg, err := a.alg()
				if err != nil {
					t.Fatal(err)
				}
				r := runSim(alg, C, phases, 20)
				t.Logf("C=%d L=%gms: mean limit %.1f (in band %.0f%% of the time); after L doubles %.1f (%.0f%%)",
					C, 1000*srv.L, r.mean[0], 100*r.inBand[0], r.mean[1], 100*r.inBand[1])
				for i, m := range r.mean {
					if m < 0.75*float64(C) || m > 1.25*float64(C) {
						t.Errorf("phase %d (L=%v): mean limit %.1f, want within ±25%% of %d", i, phases[i].L, m, C)
					}
					if r.inBand[i] < 0.9 {
						t.Errorf("phase %d (L=%v): limit within ±25%% of C only %.0f%% of the time, want ≥ 90%%", i, phases[i].L, 100*r.inBand[i])
					}
				}
			})
		}
	}
}

// Gradient with Tolerance 1.5 tolerates an RTT 1.5 × the no-load RTT: at
// 2× load (200 clients, C = 100) it settles where about 150 are in flight
// (RTT 1.5 L), plus its queue allowance √limit, near 163; with the default
// 1 near 110 (TestSettle). Its limit is not held by an in-flight gate, so a
// tolerance the load cannot reach (2: 200 clients give at most 2 L) lets
// it grow to MaxLimit.
func TestGradientToleranceSettles(t *testing.T) {
	phases := []simPhase{{until: 60, L: 0.040}, {until: 120, L: 0.080}}
	for _, c := range []struct {
		tolerance float64
		lo, hi    float64
	}{{1.5, 140, 180}, {2, 900, 1000}} {
		g, err := NewGradient(GradientConfig{Tolerance: c.tolerance})
		if err != nil {
			t.Fatal(err)
		}
		r := runSim(g, 100, phases, 20)
		t.Logf("Tolerance %v: mean limit %.1f, after L doubles %.1f", c.tolerance, r.mean[0], r.mean[1])
		for i, m := range r.mean {
			if m < c.lo || m > c.hi {
				t.Errorf("Tolerance %v, phase %d: mean limit %.1f, want within [%v, %v]", c.tolerance, i, m, c.lo, c.hi)
			}
		}
	}
}
