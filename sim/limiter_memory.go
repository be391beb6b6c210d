package sim

// TODO: not yet written.
var limiterMemory = Scenario{
	Name:    "limiter-memory",
	Ref:     "limiter_memory",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario limiter-memory is not written yet"} }
	},
}
