package chart

import (
	"math"
	"strconv"
)

const ticks = 5 // about this many ticks on a linear axis

// niceTicks returns about five round tick values (steps of 1, 2 or 5 times
// a power of ten) covering [lo, hi].
func niceTicks(lo, hi float64) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / ticks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var out []float64
	for i := 0; ; i++ {
		v := start + float64(i)*step
		out = append(out, v)
		if v >= hi-step*1e-9 || i > 4*ticks {
			return out
		}
	}
}

// decadeTicks returns the whole decades (log10 values) covering [lo, hi].
func decadeTicks(lo, hi float64) []float64 {
	a, z := math.Floor(lo), math.Ceil(hi)
	if z <= a {
		z = a + 1
	}
	var out []float64
	for v := a; v <= z; v++ {
		out = append(out, v)
	}
	return out
}

// tick formats a tick's label.
func tick(v float64) string {
	if a := math.Abs(v); a != 0 && (a >= 1e7 || a < 1e-4) {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	// Six significant digits hide the float noise of tick arithmetic.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}
