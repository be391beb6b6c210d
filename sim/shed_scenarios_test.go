package sim

import (
	"os"
	"strings"
	"testing"
)

// Golden outputs for non-default parameters of the overload-policies and codel
// scenarios. Each testdata file was produced by a copy of the reference script
// (../shared/reference/overload_policies.js or codel_vs_taildrop.js) run with
// node 20, edited only to read its constants (seed, T, TIMEOUT, S, the 0.3
// critical share, the load list and the LIMIT table; or seed, S, LIMIT, TARGET,
// INTERVAL, END and the 80/200 rates and 2/5 s burst) from a JSON argument,
// to print "queue at T s" with the T given, and to print "-" where the
// original would print NaN (no critical requests; a second or a whole run
// with nothing served). For the *_rfc8289* files the copy also ran a third
// queue whose dequeue is RFC 8289 §5's pseudocode transcribed literally (loop
// form, one dequeue dropping as many packets as it must), printed after the
// reference text as the --rfc8289 flag does.
var shedGoldenCases = []struct {
	scenario, file string
	args           []string
}{
	{ // node op.js '{"SEED":7,"T":20,"TIMEOUT":0.5,"S":0.02,"CRIT":0.5,"LOADS":[30,45,60,90],"B":25,"PC":30,"PO":10}'
		"overload-policies", "overload_policies_small.out",
		[]string{"--seed", "7", "--duration", "20", "--timeout", "0.5", "--service", "0.02", "--critical", "0.5",
			"--loads", "30,45,60,90", "--bounded", "25", "--priority-critical", "30", "--priority-other", "10"},
	},
	{ // node op.js '{"CRIT":0,"LOADS":[90,300],"B":0,"PC":5,"PO":5}'
		"overload-policies", "overload_policies_nocritical.out",
		[]string{"--critical", "0", "--loads", "90,300", "--bounded", "0", "--priority-critical", "5", "--priority-other", "5"},
	},
	{ // node cd.js '{"SEED":9,"S":0.008,"LIMIT":100,"TARGET":0.02,"INTERVAL":0.2,"END":15,"BASE":60,"BURST":300,"FROM":3,"TO":8}'
		"codel", "codel_vs_taildrop_short_queue.out",
		[]string{"--seed", "9", "--service", "0.008", "--limit", "100", "--target", "0.02", "--interval", "0.2",
			"--end", "15", "--base-rate", "60", "--burst-rate", "300", "--burst-from", "3", "--burst-to", "8"},
	},
	{ // node cd.js '{"END":6,"BASE":0.3,"BURST":0.5,"FROM":1,"TO":2}'
		"codel", "codel_vs_taildrop_sparse.out",
		[]string{"--end", "6", "--base-rate", "0.3", "--burst-rate", "0.5", "--burst-from", "1", "--burst-to", "2"},
	},
	{ // node cd.js '{"RFC":1}'
		"codel", "codel_vs_taildrop_rfc8289.out",
		[]string{"--rfc8289"},
	},
	{ // node cd.js '{"RFC":1,"SEED":4,"S":0.02,"LIMIT":50,"TARGET":0.03,"INTERVAL":0.05,"END":30,"BASE":45,"BURST":70,"FROM":0,"TO":30}'
		"codel", "codel_vs_taildrop_rfc8289_long.out",
		[]string{"--rfc8289", "--seed", "4", "--service", "0.02", "--limit", "50", "--target", "0.03", "--interval", "0.05",
			"--end", "30", "--base-rate", "45", "--burst-rate", "70", "--burst-from", "0", "--burst-to", "30"},
	},
}

func TestShedScenariosGolden(t *testing.T) {
	for _, tc := range shedGoldenCases {
		t.Run(tc.file, func(t *testing.T) {
			sc, ok := Lookup(tc.scenario)
			if !ok {
				t.Fatalf("no scenario %q", tc.scenario)
			}
			want, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			got := runDefaults(t, sc, tc.args...).Text.String()
			if got != string(want) {
				t.Errorf("%s %v differs from testdata/%s\n%s", tc.scenario, tc.args, tc.file, diffLines(got, string(want)))
			}
			if strings.Contains(got, "NaN") || strings.Contains(got, "Infinity") {
				t.Errorf("output contains NaN or Infinity:\n%s", got)
			}
		})
	}
}

// runShedScenario parses args and runs; it returns the parse or run error.
func runShedScenario(name string, args ...string) (*Report, error) {
	sc, _ := Lookup(name)
	f := NewFlags(name)
	run := sc.Bind(f)
	if err := f.FlagSet().Parse(args); err != nil {
		return nil, err
	}
	return run()
}

func TestShedScenariosBadInput(t *testing.T) {
	tests := []struct {
		scenario string
		args     []string
		want     string // a part of the error message
		usage    bool   // the run (not the parse) reports a *UsageError
	}{
		{"overload-policies", []string{"--duration", "0"}, "greater than 0", false},
		{"overload-policies", []string{"--timeout", "-1"}, "greater than 0", false},
		{"overload-policies", []string{"--service", "NaN"}, "finite", false},
		{"overload-policies", []string{"--critical", "1.5"}, "between 0 and 1", false},
		{"overload-policies", []string{"--loads", "50,abc"}, "not a number", false},
		{"overload-policies", []string{"--loads", "50,0"}, "greater than 0", false},
		{"overload-policies", []string{"--bounded", "-1"}, "negative", false},
		{"overload-policies", []string{"--priority-critical", "20000000"}, "at most", false},
		{"overload-policies", []string{"--seed", "-3"}, "0 to 4294967295", false},
		{"overload-policies", []string{"--priority-other", "60"}, "--priority-other", true},
		{"overload-policies", []string{"--loads", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21"}, "--loads: at most 20", true},
		{"overload-policies", []string{"--loads", "100000", "--duration", "30"}, "--loads", true},
		{"codel", []string{"--limit", "0"}, "greater than 0", false},
		{"codel", []string{"--limit", "2000000"}, "at most", false},
		{"codel", []string{"--end", "1.5"}, "whole number", false},
		{"codel", []string{"--end", "100000"}, "at most", false},
		{"codel", []string{"--target", "0"}, "greater than 0", false},
		{"codel", []string{"--interval", "Inf"}, "finite", false},
		{"codel", []string{"--burst-from", "-1"}, "negative", false},
		{"codel", []string{"--base-rate", "0"}, "greater than 0", false},
		{"codel", []string{"--rfc8289=maybe"}, "invalid boolean", false},
		{"codel", []string{"--burst-from", "5", "--burst-to", "2"}, "--burst-to", true},
		{"codel", []string{"--end", "86400", "--burst-rate", "100"}, "--end", true},
	}
	for _, tt := range tests {
		_, err := runShedScenario(tt.scenario, tt.args...)
		if err == nil {
			t.Errorf("%s %v: no error", tt.scenario, tt.args)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v: error %q does not mention %q", tt.scenario, tt.args, err, tt.want)
		}
		if IsUsage(err) != tt.usage {
			t.Errorf("%s %v: IsUsage = %v, want %v (%v)", tt.scenario, tt.args, IsUsage(err), tt.usage, err)
		}
	}
}

// The JSON tables and charts carry the same numbers as the text.
func TestShedScenariosTablesAndCharts(t *testing.T) {
	rep, err := runShedScenario("overload-policies")
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Tables[0]
	if len(res.Rows) != 18 || len(rep.Charts) != 3 {
		t.Fatalf("%d rows, %d charts; want 18 and 3", len(res.Rows), len(rep.Charts))
	}
	// priority shedding at 200/s: 99.4 good/s, 2821 rejected, 100% critical ok (reference text).
	last := res.Rows[17]
	if last[0] != "priority" || last[1] != 200.0 || Fixed(last[2].(float64), 1) != "99.4" || last[4] != 2821 || Fixed(last[5].(float64), 0) != "100" {
		t.Errorf("last row = %v", last)
	}
	rep, err = runShedScenario("codel", "--rfc8289")
	if err != nil {
		t.Fatal(err)
	}
	sum := rep.Tables[1]
	if len(sum.Rows) != 3 || sum.Rows[0][1] != 1161 || sum.Rows[1][2] != 339 || sum.Rows[1][4] != 0 {
		t.Errorf("codel summary rows = %v", sum.Rows)
	}
	if len(rep.Charts) != 2 || len(rep.Charts[0].Series) != 3 {
		t.Errorf("codel charts: %d, series %d", len(rep.Charts), len(rep.Charts[0].Series))
	}
	var b strings.Builder
	if err := rep.WriteSVG(&b); err != nil || !strings.Contains(b.String(), "RFC 8289 CoDel") {
		t.Errorf("SVG: %v", err)
	}
}
