package sim

// TODO: not yet written.
var ballsIntoBins = Scenario{
	Name:    "balls-into-bins",
	Ref:     "balls_into_bins",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario balls-into-bins is not written yet"} }
	},
}
