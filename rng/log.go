package rng

import "math"

// Log returns the natural logarithm of x, computed with the algorithm of
// fdlibm's e_log.c (Sun Microsystems, 1993), which V8 and other JavaScript
// engines use for Math.log. Go's math.Log is accurate too but rounds a
// different last bit for some inputs; the simulator needs the JavaScript
// bits to reproduce the reference outputs exactly.
//
// Method: write x = 2^k × (1 + f) with √2/2 < 1 + f < √2, then
// log(1 + f) = 2s + 2s³/3 + … with s = f / (2 + f), the series evaluated by
// a minimax polynomial in s², and k × ln 2 split into a high and a low part.
// Every product is wrapped in float64() so no compiler fuses a multiply-add,
// which would change the last bit on some architectures.
func Log(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
		ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
		two54 = 1.80143985094819840000e+16 // 2^54
		lg1   = 6.666666666666735130e-01   // 0x3FE5555555555593
		lg2   = 3.999999999940941908e-01   // 0x3FD999999997FA04
		lg3   = 2.857142874366239149e-01   // 0x3FD2492494229359
		lg4   = 2.222219843214978396e-01   // 0x3FCC71C51D8E78AF
		lg5   = 1.818357216161805012e-01   // 0x3FC7466496CB03DE
		lg6   = 1.531383769920937332e-01   // 0x3FC39A09D078C69F
		lg7   = 1.479819860511658591e-01   // 0x3FC2F112DF3E5244
	)
	bits := math.Float64bits(x)
	hx := int32(bits >> 32)
	lx := uint32(bits)
	k := int32(0)
	if hx < 0x00100000 { // x < 2^-1022: zero, negative or subnormal
		switch {
		case hx&0x7fffffff == 0 && lx == 0:
			return math.Inf(-1)
		case hx < 0:
			return math.NaN()
		}
		k -= 54
		x *= two54
		hx = int32(math.Float64bits(x) >> 32)
	}
	if hx >= 0x7ff00000 { // +Inf or NaN
		return x + x
	}
	k += hx>>20 - 1023
	hx &= 0x000fffff
	i := (hx + 0x95f64) & 0x100000
	// Normalise x (or x/2) into [√2/2, √2) by setting its exponent.
	x = math.Float64frombits(uint64(uint32(hx|(i^0x3ff00000)))<<32 | uint64(math.Float64bits(x)&0xffffffff))
	k += i >> 20
	f := x - 1.0
	dk := float64(k)
	if 0x000fffff&(2+hx) < 3 { // |f| < 2^-20
		if f == 0 {
			if k == 0 {
				return 0
			}
			return float64(dk*ln2Hi) + float64(dk*ln2Lo)
		}
		r := float64(float64(f*f) * (0.5 - float64(0.33333333333333333*f)))
		if k == 0 {
			return f - r
		}
		return float64(dk*ln2Hi) - ((r - float64(dk*ln2Lo)) - f)
	}
	s := f / (2.0 + f)
	z := float64(s * s)
	i = hx - 0x6147a
	w := float64(z * z)
	j := 0x6b851 - hx
	t1 := float64(w * (lg2 + float64(w*(lg4+float64(w*lg6)))))
	t2 := float64(z * (lg1 + float64(w*(lg3+float64(w*(lg5+float64(w*lg7)))))))
	i |= j
	r := t2 + t1
	if i > 0 {
		hfsq := float64(float64(0.5*f) * f)
		if k == 0 {
			return f - (hfsq - float64(s*(hfsq+r)))
		}
		return float64(dk*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(dk*ln2Lo))) - f)
	}
	if k == 0 {
		return f - float64(s*(f-r))
	}
	return float64(dk*ln2Hi) - ((float64(s*(f-r)) - float64(dk*ln2Lo)) - f)
}
