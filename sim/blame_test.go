package sim

import (
	"errors"
	"strings"
	"testing"
)

// A limit that several flags share names the flag the user gave, not the
// first factor: `--duration 1e308` once blamed --loads.
func TestSharedLimitsBlameTheGivenFlag(t *testing.T) {
	for _, c := range []struct {
		scenario string
		args     []string
		flag     string
	}{
		{"overload-policies", []string{"--duration", "1e308"}, "duration"},
		{"overload-policies", []string{"--duration", "1e5"}, "duration"},
		{"overload-policies", []string{"--loads", "1e7"}, "loads"},
		{"overload-policies", []string{"--loads", "1e5", "--duration", "100"}, "loads"},
		{"overload-policies", []string{"--priority-critical", "5"}, "priority-critical"},
		{"overload-policies", []string{"--priority-other", "60"}, "priority-other"},
		{"codel", []string{"--base-rate", "1e9"}, "base-rate"},
		{"codel", []string{"--burst-rate", "1e9"}, "burst-rate"},
		{"codel", []string{"--end", "86400"}, "end"},
		{"codel", []string{"--burst-from", "10"}, "burst-from"},
		{"codel", []string{"--burst-to", "1"}, "burst-to"},
		{"retry-storm", []string{"--end", "36000"}, "end"},
		{"retry-storm", []string{"--new", "1e5"}, "new"},
		{"retry-storm", []string{"--dip-from", "70"}, "dip-from"},
		{"retry-storm", []string{"--dip-to", "10"}, "dip-to"},
		{"lb-algorithms", []string{"--speeds", strings.Repeat("1,", 999) + "1", "--requests", "200000"}, "requests"},
		{"adaptive", []string{"--duration", "3600"}, "duration"},
		{"adaptive", []string{"--latency", "1e-300"}, "latency"},
		{"adaptive", []string{"--concurrency", "100000"}, "concurrency"},
		{"adaptive", []string{"--load", "20"}, "load"},
		{"adaptive", []string{"--critical", "0.7"}, "critical"},
		{"adaptive", []string{"--sheddable", "0.9"}, "sheddable"},
		{"adaptive", []string{"--dip-from", "50"}, "dip-from"},
		{"adaptive", []string{"--dip-to", "10"}, "dip-to"},
	} {
		t.Run(c.scenario+" "+c.args[0], func(t *testing.T) {
			sc, _ := Lookup(c.scenario)
			f := NewFlags(sc.Name)
			run := sc.Bind(f)
			if err := f.FlagSet().Parse(c.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			_, err := run()
			var u *UsageError
			if !errors.As(err, &u) || u.Flag != c.flag {
				t.Fatalf("error %v, want a usage error naming --%s", err, c.flag)
			}
		})
	}
}

func TestBlameWithoutGivenFlagsNamesTheFirst(t *testing.T) {
	f := NewFlags("x")
	f.Float("a", 1, Any, "")
	f.Float("b", 1, Any, "")
	if err := f.FlagSet().Parse(nil); err != nil {
		t.Fatal(err)
	}
	if got := f.Blame("b", "a"); got != "b" {
		t.Errorf("Blame(b, a) with no flag given = %q, want b", got)
	}
	if err := f.FlagSet().Parse([]string{"-a", "2"}); err != nil {
		t.Fatal(err)
	}
	if got := f.Blame("b", "a"); got != "a" {
		t.Errorf("Blame(b, a) with -a given = %q, want a", got)
	}
}
