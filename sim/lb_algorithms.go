package sim

// TODO: not yet written.
var lbAlgorithms = Scenario{
	Name:    "lb-algorithms",
	Ref:     "lb_algorithms",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario lb-algorithms is not written yet"} }
	},
}
