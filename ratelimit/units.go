package ratelimit

import (
	"math/big"
	"math/bits"
)

// Bucket units. The four bucket algorithms (GCRA, token bucket, leaky meter
// and leaky queue) count in integers on a lattice chosen from the rate:
//
//   - the time unit is 1/m ns (m from 1 to maxLatticeM), or 2^shift ns for
//     a bucket that takes longer than about 73 years (2^61 ns) to fill;
//   - the emission interval T = 1/Rate is a whole number of time units;
//   - a token is worth interval units of credit, and a bucket refills one
//     unit of credit per time unit.
//
// Rate is read as the simplest fraction p/q that rounds to it (the first
// convergent of its continued fraction that does): 100.0/60 is 5/3, 7/1.5 is
// 14/3, 0.1 is 1/10. With g = gcd(p, 10^9), m = p/g and the interval
// q·10^9/g, T is exactly interval/m nanoseconds, and on whole nanoseconds
// every decision is exact. That holds when m ≤ maxLatticeM — p with its
// factors 2 and 5 (up to 10^9) removed is at most 1024: every whole rate up
// to 1024 per second and every count per period such as 100/min, 7 per
// 1.5 s or 1000/h — and when Burst × interval ≤ maxUnits. Any other rate
// gets m = 1024 (or a smaller power of two, to fit) and the interval rounded
// up: what it enforces is at most 2^-10 ns per unit slower than Rate, never
// faster. A bucket too slow even for m = 1 (Burst/Rate beyond 2^61 ns)
// counts time in units of 2^shift ns, the interval rounded up, and an
// interval longer than the whole timeline (maxNanos) cut to just beyond it:
// a unit spent then never comes back, which is what the exact rate does
// within the timeline.
const (
	maxLatticeM = 1024
	// maxUnits bounds Burst × interval, so that sums of a bucket's units
	// never overflow 63 bits.
	maxUnits = 1 << 61
)

// lattice is a bucket configuration's integer form. Immutable.
type lattice struct {
	m        uint64  // time units per nanosecond (1 when shift > 0)
	shift    uint    // a time unit is 2^shift ns (0 when m > 1)
	interval uint64  // time units per token: the emission interval
	perSec   float64 // time units per second: converts units to seconds
}

// newLattice returns the lattice of a bucket of rate units per second
// holding burst units (a Limit that validate accepted).
func newLattice(rate float64, burst int) lattice {
	r := rateFraction(rate)
	g := new(big.Int).GCD(nil, nil, r.Num(), big.NewInt(nanosPerSecond))
	m := new(big.Int).Quo(r.Num(), g)
	if m.IsUint64() && m.Uint64() <= maxLatticeM {
		iv := new(big.Int).Quo(big.NewInt(nanosPerSecond), g)
		iv.Mul(iv, r.Denom())
		if iv.IsUint64() && fitsUnits(iv.Uint64(), burst) {
			return makeLattice(m.Uint64(), 0, iv.Uint64())
		}
	}
	for m := uint64(maxLatticeM); m >= 1; m /= 2 {
		if iv, ok := intervalUnits(m, 0, r); ok && fitsUnits(iv, burst) {
			return makeLattice(m, 0, iv)
		}
	}
	for shift := uint(1); ; shift++ { // ends by shift 62: an interval of at most 3 units
		if iv, ok := intervalUnits(1, shift, r); ok && fitsUnits(iv, burst) {
			return makeLattice(1, shift, iv)
		}
	}
}

func makeLattice(m uint64, shift uint, interval uint64) lattice {
	return lattice{m: m, shift: shift, interval: interval, perSec: float64(m) * nanosPerSecond / float64(uint64(1)<<shift)}
}

// units is the instant ns in time units (modulo 2^64 when m > 1).
func (l *lattice) units(ns int64) uint64 { return (uint64(ns) * l.m) >> l.shift }

// instant is the first nanosecond at which the time in units reaches
// nowU + lead, where nowU = l.units(nowNs); maxNanos+1 if beyond the
// timeline.
func (l *lattice) instant(nowNs int64, nowU, lead uint64) int64 {
	if l.shift == 0 {
		return laterBy(nowNs, ceilDiv(lead, l.m))
	}
	if u := nowU + lead; u <= maxNanos>>l.shift {
		return int64(u << l.shift)
	}
	return maxNanos + 1
}

// derive validates lim and returns its emission interval in l's time
// units: exact when that interval is a whole number of l's units, else
// rounded up (slower, never faster).
func (l lattice) derive(lim Limit) (uint64, error) {
	if err := lim.validate(); err != nil {
		return 0, err
	}
	iv, ok := intervalUnits(l.m, l.shift, rateFraction(lim.Rate))
	if !ok || !fitsUnits(iv, lim.Burst) {
		return 0, errorfInvalid("Burst/Rate is too long for the configuration's units (Rate %v, Burst %d)", lim.Rate, lim.Burst)
	}
	return iv, nil
}

// bucketUnits is the integer form that TokenBucket and LeakyMeter share:
// Burst tokens of k credit units each, moved by a flow (the refill, or the
// leak). Immutable.
type bucketUnits struct {
	rate  float64
	burst int
	k     uint64  // credit units per token
	cap   uint64  // Burst·k
	inv   float64 // 1/k
	flow  flow
	lat   lattice
}

// newBucketUnits validates l and returns its units on its own lattice.
func newBucketUnits(l Limit) (bucketUnits, error) {
	if err := l.validate(); err != nil {
		return bucketUnits{}, err
	}
	lat := newLattice(l.Rate, l.Burst)
	u := bucketUnits{rate: l.Rate, burst: l.Burst, k: lat.interval, inv: 1 / float64(lat.interval), lat: lat}
	u.cap = uint64(l.Burst) * u.k
	u.flow = baseFlow(lat, u.cap)
	return u, nil
}

// withLimit validates l and returns its units on u's credit units: a token
// is still k units, and the flow is l.Rate in them (see
// TokenBucket.WithLimit).
func (u bucketUnits) withLimit(l Limit) (bucketUnits, error) {
	if err := l.validate(); err != nil {
		return bucketUnits{}, err
	}
	if !fitsUnits(u.k, l.Burst) {
		return bucketUnits{}, errorfInvalid("Burst %d is too large for the configuration's units", l.Burst)
	}
	c := bucketUnits{rate: l.Rate, burst: l.Burst, k: u.k, inv: u.inv, lat: u.lat, cap: uint64(l.Burst) * u.k}
	c.flow = newFlow(c.k, l.Rate, c.cap)
	return c, nil
}

// fitsUnits reports whether burst tokens of interval units fit maxUnits.
func fitsUnits(interval uint64, burst int) bool {
	hi, lo := bits.Mul64(interval, uint64(burst))
	return hi == 0 && lo <= maxUnits
}

// intervalUnits is ⌈10^9·m/(r·2^shift)⌉ (at least 1): 1/r seconds in time
// units of 2^shift/m ns. With shift > 0 an interval longer than the
// timeline is cut to (maxNanos >> shift) + 2 units. ok is false when the
// interval is above maxUnits.
func intervalUnits(m uint64, shift uint, r *big.Rat) (iv uint64, ok bool) {
	num := new(big.Int).SetUint64(m * nanosPerSecond)
	num.Mul(num, r.Denom())
	den := new(big.Int).Lsh(r.Num(), shift)
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if rem.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if beyond := new(big.Int).SetUint64(maxNanos>>shift + 2); shift > 0 && q.Cmp(beyond) > 0 {
		q = beyond
	}
	if !q.IsUint64() || q.Uint64() > maxUnits {
		return 0, false
	}
	return max(q.Uint64(), 1), true
}

// rateFraction returns rate (positive, finite) as a fraction: the simplest
// one that rounds to it, or else its exact binary value.
func rateFraction(rate float64) *big.Rat {
	if p, q, ok := simplestFraction(rate); ok {
		return new(big.Rat).SetFrac(new(big.Int).SetUint64(p), new(big.Int).SetUint64(q))
	}
	return new(big.Rat).SetFloat64(rate)
}

// simplestFraction returns the first convergent p/q of x's continued
// fraction (x > 0, finite) for which float64(p)/float64(q) == x, with p
// and q below 2^53 (so that the float64 division is the correct rounding
// of p/q); false if there is none. A fraction with a small denominator
// that rounds to x is such a convergent (Legendre: |x − p/q| < 1/(2q²)).
func simplestFraction(x float64) (p, q uint64, ok bool) {
	const limit = 1 << 53
	exact := new(big.Rat).SetFloat64(x)
	num, den := new(big.Int).Set(exact.Num()), new(big.Int).Set(exact.Denom())
	h0, h1 := big.NewInt(0), big.NewInt(1) // convergents' numerators h(n−2), h(n−1)
	k0, k1 := big.NewInt(1), big.NewInt(0) // and denominators
	a, rem := new(big.Int), new(big.Int)
	for den.Sign() != 0 {
		a.QuoRem(num, den, rem)
		h0.Add(h0, new(big.Int).Mul(a, h1))
		k0.Add(k0, new(big.Int).Mul(a, k1))
		h0, h1 = h1, h0
		k0, k1 = k1, k0
		if !h1.IsUint64() || !k1.IsUint64() || h1.Uint64() >= limit || k1.Uint64() >= limit {
			return 0, 0, false
		}
		if p, q := h1.Uint64(), k1.Uint64(); float64(p)/float64(q) == x {
			return p, q, true
		}
		num, den, rem = den, rem, num
	}
	return 0, 0, false
}

// flow is a refill (token bucket) or drain (leaky meter) rate, in credit
// units: num/den units per nanosecond, whole units per decision (rounded
// down: a bucket never refills faster than its rate); or, with shift > 0,
// one unit per 2^shift ns of the timeline. Immutable.
type flow struct {
	num, den uint64
	shift    uint
	cap      uint64  // the bucket's units
	fillNs   int64   // ⌈cap·den/num⌉: the time to move a whole bucket, at most maxNanos
	perSec   float64 // units per second: converts units to seconds
}

// baseFlow is the flow of a lattice's own rate: one unit per time unit.
func baseFlow(l lattice, cap uint64) flow {
	return makeFlow(l.m, 1, l.shift, cap)
}

// newFlow returns the flow of k·rate/10^9 units per nanosecond (k credit
// units per token) for a bucket of cap units, exact if that fraction fits
// 64 bits, else rounded down.
func newFlow(k uint64, rate float64, cap uint64) flow {
	r := rateFraction(rate)
	num := new(big.Int).Mul(new(big.Int).SetUint64(k), r.Num())
	den := new(big.Int).Mul(big.NewInt(nanosPerSecond), r.Denom())
	g := new(big.Int).GCD(nil, nil, num, den)
	num.Quo(num, g)
	den.Quo(den, g)
	if !num.IsUint64() || !den.IsUint64() {
		const frac = 32 // bits of the rounded fraction
		num.Lsh(num, frac)
		num.Quo(num, den)
		den.SetUint64(1 << frac)
		for num.BitLen() > 62 && den.Uint64() > 1 {
			num.Rsh(num, 1)
			den.Rsh(den, 1)
		}
		if num.BitLen() > 62 {
			num.SetUint64(1 << 62)
		}
	}
	return makeFlow(num.Uint64(), den.Uint64(), 0, cap)
}

func makeFlow(num, den uint64, shift uint, cap uint64) flow {
	f := flow{num: num, den: den, shift: shift, cap: cap}
	f.perSec = float64(num) * nanosPerSecond / float64(den) / float64(uint64(1)<<shift)
	f.fillNs = f.nanos(cap)
	return f
}

// gain is the units the flow moves from last to ns (last < ns), at most
// upTo: the cap, or more for a leaky meter's level above it (a state
// written under a larger configuration).
func (f *flow) gain(last, ns int64, upTo uint64) uint64 {
	if f.shift != 0 {
		return min(uint64(ns>>f.shift-last>>f.shift), upTo)
	}
	e := ns - last
	fill := f.fillNs
	if upTo != f.cap {
		fill = f.nanos(upTo)
	}
	if e >= fill {
		return upTo
	}
	if f.den == 1 {
		return uint64(e) * f.num
	}
	hi, lo := bits.Mul64(uint64(e), f.num)
	q, _ := bits.Div64(hi, lo, f.den)
	return q
}

// at is the first instant (ns) at which the flow has moved u ≤ cap units
// since last; maxNanos+1 if beyond the timeline.
func (f *flow) at(last int64, u uint64) int64 {
	if f.shift == 0 {
		return laterBy(last, f.nanos(u))
	}
	if w := uint64(last>>f.shift) + u; w <= maxNanos>>f.shift {
		return int64(w << f.shift)
	}
	return maxNanos + 1
}

// nanos is ⌈u·den/num⌉, the nanoseconds the flow takes to move u units,
// at most maxNanos+1 (beyond the timeline: never).
func (f *flow) nanos(u uint64) int64 {
	if f.den == 1 && f.num == 1 { // a lattice's own flow at m = 1
		return int64(min(u, maxNanos+1))
	}
	hi, lo := bits.Mul64(u, f.den)
	if hi >= f.num { // also num = 0: nothing ever flows
		return maxNanos + 1
	}
	q, rem := bits.Div64(hi, lo, f.num)
	if rem != 0 {
		q++
	}
	return int64(min(q, maxNanos+1))
}

// floorDiv is ⌊x/d⌋ for d ≥ 1 and a quotient below 2^50, given inv = 1/d:
// a float64 estimate corrected by one step, cheaper than a 64-bit division.
func floorDiv(x, d uint64, inv float64) uint64 {
	q := uint64(float64(x) * inv)
	if q*d > x {
		q--
	} else if x-q*d >= d {
		q++
	}
	return q
}
