package loadgen

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

// step is a synthetic step of 1000 arrivals at rate: ok answered 2xx, good
// of them in time, with the given p99.
func step(index int, rate float64, ok, good int, p99 time.Duration) StepResult {
	return StepResult{Index: index, Rate: rate, Offered: 1000, Sent: 1000, OK: ok, Good: good, Failed: 1000 - good,
		Latency: Quantiles{P99: p99}}
}

func invalid(s StepResult) StepResult {
	s.Invalid, s.SendLag.P99 = true, 12*ms
	return s
}

func partial(s StepResult) StepResult {
	s.Partial = true
	return s
}

// ramp is 100 to 300 req/s against a service of capacity 200.
func ramp() []StepResult {
	return []StepResult{
		step(0, 100, 1000, 1000, 52*ms),
		step(1, 150, 1000, 1000, 55*ms),
		step(2, 200, 1000, 998, 70*ms),
		step(3, 250, 1000, 801, 900*ms),
		step(4, 300, 950, 610, time.Second),
	}
}

func TestFindKnee(t *testing.T) {
	for _, c := range []struct {
		name          string
		steps         []StepResult
		ok            bool
		rate, fail    float64
		base          time.Duration
		bounded       bool
		untrustedWant []int
	}{
		{"ramp", ramp(), true, 200, 250, 52 * ms, false, nil},
		{"unsorted", []StepResult{ramp()[3], ramp()[0], ramp()[4], ramp()[2], ramp()[1]}, true, 200, 250, 52 * ms, false, nil},
		{"all pass", ramp()[:3], true, 200, 0, 52 * ms, true, nil},
		{"invalid step left out", []StepResult{ramp()[0], ramp()[1], invalid(ramp()[2]), ramp()[3]}, true, 150, 250, 52 * ms, false, []int{2}},
		{"invalid lowest step: base from the next", []StepResult{invalid(step(0, 100, 1000, 1000, 10*ms)), ramp()[1], ramp()[2]}, true, 200, 0, 55 * ms, true, []int{0}},
		{"invalid top steps: bounded", []StepResult{ramp()[0], ramp()[1], invalid(ramp()[3]), invalid(ramp()[4])}, true, 150, 0, 52 * ms, true, []int{3, 4}},
		{"lowest fails", []StepResult{step(0, 100, 950, 950, 52*ms), ramp()[1]}, false, 0, 100, 52 * ms, false, nil},
		{"a pass above the first failure is not the knee", []StepResult{ramp()[0], step(1, 150, 1000, 900, 55*ms), ramp()[2]}, true, 100, 150, 52 * ms, false, nil},
		{"partial step left out", []StepResult{ramp()[0], ramp()[1], partial(ramp()[3])}, true, 150, 0, 52 * ms, true, []int{3}},
		{"nothing trusted", []StepResult{invalid(ramp()[0])}, false, 0, 0, 0, false, []int{0}},
		{"no steps", nil, false, 0, 0, 0, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, ok := FindKnee(c.steps, KneeCriteria{})
			if ok != c.ok || k.Rate != c.rate || k.Fail != c.fail || k.BaseP99 != c.base || k.Bounded != c.bounded || !slices.Equal(k.Untrusted, c.untrustedWant) {
				t.Errorf("got ok %v rate %v fail %v base %v bounded %v untrusted %v; want %v %v %v %v %v %v",
					ok, k.Rate, k.Fail, k.BaseP99, k.Bounded, k.Untrusted, c.ok, c.rate, c.fail, c.base, c.bounded, c.untrustedWant)
			}
			if k.Safe != 0.9*c.rate {
				t.Errorf("safe %v, want %v", k.Safe, 0.9*c.rate)
			}
		})
	}
}

func TestKneeCriteriaFails(t *testing.T) {
	base := 50 * ms
	for _, c := range []struct {
		name string
		s    StepResult
		crit KneeCriteria
		fail bool
	}{
		{"p99 at 3 × base passes", step(0, 1, 1000, 1000, 150*ms), KneeCriteria{}, false},
		{"p99 just above 3 × base fails", step(0, 1, 1000, 1000, 150*ms+time.Microsecond), KneeCriteria{}, true},
		{"errors 1% pass", step(0, 1, 990, 990, 60*ms), KneeCriteria{}, false},
		{"errors 1.1% fail", step(0, 1, 989, 989, 60*ms), KneeCriteria{}, true},
		{"goodput 95% passes", step(0, 1, 1000, 950, 60*ms), KneeCriteria{}, false},
		{"goodput 94.9% fails", step(0, 1, 1000, 949, 60*ms), KneeCriteria{}, true},
		{"factor 2", step(0, 1, 1000, 1000, 110*ms), KneeCriteria{P99Factor: 2}, true},
		{"no errors allowed", step(0, 1, 999, 999, 60*ms), KneeCriteria{MaxErrorRate: -1}, true},
		{"goodput share 0.99", step(0, 1, 1000, 980, 60*ms), KneeCriteria{MinGoodShare: 0.99}, true},
		{"invalid fails", invalid(step(0, 1, 1000, 1000, 60*ms)), KneeCriteria{}, true},
		{"empty fails", StepResult{Rate: 1}, KneeCriteria{}, true},
		{"partial fails", partial(step(0, 1, 1000, 1000, 60*ms)), KneeCriteria{}, true},
	} {
		if got := c.crit.Fails(c.s, base); (got != "") != c.fail {
			t.Errorf("%s: Fails = %q, want failing %v", c.name, got, c.fail)
		}
	}
}

// TestKneeP99Floor: a loopback service's 200 µs p99 is taken as 1 ms, so a
// step at 2.5 ms still passes and one at 3.5 ms does not.
func TestKneeP99Floor(t *testing.T) {
	steps := []StepResult{
		step(0, 1000, 1000, 1000, 200*time.Microsecond),
		step(1, 2000, 1000, 1000, 2500*time.Microsecond),
		step(2, 3000, 1000, 1000, 3500*time.Microsecond),
	}
	k, ok := FindKnee(steps, KneeCriteria{})
	if !ok || k.Rate != 2000 || k.BaseP99 != ms {
		t.Errorf("knee %v base %v ok %v; want 2000, 1ms, true", k.Rate, k.BaseP99, ok)
	}
	k, _ = FindKnee(steps, KneeCriteria{P99Floor: 100 * time.Microsecond})
	if k.Rate != 1000 || k.BaseP99 != 200*time.Microsecond {
		t.Errorf("floor 100µs: knee %v base %v; want 1000, 200µs", k.Rate, k.BaseP99)
	}
}

// capacity217 passes every rate up to 217 req/s.
func capacity217(invalidAbove float64, calls *[]float64) Probe {
	return func(ctx context.Context, rate float64, _ string) (StepResult, error) {
		*calls = append(*calls, rate)
		s := step(len(*calls), rate, 1000, 1000, 50*ms)
		if rate > 217 {
			s = step(len(*calls), rate, 1000, 700, 800*ms)
		}
		if invalidAbove > 0 && rate > invalidAbove {
			s = invalid(s)
		}
		return s, nil
	}
}

func TestBisect(t *testing.T) {
	var calls []float64
	k, err := Bisect(context.Background(), 200, 250, 50*ms, KneeCriteria{}, 0, capacity217(0, &calls))
	if err != nil {
		t.Fatal(err)
	}
	// 225 fails twice (measured again to confirm), 212.5 passes, 218.75
	// fails twice; (218.75 − 212.5) / 212.5 ≤ 5%.
	if want := []float64{225, 225, 212.5, 218.75, 218.75}; !slices.Equal(calls, want) {
		t.Errorf("probed %v, want %v", calls, want)
	}
	if k.Rate != 212.5 || k.Fail != 218.75 || k.Safe != 0.9*212.5 || len(k.Probes) != 3 || len(k.Confirmations) != 2 || k.Bounded {
		t.Errorf("knee %+v", k)
	}
	// Without confirmation each rate is probed once.
	calls = nil
	k, err = Bisect(context.Background(), 200, 250, 50*ms, KneeCriteria{NoConfirm: true}, 0, capacity217(0, &calls))
	if want := []float64{225, 212.5, 218.75}; err != nil || !slices.Equal(calls, want) || k.Rate != 212.5 || len(k.Confirmations) != 0 {
		t.Errorf("no confirm: probed %v (err %v), knee %v with %d confirmations; want %v, 212.5, none", calls, err, k.Rate, len(k.Confirmations), want)
	}
}

func TestBisectInvalidCountsAsFailing(t *testing.T) {
	var calls []float64
	k, err := Bisect(context.Background(), 200, 250, 50*ms, KneeCriteria{}, 0, capacity217(210, &calls))
	if err != nil {
		t.Fatal(err)
	}
	// 225 fails, 212.5 invalid, 206.25 passes; (212.5 − 206.25) / 206.25 ≤ 5%.
	if k.Rate != 206.25 || k.Fail != 212.5 {
		t.Errorf("knee %v fail %v, want 206.25 and 212.5 (probed %v)", k.Rate, k.Fail, calls)
	}
}

func TestBisectBoundedProbes(t *testing.T) {
	var calls []float64
	k, err := Bisect(context.Background(), 200, 250, 50*ms, KneeCriteria{NoConfirm: true}, 1e-15, capacity217(0, &calls))
	if err != nil || len(calls) != maxBisections {
		t.Errorf("%d probes (err %v), want %d", len(calls), err, maxBisections)
	}
	if k.Rate > 217 || k.Fail <= 217 || k.Fail-k.Rate > 0.001 {
		t.Errorf("knee %v fail %v do not bracket 217", k.Rate, k.Fail)
	}
	// With confirmation: 20 new rates, and each that failed once more.
	calls = nil
	k, err = Bisect(context.Background(), 200, 250, 50*ms, KneeCriteria{}, 1e-15, capacity217(0, &calls))
	fails := 0
	for _, s := range k.Probes {
		if s.Rate > 217 {
			fails++
		}
	}
	if err != nil || len(k.Probes) != maxBisections || fails == 0 || len(k.Confirmations) != fails || len(calls) != maxBisections+fails {
		t.Errorf("%d calls, %d probes, %d failing, %d confirmations (err %v); want %d probes and a confirmation per failing one",
			len(calls), len(k.Probes), fails, len(k.Confirmations), err, maxBisections)
	}
}

func TestBisectErrors(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	failing := func(ctx context.Context, rate float64, _ string) (StepResult, error) {
		if n++; n == 2 {
			return StepResult{}, boom
		}
		return step(n, rate, 1000, 1000, 50*ms), nil
	}
	k, err := Bisect(context.Background(), 100, 200, 50*ms, KneeCriteria{}, 0, failing)
	if !errors.Is(err, boom) || k.Rate != 150 || k.Fail != 200 || len(k.Probes) != 1 {
		t.Errorf("probe error: knee %v fail %v probes %d err %v; want 150, 200, 1, boom", k.Rate, k.Fail, len(k.Probes), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Bisect(ctx, 100, 200, 50*ms, KneeCriteria{}, 0, failing); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	for _, lohi := range [][2]float64{{0, 100}, {100, 100}, {200, 100}, {-1, 5}} {
		if _, err := Bisect(context.Background(), lohi[0], lohi[1], 50*ms, KneeCriteria{}, 0, failing); err == nil {
			t.Errorf("lo %v hi %v: no error", lohi[0], lohi[1])
		}
	}
	if _, err := Bisect(context.Background(), 100, 200, 50*ms, KneeCriteria{}, 0, nil); err == nil {
		t.Error("nil probe: no error")
	}
}
