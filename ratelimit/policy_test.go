package ratelimit

import "testing"

// The RateLimit-Policy mapping, every expected pair worked out by hand: q is
// the smallest multiple of the rate's lowest terms a/b (per second) that
// holds the capacity, w the same multiple of b.
func TestSpecPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Spec
		q, w int64
	}{
		// 1/20 a second, capacity 3: 3 × (1/20).
		{"gcra 3 per minute", Spec{Rate: 3, Per: 60}, 3, 60},
		// 5/3 a second, capacity 20: 4 × (5/3) — 20 in 12 s is 100 a minute.
		{"gcra 100/min burst 20", Spec{Rate: 100, Per: 60, Burst: 20}, 20, 12},
		{"gcra 100/min default burst", Spec{Rate: 100, Per: 60}, 100, 60},
		// The case: 2/s with burst 4 said q=2;w=1 next to r=3.
		{"token bucket 2/s burst 4", Spec{Algorithm: AlgTokenBucket, Rate: 2, Per: 1, Burst: 4}, 4, 2},
		{"token bucket 2/s burst 5", Spec{Algorithm: AlgTokenBucket, Rate: 2, Per: 1, Burst: 5}, 6, 3},
		// The case: a period of 1.5 s said w=2 (and q=1: 0.5/s).
		{"gcra 1 per 1.5 s", Spec{Rate: 1, Per: 1.5}, 2, 3},
		{"gcra 3 per 1.5 s", Spec{Rate: 3, Per: 1.5}, 4, 2},
		// The case: q was capped at 2³¹−1; 2e8/3 a second, capacity 4e9: 20 × (2e8/3).
		{"gcra 4e9 per minute", Spec{Rate: 4e9, Per: 60}, 4_000_000_000, 60},
		{"gcra 4e9 per minute burst 1", Spec{Rate: 4e9, Per: 60, Burst: 1}, 200_000_000, 3},
		{"gcra 2.5/s", Spec{Rate: 2.5, Per: 1}, 5, 2}, // burst ⌈2.5⌉ = 3 ≤ 5
		{"gcra 0.5/s", Spec{Rate: 0.5, Per: 1}, 1, 2},
		{"gcra 0.1/s", Spec{Rate: 0.1, Per: 1}, 1, 10}, // the decimal 0.1, not the binary fraction
		{"gcra 1 per 100 ms", Spec{Rate: 1, Per: 0.1}, 10, 1},
		{"leaky meter 10 per 0.5 s", Spec{Algorithm: AlgLeakyMeter, Rate: 10, Per: 0.5}, 20, 1},
		{"leaky queue 5 per 2.5 s queue 10", Spec{Algorithm: AlgLeakyQueue, Rate: 5, Per: 2.5, Burst: 10}, 10, 5},
		// Windows: capacity = Rate, so a whole Per gives the rule as written.
		{"fixed window 3 per 10 min", Spec{Algorithm: AlgFixedWindow, Rate: 3, Per: 600}, 3, 600},
		{"sliding log 10 per 15 min", Spec{Algorithm: AlgSlidingLog, Rate: 10, Per: 900}, 10, 900},
		{"sliding counter 1000 per day", Spec{Algorithm: AlgSlidingCounter, Rate: 1000, Per: 86400}, 1000, 86400},
		{"sliding counter 7 per 1.5 s", Spec{Algorithm: AlgSlidingCounter, Rate: 7, Per: 1.5}, 14, 3},
		// Tiny: one per 10¹⁵ − 1 s fits; one per 10¹⁵ s does not (w would need 16 digits).
		{"one per 999999999999999 s", Spec{Rate: 1, Per: 999_999_999_999_999}, 1, 999_999_999_999_999},
		{"one per 1e15 s", Spec{Rate: 1, Per: 1e15}, 1, 0},
		// Huge: 10¹⁵ a second does not fit q; the largest q over one second is below it.
		{"1e15 per second burst 1", Spec{Rate: 1e15, Per: 1, Burst: 1}, 999_999_999_999_999, 1},
		// Inexact: 3333333333333333/10¹⁶ needs 16 digits. w = 10¹⁵−1 and
		// q = ⌊(10¹⁵−1) × 0.3333333333333333⌋ = ⌊333333333333332.9666…⌋.
		{"0.3333333333333333/s", Spec{Rate: 0.3333333333333333, Per: 1, Burst: 1}, 333_333_333_333_332, 999_999_999_999_999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if q, w := tc.s.Policy(); q != tc.q || w != tc.w {
				t.Errorf("Policy() = q=%d;w=%d, want q=%d;w=%d", q, w, tc.q, tc.w)
			}
		})
	}
}
