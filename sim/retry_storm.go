package sim

// TODO: not yet written.
var retryStorm = Scenario{
	Name:    "retry-storm",
	Ref:     "retry_storm",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario retry-storm is not written yet"} }
	},
}
