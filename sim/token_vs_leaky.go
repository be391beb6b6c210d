package sim

// TODO: not yet written.
var tokenVsLeaky = Scenario{
	Name:    "token-vs-leaky",
	Ref:     "token_vs_leaky",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario token-vs-leaky is not written yet"} }
	},
}
