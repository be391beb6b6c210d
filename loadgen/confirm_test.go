package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

var errScripted = errors.New("scripted probe error")

// script is a Probe that answers each rate with its scripted results in
// turn — 'p' passes (p99 50 ms), 'f' fails (p99 900 ms), 'i' is invalid,
// 'e' is an error — and records each call as "rate" or "rate/what it
// confirms".
type script struct {
	answers map[float64]string
	calls   []string
}

func (sc *script) probe(_ context.Context, rate float64, of string) (StepResult, error) {
	call := fmt.Sprint(rate)
	if of != "" {
		call += "/" + of
	}
	sc.calls = append(sc.calls, call)
	a := sc.answers[rate]
	if a == "" {
		return StepResult{}, fmt.Errorf("unscripted probe at %v", rate)
	}
	sc.answers[rate] = a[1:]
	s := step(100+len(sc.calls), rate, 1000, 1000, 50*ms)
	switch a[0] {
	case 'f':
		s.Latency.P99 = 900 * ms
	case 'i':
		s = invalid(s)
	case 'e':
		return StepResult{}, errScripted
	}
	return s, nil
}

// stalled is a ramp step whose p99 one stall of the machine pushed to
// 229 ms, above 3 × the lowest step's 52 ms.
func stalled(index int, rate float64) StepResult { return step(index, rate, 1000, 1000, 229*ms) }

func TestConfirmKnee(t *testing.T) {
	// 100 passes, 150 stalled, 200 passes, 250 and 300 over capacity.
	stall := []StepResult{ramp()[0], stalled(1, 150), ramp()[2], ramp()[3], ramp()[4]}
	for _, c := range []struct {
		name       string
		steps      []StepResult
		crit       KneeCriteria
		answers    map[float64]string
		rate, fail float64
		bounded    bool
		calls      []string
		reason     string // in FailReason
	}{
		{"a transient failure is confirmed away and the ramp goes on", stall, KneeCriteria{}, map[float64]string{150: "p", 250: "f"},
			200, 250, false, []string{"150/step 2", "250/step 4"}, "p99 900ms above 3 × 52ms; confirmed: p99 900ms above 3 × 52ms"},
		{"a real failure ends the ramp", ramp(), KneeCriteria{}, map[float64]string{250: "f"},
			200, 250, false, []string{"250/step 4"}, "; confirmed: p99 900ms above 3 × 52ms"},
		{"an invalid confirmation fails", stall, KneeCriteria{}, map[float64]string{150: "i"},
			100, 150, false, []string{"150/step 2"}, "p99 229ms above 3 × 52ms; confirmed: invalid (send lag p99 12ms)"},
		{"no confirmation: the stall is the knee", stall, KneeCriteria{NoConfirm: true}, nil,
			100, 150, false, nil, "p99 229ms above 3 × 52ms"},
		{"every failure transient: bounded, one confirmation per step", []StepResult{ramp()[0], stalled(1, 150), stalled(2, 200)},
			KneeCriteria{}, map[float64]string{150: "p", 200: "p"}, 200, 0, true, []string{"150/step 2", "200/step 3"}, ""},
		{"untrusted steps are not confirmed", []StepResult{ramp()[0], ramp()[1], invalid(ramp()[3])}, KneeCriteria{}, nil,
			150, 0, true, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &script{answers: c.answers}
			k, ok, err := ConfirmKnee(context.Background(), c.steps, c.crit, sc.probe)
			if err != nil || !ok || k.Rate != c.rate || k.Fail != c.fail || k.Bounded != c.bounded || k.Safe != 0.9*c.rate {
				t.Errorf("knee %v fail %v bounded %v ok %v err %v; want %v, %v, %v", k.Rate, k.Fail, k.Bounded, ok, err, c.rate, c.fail, c.bounded)
			}
			if !slices.Equal(sc.calls, c.calls) || len(k.Confirmations) != len(c.calls) {
				t.Errorf("probed %v, %d confirmations; want %v", sc.calls, len(k.Confirmations), c.calls)
			}
			if !strings.Contains(k.FailReason, c.reason) || (c.reason == "") != (k.FailReason == "") {
				t.Errorf("fail reason %q, want %q in it", k.FailReason, c.reason)
			}
		})
	}
}

// The confirmations say what they measured again and how it went.
func TestConfirmKneeRecords(t *testing.T) {
	sc := &script{answers: map[float64]string{150: "p", 250: "f"}}
	k, _, _ := ConfirmKnee(context.Background(), []StepResult{ramp()[0], stalled(1, 150), ramp()[2], ramp()[3]}, KneeCriteria{}, sc.probe)
	want := []Confirmation{
		{Of: "step 2", First: "p99 229ms above 3 × 52ms"},
		{Of: "step 4", First: "p99 900ms above 3 × 52ms", Reason: "p99 900ms above 3 × 52ms"},
	}
	if len(k.Confirmations) != len(want) {
		t.Fatalf("%d confirmations, want %d", len(k.Confirmations), len(want))
	}
	for i, w := range want {
		got := k.Confirmations[i]
		if got.Of != w.Of || got.First != w.First || got.Reason != w.Reason || got.Passed() != (w.Reason == "") || got.Step.Index != 101+i {
			t.Errorf("confirmation %d: %+v, want %+v", i+1, got, w)
		}
	}
}

// A probe's error during a confirmation returns the knee found so far:
// the ramp up to the step being confirmed.
func TestConfirmKneeError(t *testing.T) {
	sc := &script{answers: map[float64]string{150: "e"}}
	k, ok, err := ConfirmKnee(context.Background(), []StepResult{ramp()[0], stalled(1, 150), ramp()[2]}, KneeCriteria{}, sc.probe)
	if !errors.Is(err, errScripted) || !ok || k.Rate != 100 || k.Fail != 150 || len(k.Confirmations) != 0 {
		t.Errorf("knee %v fail %v ok %v, %d confirmations, err %v; want 100, 150, true, 0, the probe's", k.Rate, k.Fail, ok, len(k.Confirmations), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sc = &script{answers: map[float64]string{150: "p"}}
	if _, _, err := ConfirmKnee(ctx, []StepResult{ramp()[0], stalled(1, 150)}, KneeCriteria{}, sc.probe); !errors.Is(err, context.Canceled) || len(sc.calls) != 0 {
		t.Errorf("cancelled: err %v after %v", err, sc.calls)
	}
}

// A bisection probe that stalls once does not lower the knee: capacity
// 217, 212.5's first measurement stalled. Without the confirmation the
// knee would be 206.25.
func TestBisectTransientProbe(t *testing.T) {
	answers := func() map[float64]string {
		return map[float64]string{225: "ff", 212.5: "fp", 218.75: "ff", 206.25: "p"}
	}
	sc := &script{answers: answers()}
	k, err := Bisect(context.Background(), 200, 250, 50*ms, KneeCriteria{}, 0, sc.probe)
	want := []string{"225", "225/b1", "212.5", "212.5/b2", "218.75", "218.75/b3"}
	if err != nil || k.Rate != 212.5 || k.Fail != 218.75 || !slices.Equal(sc.calls, want) {
		t.Errorf("knee %v fail %v err %v, probed %v; want 212.5, 218.75, %v", k.Rate, k.Fail, err, sc.calls, want)
	}
	if len(k.Probes) != 3 || len(k.Confirmations) != 3 || !k.Confirmations[1].Passed() || k.Confirmations[2].Passed() {
		t.Errorf("%d probes, confirmations %+v; want 3 probes and 3 confirmations, the second passing", len(k.Probes), k.Confirmations)
	}
	if want := "p99 900ms above 3 × 50ms; confirmed: p99 900ms above 3 × 50ms"; k.FailReason != want {
		t.Errorf("fail reason %q, want %q", k.FailReason, want)
	}
	sc = &script{answers: answers()}
	if k, _ := Bisect(context.Background(), 200, 250, 50*ms, KneeCriteria{NoConfirm: true}, 0, sc.probe); k.Rate != 206.25 {
		t.Errorf("no confirm: knee %v, want 206.25 (probed %v)", k.Rate, sc.calls)
	}
}

// An invalid probe fails without confirmation; a probe error during a
// confirmation returns the knee so far.
func TestBisectConfirmError(t *testing.T) {
	sc := &script{answers: map[float64]string{225: "i", 212.5: "p", 218.75: "fe"}}
	k, err := Bisect(context.Background(), 200, 250, 50*ms, KneeCriteria{}, 0, sc.probe)
	want := []string{"225", "212.5", "218.75", "218.75/b3"}
	if !errors.Is(err, errScripted) || k.Rate != 212.5 || k.Fail != 225 || !slices.Equal(sc.calls, want) || len(k.Confirmations) != 0 {
		t.Errorf("knee %v fail %v err %v, probed %v, %d confirmations; want 212.5, 225, the probe's error, %v, 0",
			k.Rate, k.Fail, err, sc.calls, len(k.Confirmations), want)
	}
}

// confirmedKnee is a ramp of 100, 150 (stalled) and 200 req/s (over
// capacity), and its knee: 150 confirmed passing, 200 failing twice.
func confirmedKnee() (Result, *Knee) {
	row := func(index int, rate float64, p99 time.Duration) StepResult {
		n := int(rate)
		return StepResult{Index: index, Rate: rate, Offered: n, Sent: n, OK: n, Good: n, Goodput: rate, Throughput: rate,
			Latency: Quantiles{P50: 50 * ms, P90: 51 * ms, P99: p99, P999: p99}}
	}
	res := Result{Steps: []StepResult{row(0, 100, 52*ms), row(1, 150, 229*ms), row(2, 200, 1000*ms)}}
	return res, &Knee{Rate: 150, Safe: 135, Fail: 200, BaseP99: 52 * ms,
		FailReason: "p99 1000ms above 3 × 52ms; confirmed: p99 900ms above 3 × 52ms",
		Confirmations: []Confirmation{
			{Step: row(3, 150, 60*ms), Of: "step 2", First: "p99 229ms above 3 × 52ms"},
			{Step: row(4, 200, 900*ms), Of: "step 3", First: "p99 1000ms above 3 × 52ms", Reason: "p99 900ms above 3 × 52ms"},
		}}
}

// An invalid confirmation's row says INVALID once, in the step's notes.
func TestConfirmNoteInvalid(t *testing.T) {
	cf := Confirmation{Step: invalid(step(5, 250, 1000, 1000, 60*ms)), Of: "step 4", First: "p99 900ms above 3 × 52ms", Reason: "invalid (send lag p99 12ms)"}
	var b strings.Builder
	tableRow(&b, "c1", cf.Step, confirmNote(cf))
	if want := "confirms step 4: failed too; INVALID (send lag p99 12.0 ms)\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("row %q, want it to end %q", b.String(), want)
	}
}

func TestWriteTableConfirmations(t *testing.T) {
	res, knee := confirmedKnee()
	var b strings.Builder
	if err := WriteTable(&b, res, knee); err != nil {
		t.Fatal(err)
	}
	want := []string{
		" step   rate/s  offered   good/s    thr/s   p50 ms   p90 ms   p99 ms p99.9 ms  errors  unsent retries  notes",
		"    1      100      100    100.0    100.0     50.0     51.0     52.0     52.0   0.00%       0       0",
		"    2      150      150    150.0    150.0     50.0     51.0      229      229   0.00%       0       0",
		"    3      200      200    200.0    200.0     50.0     51.0     1000     1000   0.00%       0       0",
		"confirmations:",
		"   c1      150      150    150.0    150.0     50.0     51.0     60.0     60.0   0.00%       0       0  confirms step 2: passed (first: p99 229ms above 3 × 52ms)",
		"   c2      200      200    200.0    200.0     50.0     51.0      900      900   0.00%       0       0  confirms step 3: failed too (p99 900ms above 3 × 52ms)",
		"knee: 150 req/s, safe rate 135 req/s (200 req/s failed: p99 1000ms above 3 × 52ms; confirmed: p99 900ms above 3 × 52ms)",
	}
	if got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), strings.Join(want, "\n"))
	}
}

func TestWriteJSONLConfirmations(t *testing.T) {
	res, knee := confirmedKnee()
	var b strings.Builder
	if err := WriteJSONL(&b, res, knee); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		lines = append(lines, m)
	}
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 3 steps, 2 confirmations, 1 summary:\n%s", len(lines), b.String())
	}
	c1, c2, sum := lines[3], lines[4], lines[5]
	if c1["type"] != "confirm" || c1["rate"] != 150.0 || c1["index"] != 3.0 || c1["confirms"] != "step 2" || c1["passed"] != true ||
		c1["fail_reason"] != "" || c1["first_fail_reason"] != "p99 229ms above 3 × 52ms" || c1["latency_ms"].(map[string]any)["p99"] != 60.0 {
		t.Errorf("c1: %v", c1)
	}
	if c2["type"] != "confirm" || c2["confirms"] != "step 3" || c2["passed"] != false || c2["fail_reason"] != "p99 900ms above 3 × 52ms" {
		t.Errorf("c2: %v", c2)
	}
	if sum["confirmations"] != 2.0 || sum["probes"] != 0.0 || sum["offered"] != 450.0 {
		t.Errorf("summary: %v", sum)
	}
	if err := WriteSVG(io.Discard, res, knee); err != nil {
		t.Errorf("svg: %v", err)
	}
}
