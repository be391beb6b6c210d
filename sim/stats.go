package sim

import "math"

// NearestRank returns the p-quantile (0 < p ≤ 1) of sorted values by the
// nearest-rank method the reference scripts use: sorted[ceil(p·n) − 1].
// It returns 0 for an empty slice.
func NearestRank(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

// Sum returns the sum of xs, added left to right.
func Sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}
