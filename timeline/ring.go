package timeline

import (
	"math"
	"strconv"
)

// Points is the number of samples kept: 15 minutes at one a second.
const Points = 900

// Bounds on the names tracked; see the package comment.
const (
	MaxRoutes     = 32
	MaxClusters   = 32
	MaxEndpoints  = 32
	MaxRejectKeys = 8
)

// series is one value per sample slot (slot = sample number mod Points);
// NaN: no value (the name was absent, or a rate had no previous sample).
type series [Points]float32

func newSeries() *series {
	s := new(series)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// Values are a series' points in JSON: numbers, null where there is none.
type Values []float32

// MarshalJSON writes NaN and infinities as null (JSON has no NaN).
func (v Values) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+len(v)*6)
	out = append(out, '[')
	for i, x := range v {
		if i > 0 {
			out = append(out, ',')
		}
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			out = append(out, "null"...)
		} else {
			out = strconv.AppendFloat(out, f, 'g', 5, 32)
		}
	}
	return append(out, ']'), nil
}

// window copies the slots of samples from..to-1 (sample numbers, at most
// Points apart) out of s.
func (s *series) window(from, to uint64) Values {
	out := make(Values, 0, to-from)
	for n := from; n < to; n++ {
		out = append(out, s[n%Points])
	}
	return out
}

// counter turns a cumulative count into a rate per second.
type counter struct {
	last uint64
	ok   bool // last holds a previous value
}

// rate is the increase since the previous value over dt seconds (NaN
// without a previous value or a positive dt). A count that went down was
// restarted (a reload's new chain): its whole value is the increase.
func (c *counter) rate(v uint64, dt float64) float32 {
	prev, ok := c.last, c.ok
	c.last, c.ok = v, true
	if !ok || !(dt > 0) {
		return float32(math.NaN())
	}
	d := v - prev
	if v < prev {
		d = v
	}
	return float32(float64(d) / dt)
}

// histogram remembers a cumulative histogram's counts to take quantiles
// of the increase since the previous sample.
type histogram struct {
	last []uint64
	ok   bool
}

// quantiles returns, in milliseconds, the q-quantiles of the observations
// between the previous sample's counts and cum (cumulative counts per
// upper bound, bounds[i] seconds, the last bucket +Inf when cum is one
// longer than bounds); NaN where no observation fell in between.
func (h *histogram) quantiles(bounds []float64, cum []uint64, qs ...float64) []float32 {
	out := make([]float32, len(qs))
	for i := range out {
		out[i] = float32(math.NaN())
	}
	prev, ok := h.last, h.ok && len(h.last) == len(cum)
	h.last, h.ok = append([]uint64(nil), cum...), true
	if !ok || len(cum) == 0 || len(bounds) == 0 {
		return out
	}
	delta := make([]uint64, len(cum))
	for i := range cum {
		if cum[i] >= prev[i] {
			delta[i] = cum[i] - prev[i]
		} else {
			delta[i] = cum[i] // restarted
		}
	}
	for i, q := range qs {
		if v, ok := quantile(q, bounds, delta); ok {
			out[i] = float32(v * 1000)
		}
	}
	return out
}

// quantile interpolates linearly within the bucket where the q-th
// observation falls, as Prometheus's histogram_quantile does; in the +Inf
// bucket it answers the highest finite bound. cum are cumulative counts.
func quantile(q float64, bounds []float64, cum []uint64) (float64, bool) {
	total := cum[len(cum)-1]
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	for i, c := range cum {
		if float64(c) < rank {
			continue
		}
		if i >= len(bounds) {
			return bounds[len(bounds)-1], true
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = bounds[i-1], cum[i-1]
		}
		in := c - below
		if in == 0 {
			return bounds[i], true
		}
		return lo + (bounds[i]-lo)*(rank-float64(below))/float64(in), true
	}
	return bounds[len(bounds)-1], true
}
