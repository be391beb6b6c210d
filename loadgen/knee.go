package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// KneeCriteria says when a step is sustained: its p99 (Latency.P99, every
// arrival, timeouts and unsent counted as the timeout) at most P99Factor ×
// the base p99 (the lowest step's), its error rate at most MaxErrorRate
// and its goodput at least MinGoodShare of what was offered. The zero
// value gives the criteria: 3, 1% and 95%, with a base of at
// least 1 ms.
type KneeCriteria struct {
	P99Factor    float64 // default 3
	MaxErrorRate float64 // default 0.01; a value below 0 allows no error at all
	MinGoodShare float64 // default 0.95
	// P99Floor is the least base p99: below a millisecond (a loopback
	// service) scheduling noise, not load, moves the p99 by a factor of
	// three. Default 1ms.
	P99Floor time.Duration
	// NoConfirm takes a trusted step or probe that fails as the service's
	// limit at once. By default (false) ConfirmKnee and Bisect measure it
	// once more at the same rate, and the rate fails only when the second
	// measurement fails too: one stall of a busy machine (a GC pause, a
	// neighbour) is not the service's knee. A confirmation costs one more
	// step at the failing rate, an overloaded one when the failure was real.
	NoConfirm bool
}

// SafeShare is the share of the knee reported as the safe rate.
const SafeShare = 0.9

// DefaultTolerance is Bisect's tolerance when given 0: the knee is known
// to within 5%.
const DefaultTolerance = 0.05

// maxBisections bounds Bisect's probes whatever the tolerance.
const maxBisections = 20

// Knee is the highest rate found sustained.
type Knee struct {
	Rate float64 // the highest sustained rate (0 when none was)
	Safe float64 // SafeShare × Rate
	Fail float64 // the lowest rate above Rate that failed; 0 when none did
	// FailReason says why Fail failed (KneeCriteria.Fails); "" when it is
	// not known (Bisect never probed Fail itself).
	FailReason string
	BaseP99    time.Duration // the p99 the P99Factor multiplies (after the floor)
	// Bounded is true when even the highest trusted step passed: the knee
	// is at least Rate, and the ramp did not reach it.
	Bounded bool
	// Probes are Bisect's steps, in the order run (FindKnee adds none).
	Probes []StepResult
	// Confirmations are the second measurements of the trusted steps and
	// probes that failed (ConfirmKnee's, then Bisect's), in the order run.
	Confirmations []Confirmation
	// Untrusted are the indices (StepResult.Index) of the steps FindKnee
	// left out: invalid (the generator was late), partial or empty.
	Untrusted []int
}

func (c KneeCriteria) withDefaults() KneeCriteria {
	if !(c.P99Factor > 0) {
		c.P99Factor = 3
	}
	switch {
	case c.MaxErrorRate < 0:
		c.MaxErrorRate = 0
	case c.MaxErrorRate == 0 || math.IsNaN(c.MaxErrorRate):
		c.MaxErrorRate = 0.01
	}
	if !(c.MinGoodShare > 0) {
		c.MinGoodShare = 0.95
	}
	if c.P99Floor <= 0 {
		c.P99Floor = time.Millisecond
	}
	return c
}

// Base is the p99 a step's p99 is compared with: p99 (the lowest step's),
// at least P99Floor.
func (c KneeCriteria) Base(p99 time.Duration) time.Duration {
	return max(p99, c.withDefaults().P99Floor)
}

// Fails says why s is not sustained against the lowest step's p99 base,
// or "" when it is. An invalid step fails (its figures measure the
// generator as much as the service), and so do a partial and an empty one.
func (c KneeCriteria) Fails(s StepResult, base time.Duration) string {
	c = c.withDefaults()
	limit := time.Duration(c.P99Factor * float64(c.Base(base)))
	switch {
	case s.Invalid:
		return fmt.Sprintf("invalid (send lag p99 %v)", roundMs(s.SendLag.P99))
	case s.Partial:
		return "partial (the run stopped during it)"
	case s.Offered == 0:
		return "nothing offered"
	case s.Latency.P99 > limit:
		return fmt.Sprintf("p99 %v above %g × %v", roundMs(s.Latency.P99), c.P99Factor, roundMs(c.Base(base)))
	case s.ErrorRate() > c.MaxErrorRate:
		return fmt.Sprintf("errors %.2f%% above %.2f%%", 100*s.ErrorRate(), 100*c.MaxErrorRate)
	case s.GoodShare() < c.MinGoodShare:
		return fmt.Sprintf("goodput %.1f%% of offered, below %.1f%%", 100*s.GoodShare(), 100*c.MinGoodShare)
	}
	return ""
}

// roundMs rounds d to a tenth of a millisecond, for messages.
func roundMs(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// FindKnee finds the knee of a ramp: the highest step, taken in order of
// rate, below the first that fails c. Steps that cannot be trusted —
// invalid ones (the generator was late, so the service's figures are not
// known), partial ones (the run stopped during them) and empty ones — are
// left out: they neither pass nor fail, and
// are listed in Knee.Untrusted. The base p99 is the lowest trusted step's.
// ok is false when no step is trusted or the lowest one already fails (the
// knee is below the ramp). FindKnee measures nothing again: ConfirmKnee
// does, for c's confirmation.
func FindKnee(steps []StepResult, c KneeCriteria) (k Knee, ok bool) {
	untrusted, trusted := sortTrusted(steps)
	k, _ = judge(trusted, c)
	k.Untrusted = untrusted
	return k, k.Rate > 0
}

// sortTrusted sorts steps by rate and splits them: the indices of the
// untrusted ones, and the trusted ones.
func sortTrusted(steps []StepResult) (untrusted []int, trusted []StepResult) {
	sorted := slices.Clone(steps)
	slices.SortStableFunc(sorted, func(a, b StepResult) int { return cmp.Compare(a.Rate, b.Rate) })
	for _, s := range sorted {
		if isTrusted(s) {
			trusted = append(trusted, s)
		} else {
			untrusted = append(untrusted, s.Index)
		}
	}
	return untrusted, trusted
}

// isTrusted says s measured the service: it is valid, whole and not empty.
func isTrusted(s StepResult) bool { return !s.Invalid && !s.Partial && s.Offered > 0 }

// judge is the knee of trusted (sorted by rate): the base, the highest
// step below the first failing one, and that one's index in trusted (−1
// when every step passed or none is trusted).
func judge(trusted []StepResult, c KneeCriteria) (k Knee, at int) {
	if len(trusted) == 0 {
		return k, -1
	}
	k.BaseP99 = c.Base(trusted[0].Latency.P99)
	k.Bounded = true
	at = -1
	for i, s := range trusted {
		if why := c.Fails(s, k.BaseP99); why != "" {
			k.Fail, k.FailReason, k.Bounded, at = s.Rate, why, false, i
			break
		}
		k.Rate = s.Rate
	}
	k.Safe = SafeShare * k.Rate
	return k, at
}

// Probe runs one step at rate and returns its result. confirms is "" for
// a new rate; for a confirmation it names what is measured again, as the
// reports do: "step 3" (the ramp's, numbered from 1) or "b2" (a bisection
// probe).
type Probe func(ctx context.Context, rate float64, confirms string) (StepResult, error)

// Bisect refines a knee between lo, a rate that passed, and hi, one that
// failed, by probing the middle rate until (hi − lo) / lo ≤ tol (0:
// DefaultTolerance; at most 20 probes). base is the lowest step's p99 (as
// FindKnee's Knee.BaseP99). A probe that is invalid counts as failing: no
// knee is claimed above a rate the generator could not deliver. A trusted
// probe that fails is measured once more (unless c.NoConfirm), and its
// rate fails only when that confirmation fails too: at most 40 probes in
// all. On a probe's error Bisect returns the knee found so far with the
// error.
func Bisect(ctx context.Context, lo, hi float64, base time.Duration, c KneeCriteria, tol float64, probe Probe) (Knee, error) {
	if tol <= 0 {
		tol = DefaultTolerance
	}
	k := Knee{BaseP99: c.Base(base)}
	if !(lo > 0) || !(hi > lo) || math.IsInf(hi, 0) {
		return k, fmt.Errorf("loadgen: bisect: want 0 < lo < hi, got lo %v, hi %v", lo, hi)
	}
	if probe == nil {
		return k, errors.New("loadgen: bisect: no probe")
	}
	var err error
	for i := 0; i < maxBisections && (hi-lo)/lo > tol; i++ {
		if err = ctx.Err(); err != nil {
			break
		}
		mid := (lo + hi) / 2
		var s StepResult
		if s, err = probe(ctx, mid, ""); err != nil {
			break
		}
		k.Probes = append(k.Probes, s)
		why := c.Fails(s, base)
		if why != "" && isTrusted(s) && !c.NoConfirm {
			var cf Confirmation
			if cf, err = confirm(ctx, s, why, "b"+strconv.Itoa(len(k.Probes)), base, c, probe); err != nil {
				break
			}
			k.Confirmations = append(k.Confirmations, cf)
			why = cf.failReason()
		}
		if why == "" {
			lo = mid
		} else {
			hi, k.FailReason = mid, why
		}
	}
	k.Rate, k.Safe, k.Fail = lo, SafeShare*lo, hi
	return k, err
}
