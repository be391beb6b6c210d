package sim

// TODO: not yet written.
var smoothWRR = Scenario{
	Name:    "smooth-wrr",
	Ref:     "smooth_wrr",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario smooth-wrr is not written yet"} }
	},
}
