package redisstore

import (
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The scripts count in integers, which Lua's doubles hold exactly below
// 2^53: instants in microseconds (Redis TIME, µs since 1970: exact until
// the year 2255), and the bucket algorithms' durations in ticks of 1/D µs,
// where D is chosen per rule so that the emission interval (Per/Rate) is a
// whole number N of ticks: N/D = 100,000 for 10 per second, 1,000,000/3 for
// 3 per second, 1,500,000/7 for 7 per 1.5 s. So a
// decision is the exact-arithmetic one on the microsecond grid: a request
// every 0.1 s against 10/s with a burst of 1 always passes. D is the
// smallest denominator that makes Per (rounded to the µs) and Rate (up to 9
// decimals) exact, times 2^10 (or less, to fit) so that a scaled rate's
// interval (rounded up to the tick) is within about a ns of the exact one;
// a rule whose exact N·Burst would reach 2^52 (or whose
// Rate is not a short decimal) gets the finest power-of-two D below that,
// the interval rounded up to the tick (never faster than the rule). A
// bucket slower than that (Burst/Rate beyond 142 years) counts whole µs.
// Window algorithms count in µs (D = 1, the window Per·10^6 rounded).
const maxTicks = 1 << 52

// params is one scale's parameters of a rule for the scripts: the
// algorithm, D and four numbers whose meaning depends on the algorithm
// (see scripts.go). Immutable.
type params struct {
	alg   ratelimit.Algorithm
	d     int64     // ticks per µs
	x     [4]string // x1..x4
	args  [6]any    // alg, D, x1..x4, boxed once: a pipeline appends them without allocating
	perS  float64   // ticks per second: D·10^6
	scale float64   // the scale they enforce (1: the rule's own)
	units bool      // the algorithm's script loops once per unit (leaky queue, sliding log)
}

// ruleTicks is a rule's own (scale 1) time base.
type ruleTicks struct {
	d, n int64 // ticks per µs, ticks per unit (bucket algorithms)
	w    int64 // window in µs (window algorithms)
}

// newRuleTicks returns the time base of spec (validated, defaults filled
// in), or an error wrapping ratelimit.ErrInvalidLimit when the scripts
// cannot hold it in exact integers.
func newRuleTicks(spec ratelimit.Spec) (ruleTicks, error) {
	if !spec.Algorithm.Bucket() {
		w := math.Round(spec.Per * 1e6)
		if !(w >= 1) || w >= maxTicks {
			return ruleTicks{}, fmt.Errorf("%w: Per must be from 1 µs to %v s on Redis, got %v", ratelimit.ErrInvalidLimit, float64(maxTicks)/1e6, spec.Per)
		}
		return ruleTicks{d: 1, w: int64(w)}, nil
	}
	burst := int64(spec.Limit().Burst)
	if d, n, ok := exactInterval(spec.Rate, spec.Per); ok && n <= (maxTicks-1)/burst {
		// Finer ticks, while they fit, for the scaled rates (rounded to
		// the tick): 2^10 more make a tick of at most about 1 ns.
		for k := 0; k < 10 && 2*n <= (maxTicks-1)/burst && 2*d < 1<<31; k++ {
			d, n = 2*d, 2*n
		}
		return ruleTicks{d: d, n: n}, nil
	}
	us := spec.Per * 1e6 / spec.Rate // the interval in µs
	for d := int64(1) << 30; d > 1; d >>= 1 {
		if n := math.Ceil(us * float64(d)); n*float64(burst) < maxTicks {
			return ruleTicks{d: d, n: int64(n)}, nil
		}
	}
	// A bucket that takes more than 142 years to fill: whole µs, exact
	// while the numbers stay below 2^53, within a few µs beyond.
	return ruleTicks{d: 1, n: int64(min(max(math.Ceil(us), 1), 1<<62))}, nil
}

// exactInterval returns D and N with Per/Rate = N/D µs exactly, when Per is
// a whole number of µs and Rate a decimal of at most 9 digits after the
// point, with D below 2^31.
func exactInterval(rate, per float64) (d, n int64, ok bool) {
	pus := math.Round(per * 1e6)
	if !(pus >= 1) || math.Abs(per*1e6-pus) > 1e-6*pus || pus > 1e15 {
		return 0, 0, false
	}
	for k, p10 := 0, 1.0; k <= 9; k, p10 = k+1, p10*10 {
		r := math.Round(rate * p10)
		if r < 1 || math.Abs(rate*p10-r) > 1e-9*r {
			continue
		}
		num := new(big.Int).Mul(big.NewInt(int64(pus)), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil))
		den, _ := new(big.Float).SetFloat64(r).Int(nil)
		g := new(big.Int).GCD(nil, nil, num, den)
		num.Quo(num, g)
		den.Quo(den, g)
		if !num.IsInt64() || num.Int64() >= maxTicks || !den.IsInt64() || den.Int64() >= 1<<31 {
			return 0, 0, false
		}
		return den.Int64(), num.Int64(), true
	}
	return 0, 0, false
}

// newParams returns the parameters of spec (validated, defaults filled in,
// time base tk) at scale f, or nil when nothing can pass at that scale (the
// class is closed). The scaled limit is ratelimit.ScaledSpec's, the
// in-memory store's formula; a scaled rate is carried in the rule's ticks
// (its interval rounded up to the tick, its refill down).
//
//	GCRA          x1 interval N (ticks), x2 Burst
//	token bucket  x1 the rule's interval N, x2 Burst, x3 refill ratio (scaled rate ÷ the rule's), x4 the rule's Burst
//	leaky meter   x1 the rule's interval N, x2 Burst, x3 drain ratio
//	leaky queue   x1 interval N (ticks), x2 queue size
//	windows       x1 limit, x2 window (µs)
func newParams(spec ratelimit.Spec, tk ruleTicks, f float64) *params {
	sc, ok := ratelimit.ScaledSpec(spec, f)
	if !ok {
		return nil
	}
	p := &params{alg: spec.Algorithm, d: tk.d, scale: ratelimit.ClampScale(f),
		units: spec.Algorithm == ratelimit.AlgLeakyQueue || spec.Algorithm == ratelimit.AlgSlidingLog}
	p.perS = float64(tk.d) * 1e6
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	switch spec.Algorithm {
	case ratelimit.AlgGCRA, ratelimit.AlgLeakyQueue:
		burst := int64(sc.Limit().Burst)
		n := tk.n
		if sc.Rate != spec.Rate { // rounded up: never faster than the scaled rate
			n = int64(min(math.Ceil(float64(tk.d)*1e6*sc.Per/sc.Rate), 1<<62))
		}
		p.x = [4]string{itoa(n), itoa(burst), "0", "0"}
	case ratelimit.AlgTokenBucket, ratelimit.AlgLeakyMeter:
		p.x = [4]string{itoa(tk.n), itoa(int64(sc.Limit().Burst)), luaNumber(sc.Rate / spec.Rate), itoa(int64(spec.Limit().Burst))}
	default:
		p.x = [4]string{itoa(int64(sc.Quota().Limit)), itoa(tk.w), "0", "0"}
	}
	p.args = [6]any{itoa(int64(spec.Algorithm)), itoa(tk.d), p.x[0], p.x[1], p.x[2], p.x[3]}
	return p
}

// seconds converts a script's ticks of p to seconds.
func (p *params) seconds(ticks int64) float64 { return float64(ticks) / p.perS }

// order is the key by which a batch's calls are grouped by parameters.
// A nil p (a call built by a test) counts as 1.
func (p *params) order() float64 {
	if p == nil {
		return 1
	}
	return p.scale
}

// luaNumber formats x for a script's tonumber: the shortest decimal that
// reads back exactly, with a '.' in the mantissa of an exponent form
// ("1.0e-08", not "1e-08", which the Lua of miniredis cannot read).
func luaNumber(x float64) string {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' {
			for j := 0; j < i; j++ {
				if s[j] == '.' {
					return s
				}
			}
			return s[:i] + ".0" + s[i:]
		}
	}
	return s
}
