package rules_test

import (
	"fmt"

	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// The seed's rules file loads as written; the named key parts use the
// default identity headers.
func ExampleParse() {
	set, err := rules.Parse("rules.json", []byte(`{ "rules": [
  { "id": "user-default", "key": ["user"],       "rate": 100, "per": "1m", "burst": 20 },
  { "id": "login",        "key": ["user", "ip"], "rate": 10,  "per": "15m" },
  { "id": "otp-sms",      "key": ["phone"],      "rate": 3,   "per": "10m", "failMode": "closed" },
  { "id": "tenant",       "key": ["tenant"],     "rate": 500, "per": "1s",  "burst": 1000 } ] }`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range set.Rules {
		fmt.Printf("%-12s %v/%s burst %d, fail %s, key:", r.ID, r.Spec.Rate, rules.FormatPer(r.Spec.Per), r.Capacity(), r.FailMode)
		for _, p := range r.Key {
			if p.Header != "" {
				fmt.Printf(" %s(%s)", p.Name, p.Header)
			} else {
				fmt.Printf(" %s", p.Name)
			}
		}
		fmt.Println()
	}
	// Output:
	// user-default 100/1m burst 20, fail open, key: user(X-User-Id)
	// login        10/15m burst 10, fail open, key: user(X-User-Id) ip
	// otp-sms      3/10m burst 3, fail closed, key: phone(X-Phone)
	// tenant       500/1s burst 1000, fail open, key: tenant(X-Tenant-Id)
}

// Every problem is reported with its file, line and column, and the whole
// file is refused.
func ExampleParse_errors() {
	_, err := rules.Parse("rules.yaml", []byte(`rules:
  - id: login
    key: [user, ip]
    rate: 10
    per: 15 minutes
  - id: otp
    key: [phone]
    rate: 3
    per: 10m
    failmode: closed
`))
	fmt.Println(err)
	// Output:
	// rules.yaml:5:10: rule "login": per: "15 minutes" is not a duration (want e.g. 1s, 1m, 15m, 1h, 1d)
	// rules.yaml:10:5: rule "otp": unknown field "failmode" (want id, key, rate, per, burst, algorithm, cost, shadow, failMode, onMissing, match)
}
