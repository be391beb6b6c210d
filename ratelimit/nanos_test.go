package ratelimit

import (
	"math"
	"math/big"
	"testing"
)

// toNanos is the nanosecond nearest the exact value of now, at every
// magnitude up to maxNanos (checked with math/big), and k × 0.1 is k × 10^8.
func TestToNanos(t *testing.T) {
	nearest := func(x float64) int64 {
		v := new(big.Float).SetPrec(200).SetFloat64(x)
		v.Mul(v, big.NewFloat(1e9))
		v.Add(v, big.NewFloat(0.5)) // halves up, as toNanos
		n, _ := v.Int(nil)
		return n.Int64()
	}
	r := newRand(25)
	for i := range 200_000 {
		x := math.Ldexp(r.Float64(), r.IntN(62)-30) // 2^-30 s to 2^32 s
		if i%4 == 0 {
			x = 1.7e9 + r.Float64()*1e6 // Unix time, where x·10^9 rounds to 256 ns
		}
		if got, want := toNanos(x), nearest(x); got != want {
			t.Fatalf("toNanos(%v) = %d, want %d", x, got, want)
		}
	}
	for k := int64(0); k <= 100_000; k++ {
		if got := toNanos(float64(k) * 0.1); got != k*1e8 {
			t.Fatalf("toNanos(%d × 0.1) = %d, want %d", k, got, k*100_000_000)
		}
	}
	for _, c := range []struct {
		x    float64
		want int64
	}{{-1, 0}, {math.NaN(), 0}, {math.Inf(1), maxNanos}, {1e300, maxNanos}, {0.4e-9, 0}, {0.5e-9, 1}} {
		if got := toNanos(c.x); got != c.want {
			t.Errorf("toNanos(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}
