package sim

// TODO: not yet written.
var codel = Scenario{
	Name:    "codel",
	Ref:     "codel_vs_taildrop",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario codel is not written yet"} }
	},
}
