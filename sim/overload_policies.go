package sim

// TODO: not yet written.
var overloadPolicies = Scenario{
	Name:    "overload-policies",
	Ref:     "overload_policies",
	Summary: "not yet written",
	Bind: func(f *Flags) Runner {
		return func() (*Report, error) { return nil, &UsageError{Msg: "scenario overload-policies is not written yet"} }
	},
}
