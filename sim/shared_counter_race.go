package sim

// TODO: not yet written.
var sharedCounterRace = Scenario{
	Name:    "shared-counter-race",
	Ref:     "shared_counter_race",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario shared-counter-race is not written yet"} }
	},
}
