package sim

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Golden files for non-default parameters of retry-storm and
// circuit-breaker. Each was produced by a copy of the reference script with
// its constants turned into parameters, run as shown:
//
//   - retry_storm_*.out: retry_storm.js with END, TIMEOUT, NEW, the two
//     capacities, the dip bounds, the retry limit (n > MAXR), the budget's
//     ratio and max (tokens start at max), the seed, the recovery search start
//     (rec = dip-to, printed as rec − dip-to) and the texts "recovery after
//     <dip-to> s" and "never (by <END> s)" taken from parameters;
//     `node retry_storm_param.js '{"seed":1,"end":300,...}'` with the JSON
//     equivalent of the flags below.
//   - circuit_breaker_*.out: circuit_breaker.py with the threshold, recovery,
//     timeline and number of failing calls taken from a JSON argument, and
//     the final remark naming the rejected times ("(t=1.5, t=2 সময় ...)")
//     instead of the fixed "(t=3 ...)", left out when none was rejected;
//     `python3 circuit_breaker_param.py '{"threshold":2,...}'`. These are the
//     reference's text (--seed-text); the circuit_breaker*_en.out files are
//     the same runs with the two Bengali lines translated by hand.
func TestClientScenariosOtherParameters(t *testing.T) {
	for _, c := range []struct {
		scenario, file string
		args           []string
	}{
		{"retry-storm", "retry_storm_all_flags.out", []string{"--seed", "1", "--end", "300", "--timeout", "0.5",
			"--new", "80", "--capacity", "120", "--dip-capacity", "40", "--dip-from", "20", "--dip-to", "70",
			"--max-retries", "2", "--budget-ratio", "0.2", "--budget-max", "5"}},
		// A timeout under 1 ms puts retries into the bucket being processed:
		// the reference processes them after everything already there.
		{"retry-storm", "retry_storm_tiny_timeout.out", []string{"--dip-from", "30.5", "--dip-to", "61.7",
			"--timeout", "0.0004", "--end", "100", "--new", "30"}},
		{"retry-storm", "retry_storm_fractional_dip.out", []string{"--dip-from", "30.3", "--dip-to", "40.3",
			"--new", "75", "--seed", "3"}},
		{"circuit-breaker", "circuit_breaker_threshold2.out", []string{"--seed-text", "--threshold", "2", "--recovery", "2.5",
			"--times", "0,1,1.5,2,3.5,4,6.5,7,20", "--failures", "5"}},
		{"circuit-breaker", "circuit_breaker_threshold1.out", []string{"--seed-text", "--threshold", "1", "--recovery", "10",
			"--times", "0,5,9,10,11,12,25,100", "--failures", "2"}},
		{"circuit-breaker", "circuit_breaker_no_failures.out", []string{"--seed-text", "--failures", "0"}},
		// English, the default text.
		{"circuit-breaker", "circuit_breaker_en.out", nil},
		{"circuit-breaker", "circuit_breaker_threshold2_en.out", []string{"--threshold", "2", "--recovery", "2.5",
			"--times", "0,1,1.5,2,3.5,4,6.5,7,20", "--failures", "5"}},
		{"circuit-breaker", "circuit_breaker_no_failures_en.out", []string{"--failures", "0"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			want, err := os.ReadFile("testdata/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			sc, ok := Lookup(c.scenario)
			if !ok {
				t.Fatalf("no scenario %s", c.scenario)
			}
			rep := runDefaults(t, sc, c.args...)
			if got := rep.Text.String(); got != string(want) {
				t.Errorf("output differs from testdata/%s\n%s", c.file, diffLines(got, string(want)))
			}
		})
	}
}

func TestClientScenariosBadInput(t *testing.T) {
	for _, c := range []struct {
		scenario string
		args     []string
		flag     string // the flag the error must name
	}{
		{"retry-storm", []string{"--end", "36001"}, "end"},
		{"retry-storm", []string{"--end", "0"}, "end"},
		{"retry-storm", []string{"--timeout", "0"}, "timeout"},
		{"retry-storm", []string{"--new", "-3"}, "new"},
		{"retry-storm", []string{"--new", "NaN"}, "new"},
		{"retry-storm", []string{"--capacity", "0"}, "capacity"},
		{"retry-storm", []string{"--dip-capacity", "Inf"}, "dip-capacity"},
		{"retry-storm", []string{"--dip-from", "-1"}, "dip-from"},
		{"retry-storm", []string{"--max-retries", "11"}, "max-retries"},
		{"retry-storm", []string{"--max-retries", "-1"}, "max-retries"},
		{"retry-storm", []string{"--budget-ratio", "0"}, "budget-ratio"},
		{"retry-storm", []string{"--budget-max", "-10"}, "budget-max"},
		{"retry-storm", []string{"--seed", "-1"}, "seed"},
		{"retry-storm", []string{"--dip-from", "60", "--dip-to", "60"}, "dip-to"},
		{"retry-storm", []string{"--dip-from", "70"}, "dip-from"},
		{"retry-storm", []string{"--new", "100", "--end", "36000"}, "new"},
		{"circuit-breaker", []string{"--threshold", "0"}, "threshold"},
		{"circuit-breaker", []string{"--threshold", "1e3"}, "threshold"},
		{"circuit-breaker", []string{"--recovery", "0"}, "recovery"},
		{"circuit-breaker", []string{"--recovery", "-Inf"}, "recovery"},
		{"circuit-breaker", []string{"--times", "0,x,2"}, "times"},
		{"circuit-breaker", []string{"--times", "0,NaN"}, "times"},
		{"circuit-breaker", []string{"--failures", "-1"}, "failures"},
		{"circuit-breaker", []string{"--times", manyTimes(maxBreakerTimes + 1)}, "times"},
	} {
		t.Run(c.scenario+" "+strings.Join(c.args, " "), func(t *testing.T) {
			sc, _ := Lookup(c.scenario)
			f := NewFlags(sc.Name)
			run := sc.Bind(f)
			err := f.FlagSet().Parse(c.args)
			if err == nil {
				var rep *Report
				rep, err = run()
				if err == nil {
					t.Fatalf("accepted; printed\n%s", rep.Text.String())
				}
				if !IsUsage(err) {
					t.Fatalf("error %v is not a usage error", err)
				}
			}
			if !strings.Contains(err.Error(), c.flag) {
				t.Fatalf("error %q does not name --%s", err, c.flag)
			}
		})
	}
}

func manyTimes(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(i)
	}
	return strings.Join(parts, ",")
}

// Edge parameters print numbers, never NaN or Infinity: a run shorter than
// the fixed 120-180 s window, a dip beyond the end, very short runs.
func TestRetryStormEdgeParameters(t *testing.T) {
	sc, _ := Lookup("retry-storm")
	for _, args := range [][]string{
		{"--end", "1"},
		{"--end", "6"},
		{"--end", "100", "--dip-from", "150", "--dip-to", "200"},
		{"--end", "50", "--dip-from", "0", "--dip-to", "0.001", "--max-retries", "0"},
		{"--new", "0.001", "--end", "30"},
	} {
		rep := runDefaults(t, sc, args...)
		text := rep.Text.String()
		if strings.Contains(text, "NaN") || strings.Contains(text, "Infinity") || strings.Count(text, "\n") != 5 {
			t.Errorf("%v printed\n%s", args, text)
		}
	}
}

// The JSON table carries the same results as the text: recovery seconds,
// or null for "never".
func TestRetryStormTable(t *testing.T) {
	sc, _ := Lookup("retry-storm")
	rep := runDefaults(t, sc)
	if len(rep.Tables) != 1 || len(rep.Tables[0].Rows) != 4 {
		t.Fatalf("want one table of 4 rows, got %+v", rep.Tables)
	}
	want := []any{nil, nil, 30.0, 0.0}
	for i, row := range rep.Tables[0].Rows {
		if got := row[len(row)-1]; got != want[i] {
			t.Errorf("row %d recovery_after_s = %v, want %v", i, got, want[i])
		}
		if x := row[2].(float64); Fixed(x, 2) != []string{"3.29", "3.10", "1.07", "1.07"}[i] {
			t.Errorf("row %d load_x_in_dip = %v", i, x)
		}
	}
	if len(rep.Charts) != 2 || len(rep.Charts[0].Series) != 5 || len(rep.Charts[0].Series[0].Y) != 240 {
		t.Errorf("want 2 charts of 4 policies + capacity over 240 s, got %d charts", len(rep.Charts))
	}
}

func TestCircuitBreakerTable(t *testing.T) {
	sc, _ := Lookup("circuit-breaker")
	rep := runDefaults(t, sc)
	calls := rep.Tables[0]
	var results []string
	for _, row := range calls.Rows {
		results = append(results, row[1].(string)+"/"+row[2].(string))
	}
	if got := strings.Join(results, " "); got != "failure/CLOSED failure/CLOSED failure/OPEN rejected/OPEN success/CLOSED success/CLOSED" {
		t.Errorf("calls table: %s", got)
	}
	if s := rep.Tables[1].Rows[0]; s[0] != 5 || s[1] != 1 {
		t.Errorf("summary %v, want 5 calls, 1 rejected", s)
	}
}
