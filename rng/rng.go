// Package rng provides the seeded, repeatable random source the simulator
// uses to replay the seed experiments bit for bit: a port of the mulberry32
// generator and of the fdlibm natural logarithm that JavaScript engines use
// for Math.log, so exponential draws match the reference scripts exactly.
//
// Production code does not need this package; policies that use randomness
// (such as the power-of-two-choices picker) take their source as a parameter,
// and the simulator passes a *Mulberry32.
package rng

// Mulberry32 is Tommy Ettinger's mulberry32 generator: 32 bits of state, one
// multiply-xorshift round per draw. It is not safe for concurrent use.
// The zero value is a generator with seed 0.
type Mulberry32 struct {
	state uint32
}

// New returns a generator seeded like the reference scripts' rng(seed).
func New(seed uint32) *Mulberry32 { return &Mulberry32{state: seed} }

// Uint32 returns the next 32 random bits.
func (m *Mulberry32) Uint32() uint32 {
	m.state += 0x6D2B79F5
	s := m.state
	t := (s ^ (s >> 15)) * (1 | s)
	t = (t + (t^(t>>7))*(61|t)) ^ t
	return t ^ (t >> 14)
}

// Float64 returns a number in [0, 1): the next 32 bits divided by 2^32,
// as the reference scripts do.
func (m *Mulberry32) Float64() float64 {
	return float64(m.Uint32()) / 4294967296
}

// Exp draws an exponentially distributed value with the given mean, as
// -ln(1 - u) × mean with u from Float64 (the reference scripts' form).
func (m *Mulberry32) Exp(mean float64) float64 {
	return float64(-Log(1-m.Float64()) * mean)
}
