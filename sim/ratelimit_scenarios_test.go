package sim

import (
	"os"
	"strings"
	"testing"
)

// Golden outputs for non-default parameters of the four rate-limit scenarios.
// Each testdata file was produced with node 20 by a copy of the reference
// script (../shared/reference/X.js) edited only to read its constants from a
// JSON argument:
//   - token_vs_leaky.js: the seed, R, B, the background rate (6) and the burst
//     size (35);
//   - window_counters.js: LIMIT and W, with the bursts scaled as the windows
//     scenario's usage says (--limit requests spaced W/60/LIMIT apart, starting
//     at W − W/60, W, W/60 and 1.5·W; case names m:ss for whole seconds, else
//     "x.xx s"; the last line's "2x" and "under 2 s" computed as
//     allowed/LIMIT and floor(last − first) + 1);
//   - limiter_memory.js: USERS, LIMIT, KEY and the 0.05 active share (the
//     header's "10M", "100 timestamps" and "5%" printed from them);
//   - shared_counter_race.js: the seed, LIMIT and N.
var rateLimitGoldenCases = []struct {
	scenario, file string
	args           []string
}{
	{ // node token_vs_leaky.js '{"seed":3,"rate":5,"burst":8,"background":4,"burstSize":50}'
		"token-vs-leaky", "token_vs_leaky_r5b8.out",
		[]string{"--seed", "3", "--rate", "5", "--burst", "8", "--background", "4", "--burst-size", "50"},
	},
	{ // node window_counters.js '{"limit":7,"window":10}'
		"windows", "window_counters_l7w10.out",
		[]string{"--limit", "7", "--window", "10"},
	},
	{ // node limiter_memory.js '{"users":1000000,"limit":10,"key":32,"active":0.07}'
		"limiter-memory", "limiter_memory_1m.out",
		[]string{"--users", "1000000", "--limit", "10", "--key-bytes", "32", "--active", "0.07"},
	},
	{ // node shared_counter_race.js '{"seed":5,"limit":30,"requests":500}'
		"shared-counter-race", "shared_counter_race_s5.out",
		[]string{"--seed", "5", "--limit", "30", "--requests", "500"},
	},
}

func TestRateLimitScenariosGolden(t *testing.T) {
	for _, c := range rateLimitGoldenCases {
		t.Run(c.file, func(t *testing.T) {
			want, err := os.ReadFile("testdata/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := runRateLimitScenario(c.scenario, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Text.String(); got != string(want) {
				t.Errorf("%s %v differs from testdata/%s\n%s", c.scenario, c.args, c.file, diffLines(got, string(want)))
			}
		})
	}
}

// runRateLimitScenario parses args for the named scenario and runs it; a
// parse error is returned as is.
func runRateLimitScenario(name string, args ...string) (*Report, error) {
	sc, ok := Lookup(name)
	if !ok {
		return nil, &UsageError{Msg: "no scenario " + name}
	}
	f := NewFlags(name)
	run := sc.Bind(f)
	if err := f.FlagSet().Parse(args); err != nil {
		return nil, err
	}
	return run()
}

func TestRateLimitScenariosBadInput(t *testing.T) {
	for _, c := range []struct {
		scenario string
		args     []string
		runner   bool // rejected by the runner (a *UsageError), not by flag parsing
	}{
		{"token-vs-leaky", []string{"--rate", "0"}, false},
		{"token-vs-leaky", []string{"--rate", "-10"}, false},
		{"token-vs-leaky", []string{"--rate", "NaN"}, false},
		{"token-vs-leaky", []string{"--rate", "1e-320"}, true}, // positive, but 1/rate overflows
		{"token-vs-leaky", []string{"--burst", "0"}, false},
		{"token-vs-leaky", []string{"--burst", "2000000"}, false},
		{"token-vs-leaky", []string{"--background", "-1"}, false},
		{"token-vs-leaky", []string{"--background", "2e6"}, true},
		{"token-vs-leaky", []string{"--burst-size", "-1"}, false},
		{"windows", []string{"--limit", "0"}, false},
		{"windows", []string{"--limit", "2000000"}, false},
		{"windows", []string{"--window", "0"}, false},
		{"windows", []string{"--window", "-60"}, false},
		{"windows", []string{"--window", "Inf"}, false},
		{"limiter-memory", []string{"--users", "0"}, false},
		{"limiter-memory", []string{"--limit", "-5"}, false},
		{"limiter-memory", []string{"--key-bytes", "-1"}, false},
		{"limiter-memory", []string{"--active", "1.5"}, false},
		{"shared-counter-race", []string{"--limit", "0"}, false},
		{"shared-counter-race", []string{"--requests", "0"}, false},
		{"shared-counter-race", []string{"--requests", "20000000"}, false},
		{"shared-counter-race", []string{"--seed", "-1"}, false},
	} {
		rep, err := runRateLimitScenario(c.scenario, c.args...)
		switch {
		case err == nil:
			t.Errorf("%s %v: accepted, printed\n%s", c.scenario, c.args, rep.Text.String())
		case c.runner && !IsUsage(err):
			t.Errorf("%s %v: err = %v, want a *UsageError", c.scenario, c.args, err)
		}
	}
}

// Extreme but valid parameters run without panicking and print no NaN or
// Infinity.
func TestRateLimitScenariosExtremes(t *testing.T) {
	for _, c := range []struct {
		scenario string
		args     []string
	}{
		{"token-vs-leaky", []string{"--background", "0", "--burst-size", "0"}},
		{"token-vs-leaky", []string{"--rate", "1e300", "--burst", "1"}},
		{"token-vs-leaky", []string{"--rate", "1e-300", "--burst", "1000000"}},
		{"windows", []string{"--limit", "1", "--window", "1e-300"}},
		{"windows", []string{"--limit", "1", "--window", "1e300"}},
		{"limiter-memory", []string{"--users", "1000000000000", "--limit", "1000000000", "--key-bytes", "1000000", "--active", "1"}},
		{"limiter-memory", []string{"--users", "1", "--limit", "1", "--key-bytes", "0", "--active", "0"}},
		{"shared-counter-race", []string{"--requests", "1", "--limit", "1"}},
		{"shared-counter-race", []string{"--requests", "10", "--limit", "1000000000"}},
	} {
		rep, err := runRateLimitScenario(c.scenario, c.args...)
		if err != nil {
			t.Errorf("%s %v: %v", c.scenario, c.args, err)
			continue
		}
		if text := rep.Text.String(); strings.Contains(text, "NaN") || strings.Contains(text, "Infinity") {
			t.Errorf("%s %v printed NaN or Infinity:\n%s", c.scenario, c.args, text)
		}
	}
}

// The JSON tables carry the numbers the text prints.
func TestRateLimitScenariosTables(t *testing.T) {
	rep, err := runRateLimitScenario("token-vs-leaky")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 2 || len(rep.Tables[0].Rows) != 10 {
		t.Fatalf("token-vs-leaky tables: %+v", rep.Tables)
	}
	// Second 6 of the reference: 46 in, token bucket 28 ok 18 rejected, queue
	// 28 ok 18 rejected 10 sent; peaks 28 and 10; longest wait 1998 ms.
	if got := rep.Tables[0].Rows[6]; !equalRow(got, []any{6, 46, 28, 18, 28, 18, 10}) {
		t.Errorf("second 6: %v", got)
	}
	if got := rep.Tables[1].Rows[0]; got[0] != 28 || got[1] != 10 || Fixed(got[2].(float64), 0) != "1998" {
		t.Errorf("summary: %v", got)
	}

	rep, err = runRateLimitScenario("windows")
	if err != nil {
		t.Fatal(err)
	}
	// Case A: fixed 100+100, log 100+0, counter 100+2.
	if got := rep.Tables[0].Rows[0]; got[0] != "A: 100 at 0:59, 100 at 1:00" || !equalRow(got[1:], []any{100, 100, 100, 0, 100, 2}) {
		t.Errorf("windows case A: %v", got)
	}

	rep, err = runRateLimitScenario("limiter-memory")
	if err != nil {
		t.Fatal(err)
	}
	// GCRA: 8 B of state, 72 B per key, 720 MB for 10M users.
	if got := rep.Tables[0].Rows[5]; got[0] != "GCRA" || got[1] != 8 || got[2] != 72 || got[3] != 720e6 {
		t.Errorf("limiter-memory GCRA row: %v", got)
	}

	rep, err = runRateLimitScenario("shared-counter-race")
	if err != nil {
		t.Fatal(err)
	}
	// atomic INCR: 100 admitted, 0 over, counter 1000, A 47 / B 53.
	if got := rep.Tables[0].Rows[2]; !equalRow(got[1:], []any{100, 0, 1000, 47, 53}) {
		t.Errorf("shared-counter-race atomic row: %v", got)
	}
}

func equalRow(got, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
