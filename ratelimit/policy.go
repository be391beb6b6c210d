package ratelimit

import (
	"math"
	"math/big"
	"strconv"
)

// MaxPolicyInt is the largest integer a structured field carries (RFC 9651,
// section 3.3.1: at most 15 decimal digits), and so the largest q, w and r
// of the RateLimit fields.
const MaxPolicyInt = 999_999_999_999_999

// Policy returns the quota q and window w (whole seconds) that the IETF
// RateLimit-Policy field advertises for s ("q=100;w=60"), from s's rate as
// written (Rate units per Per seconds, read as the decimals they print as)
// and its capacity: Burst for the bucket algorithms (⌈Rate⌉ when 0), Rate
// for the window algorithms. The mapping:
//
//   - q is at least the capacity, so the remaining units a decision reports
//     (r, never more than the capacity) never exceed q;
//   - q ÷ w is never more than the rule's rate (the strict side);
//   - among such pairs, q ÷ w equals the rate when integers of at most 15
//     digits can say it, with the smallest such q (the multiple of the rate's
//     lowest terms nearest the capacity); otherwise it is the closest ratio
//     below the rate that fits in 15 digits;
//   - w is 0 when no window of at most MaxPolicyInt seconds holds a whole
//     capacity at the rule's rate (less than one unit per ~31.7 million
//     years): the field then states the quota q alone and claims no rate.
//
// Examples: 3 per minute (burst 3) is q=3;w=60; 100 per minute with burst 20
// is q=20;w=12 (20 in 12 s is 100 a minute); 2 per second with burst 4 is
// q=4;w=2; 1 per 1.5 s is q=2;w=3; 4e9 per minute is q=4000000000;w=60.
// Window algorithms written with a whole Per get q=Rate;w=Per.
func (s Spec) Policy() (q, w int64) {
	d := s.withDefaults()
	capacity := int64(min(d.Rate, MaxBurst))
	if d.Algorithm.Bucket() {
		capacity = int64(d.Burst)
	}
	return policyQW(d.Rate, d.Per, max(capacity, 1))
}

// policyQW returns q ≥ capacity and w with q/w ≤ rate/per, as described at
// Spec.Policy. Not for the hot path: it runs once per rule.
func policyQW(rate, per float64, capacity int64) (q, w int64) {
	rho, ok := decimalRatio(rate, per)
	if !ok {
		return capacity, 0
	}
	maxInt := new(big.Int).SetInt64(MaxPolicyInt)
	capInt := big.NewInt(capacity)
	a, b := rho.Num(), rho.Denom()
	// Exact: (k·a, k·b) with the smallest k making k·a ≥ capacity.
	k := new(big.Int).Add(capInt, new(big.Int).Sub(a, big.NewInt(1)))
	k.Quo(k, a)
	if k.Sign() == 0 {
		k.SetInt64(1)
	}
	qe, we := new(big.Int).Mul(k, a), new(big.Int).Mul(k, b)
	if qe.Cmp(maxInt) <= 0 && we.Cmp(maxInt) <= 0 {
		return qe.Int64(), we.Int64()
	}
	// Inexact: the largest window whose floor(rate·w) fits, q = floor(rate·w).
	if new(big.Int).Quo(a, b).Cmp(maxInt) >= 0 { // at least MaxPolicyInt a second
		return MaxPolicyInt, 1
	}
	wb := new(big.Int).Quo(new(big.Int).Mul(maxInt, b), a) // floor(N/ρ)
	if wb.Cmp(maxInt) > 0 {
		wb.Set(maxInt)
	}
	qb := new(big.Int).Quo(new(big.Int).Mul(wb, a), b) // floor(ρ·w)
	if qb.Cmp(capInt) < 0 {
		return capacity, 0 // no window of at most MaxPolicyInt seconds holds the capacity
	}
	return qb.Int64(), wb.Int64()
}

// decimalRatio returns rate/per as an exact fraction of the decimals the two
// float64s print as (0.1 is 1/10, not the binary fraction nearest it).
func decimalRatio(rate, per float64) (*big.Rat, bool) {
	if !(rate > 0) || !(per > 0) || math.IsInf(rate, 0) || math.IsInf(per, 0) {
		return nil, false
	}
	r, ok1 := new(big.Rat).SetString(strconv.FormatFloat(rate, 'g', -1, 64))
	p, ok2 := new(big.Rat).SetString(strconv.FormatFloat(per, 'g', -1, 64))
	if !ok1 || !ok2 {
		return nil, false
	}
	return r.Quo(r, p), true
}
