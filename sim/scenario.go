// Package sim is Spillway's laboratory: deterministic experiments that run
// the library's own policy code under virtual time. Each scenario replays one
// of the seed documents' reference experiments; with its default flags it
// prints the reference output byte for byte, and with other flags it answers
// "what if" for the user's own parameters.
//
// Virtual time is float64 seconds, as in every policy package. Random numbers
// come from rng.Mulberry32, drawn in the same order as the reference scripts,
// so the results match them for any parameters, not only the defaults.
package sim

import (
	"errors"
	"fmt"
	"sort"
)

// Scenario is one experiment.
type Scenario struct {
	Name    string // command-line name, e.g. "codel"
	Ref     string // stem of the reference experiment, e.g. "codel_vs_taildrop"; "" = no reference experiment (Spillway's own: no golden output to compare)
	Summary string // one line for the scenario list
	Chart   bool   // the report carries a chart, so --svg is offered
	// RefArgs are the flags under which the text is the reference output
	// byte for byte, when the defaults print something else; nil when the
	// defaults print it (circuit-breaker prints English unless --seed-text).
	RefArgs []string
	// Bind declares the scenario's flags on f, with the reference constants as
	// defaults, and returns the function that runs the scenario with the
	// values f holds once parsed.
	Bind func(f *Flags) Runner
}

// Runner runs a scenario with its bound parameters. It returns a *UsageError
// when the parameters are inconsistent.
type Runner func() (*Report, error)

// UsageError reports a bad parameter; the command exits with status 2.
type UsageError struct {
	Flag string // without dashes; empty when the problem is not one flag
	Msg  string
}

func (e *UsageError) Error() string {
	if e.Flag == "" {
		return e.Msg
	}
	return "--" + e.Flag + ": " + e.Msg
}

// Badf returns a *UsageError for flag.
func Badf(flag, format string, args ...any) error {
	return &UsageError{Flag: flag, Msg: fmt.Sprintf(format, args...)}
}

// IsUsage reports whether err is a usage error.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Scenarios returns every scenario in the order `spillway sim all` runs them.
func Scenarios() []Scenario {
	return []Scenario{
		overloadPolicies,
		codel,
		retryStorm,
		smoothWRR,
		lbAlgorithms,
		ballsIntoBins,
		healthCheckTiming,
		tokenVsLeaky,
		windows,
		limiterMemory,
		sharedCounterRace,
		circuitBreaker,
		adaptive,
		rollout,
	}
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Names returns the scenario names, sorted.
func Names() []string {
	var n []string
	for _, s := range Scenarios() {
		n = append(n, s.Name)
	}
	sort.Strings(n)
	return n
}
