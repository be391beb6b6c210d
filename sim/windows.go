package sim

// TODO: not yet written.
var windows = Scenario{
	Name:    "windows",
	Ref:     "window_counters",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario windows is not written yet"} }
	},
}
