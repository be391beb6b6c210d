package loadgen

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxSteps bounds the steps a rate spec may expand to.
const maxSteps = 10000

// ParseRate reads a rate spec into steps of duration step each:
//
//	"100"        one step at 100 req/s
//	"50:200:25"  from 50 to 200 by 25, both ends included (a descending
//	             "200:50:25" counts down)
//	"50,100,200" the listed rates in order
func ParseRate(spec string, step time.Duration) ([]Step, error) {
	if step <= 0 {
		return nil, configErr("rate %q: step duration %v, want > 0", spec, step)
	}
	spec = strings.TrimSpace(spec)
	var rates []float64
	switch {
	case strings.Contains(spec, ":"):
		r, err := parseRamp(spec)
		if err != nil {
			return nil, err
		}
		rates = r
	default:
		for _, f := range strings.Split(spec, ",") {
			r, err := parseRateNumber(spec, f)
			if err != nil {
				return nil, err
			}
			rates = append(rates, r)
		}
	}
	if len(rates) > maxSteps {
		return nil, configErr("rate %q gives %d steps, want at most %d", spec, len(rates), maxSteps)
	}
	steps := make([]Step, len(rates))
	for i, r := range rates {
		steps[i] = Step{Rate: r, Duration: step}
	}
	return steps, nil
}

// parseRamp reads from:to:by.
func parseRamp(spec string) ([]float64, error) {
	f := strings.Split(spec, ":")
	if len(f) != 3 {
		return nil, configErr("rate %q: a ramp is from:to:by, as 50:200:25", spec)
	}
	var v [3]float64
	for i, s := range f {
		r, err := parseRateNumber(spec, s)
		if err != nil {
			return nil, err
		}
		v[i] = r
	}
	from, to, by := v[0], v[1], v[2]
	n := math.Floor(math.Abs(to-from)/by*(1+1e-12)) + 1
	if n > maxSteps {
		return nil, configErr("rate %q gives %.0f steps, want at most %d", spec, n, maxSteps)
	}
	if to < from {
		by = -by
	}
	rates := make([]float64, int(n))
	for i := range rates {
		rates[i] = from + float64(i)*by
	}
	return rates, nil
}

func parseRateNumber(spec, s string) (float64, error) {
	s = strings.TrimSpace(s)
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || !(r >= minRate && r <= maxRate) {
		return 0, configErr("rate %q: %q is not a rate from %v to %v per second", spec, s, minRate, maxRate)
	}
	return r, nil
}

// ParseVars reads variables as "user=1000,region=4": each {{name}} takes
// a value in 0 … N−1.
func ParseVars(spec string) (map[string]int, error) {
	vars := make(map[string]int)
	if strings.TrimSpace(spec) == "" {
		return vars, nil
	}
	for _, f := range strings.Split(spec, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(f), "=")
		name = strings.TrimSpace(name)
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if !ok || err != nil {
			return nil, configErr("vars %q: %q, want name=N with N a whole number", spec, f)
		}
		if _, dup := vars[name]; dup {
			return nil, configErr("vars %q: %s appears twice", spec, name)
		}
		vars[name] = n
	}
	if err := checkVars(vars); err != nil {
		return nil, fmt.Errorf("vars %q: %w", spec, err)
	}
	return vars, nil
}

// ParseClasses reads a class mix as "critical=0.3,sheddable=0.7": each
// class's share of the arrivals, in (0, 1], summing to at most 1 (the rest
// carries no class header).
func ParseClasses(spec string) ([]Class, error) {
	var classes []Class
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(spec, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(f), "=")
		share, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if !ok || err != nil {
			return nil, configErr("classes %q: %q, want name=share with share a number in (0, 1]", spec, f)
		}
		classes = append(classes, Class{Name: strings.TrimSpace(name), Share: share})
	}
	if err := checkClasses(classes); err != nil {
		return nil, fmt.Errorf("classes %q: %w", spec, err)
	}
	return classes, nil
}
