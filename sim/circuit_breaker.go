package sim

// TODO: not yet written.
var circuitBreaker = Scenario{
	Name:    "circuit-breaker",
	Ref:     "circuit_breaker",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario circuit-breaker is not written yet"} }
	},
}
