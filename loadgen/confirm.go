package loadgen

import (
	"context"
	"strconv"
	"time"
)

// Confirmation is the second measurement, at the same rate, of a trusted
// step or bisection probe that failed the criteria. When it passes, the
// first measurement was transient (a stall of the machine, not the
// service's limit) and the rate counts as passing.
type Confirmation struct {
	Step   StepResult // the second measurement
	Of     string     // what it measures again: "step 3" (the ramp's, from 1) or "b2" (a bisection probe)
	First  string     // why the first measurement failed
	Reason string     // why this one failed; "" when it passed
}

// Passed says the confirmation passed: the first failure was transient.
func (cf Confirmation) Passed() bool { return cf.Reason == "" }

// failReason is why the rate fails after its confirmation: "" when the
// confirmation passed, else both measurements' reasons.
func (cf Confirmation) failReason() string {
	if cf.Passed() {
		return ""
	}
	return cf.First + "; confirmed: " + cf.Reason
}

// confirm measures the failed s once more through probe and judges the
// result against base.
func confirm(ctx context.Context, s StepResult, why, of string, base time.Duration, c KneeCriteria, probe Probe) (Confirmation, error) {
	if err := ctx.Err(); err != nil {
		return Confirmation{}, err
	}
	again, err := probe(ctx, s.Rate, of)
	if err != nil {
		return Confirmation{}, err
	}
	return Confirmation{Step: again, Of: of, First: why, Reason: c.Fails(again, base)}, nil
}

// ConfirmKnee is FindKnee with confirmation: the trusted step the ramp
// ends at (the first, by rate, that fails c) is measured once more by
// probe at its rate. When the confirmation fails too, the knee stands, its
// FailReason naming both failures. When it passes, the first measurement
// was transient: the step is replaced by its confirmation and the ramp is
// judged again, on to its next failure (100 passed, 150 failed and then
// passed, 200 passed, 250 failed twice: the knee is 200). A step is
// confirmed at most once, so there are at most as many probes as steps;
// untrusted steps are never confirmed (they say nothing about the
// service). With c.NoConfirm it is FindKnee. On a probe's error (or ctx's
// end) ConfirmKnee returns the knee found so far — the ramp up to the step
// being confirmed — with the error.
func ConfirmKnee(ctx context.Context, steps []StepResult, c KneeCriteria, probe Probe) (k Knee, ok bool, err error) {
	untrusted, trusted := sortTrusted(steps)
	confirmed := make([]bool, len(trusted))
	var confs []Confirmation
	for {
		var at int
		k, at = judge(trusted, c)
		k.Untrusted, k.Confirmations = untrusted, confs
		if at < 0 || confirmed[at] || c.NoConfirm || probe == nil {
			return k, k.Rate > 0, nil
		}
		of := "step " + strconv.Itoa(trusted[at].Index+1)
		cf, err := confirm(ctx, trusted[at], k.FailReason, of, k.BaseP99, c, probe)
		if err != nil {
			return k, k.Rate > 0, err
		}
		confs, confirmed[at] = append(confs, cf), true
		if !cf.Passed() {
			k.FailReason, k.Confirmations = cf.failReason(), confs
			return k, k.Rate > 0, nil
		}
		trusted[at] = cf.Step
	}
}
