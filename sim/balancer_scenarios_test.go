package sim

import (
	"math"
	"os"
	"strings"
	"testing"
)

// Non-default runs of the balancer scenarios, compared with the output of a
// modified copy of the reference script run with node 20. Each modification
// only replaces the reference's constants with the parameters below:
//
//	smooth_wrr_weights_3_0_2_1.out: smooth_wrr.js with the weights [5, 1, 1]
//	  and picks 14 of the first experiment taken from argv, server names from
//	  "abc…z" instead of "abc", and the "smooth 5:1:1"/"naive  5:1:1" labels
//	  built from the weights joined by ":"; run as
//	  `node smooth_wrr_param.js 3,0,2,1 9`.
//	lb_algorithms_three_servers.out: lb_algorithms.js with speeds, rho, N,
//	  the seeds 14 and 7 and the 50 ms staleness (value and row names) taken
//	  from a JSON argument; run with {"speeds":[1,2,3],"rho":0.9,
//	  "requests":20000,"traceSeed":1,"pickSeed":2,"stale":12.5}.
//	balls_into_bins_small.out: balls_into_bins.js with the list of n and the
//	  base seed 2026 taken from argv; run as
//	  `node balls_into_bins_param.js 2,3,10,50,777,4096 7`.
func TestBalancerScenariosAgainstReference(t *testing.T) {
	tests := []struct {
		scenario, file string
		args           []string
	}{
		{"smooth-wrr", "smooth_wrr_weights_3_0_2_1", []string{"--weights", "3,0,2,1", "--picks", "9"}},
		{"lb-algorithms", "lb_algorithms_three_servers", []string{"--speeds", "1,2,3", "--rho", "0.9",
			"--requests", "20000", "--trace-seed", "1", "--pick-seed", "2", "--stale", "12.5"}},
		{"balls-into-bins", "balls_into_bins_small", []string{"--n", "2,3,10,50,777,4096", "--seed", "7"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			want, err := os.ReadFile("testdata/" + tc.file + ".out")
			if err != nil {
				t.Fatal(err)
			}
			sc, ok := Lookup(tc.scenario)
			if !ok {
				t.Fatalf("no scenario %s", tc.scenario)
			}
			if got := runDefaults(t, sc, tc.args...).Text.String(); got != string(want) {
				t.Errorf("output differs from testdata/%s.out\n%s", tc.file, diffLines(got, string(want)))
			}
		})
	}
}

// Bad input is refused with a usage error naming the flag, either while the
// flags are parsed or when the scenario starts.
func TestBalancerScenariosBadInput(t *testing.T) {
	tests := []struct {
		scenario string
		args     []string
		flag     string
	}{
		{"smooth-wrr", []string{"--picks", "0"}, "picks"},
		{"smooth-wrr", []string{"--picks", "10001"}, "picks"},
		{"smooth-wrr", []string{"--weights", "3,-1"}, "weights"},
		{"smooth-wrr", []string{"--weights", "1001"}, "weights"},
		{"smooth-wrr", []string{"--weights", "0,0,0"}, "weights"},
		{"smooth-wrr", []string{"--weights", "1,x"}, "weights"},
		{"smooth-wrr", []string{"--weights", strings.Repeat("1,", 26) + "1"}, "weights"},
		{"lb-algorithms", []string{"--requests", "0"}, "requests"},
		{"lb-algorithms", []string{"--requests", "5000001"}, "requests"},
		{"lb-algorithms", []string{"--requests", "1000000", "--speeds", strings.Repeat("1,", 200) + "1"}, "requests"},
		{"lb-algorithms", []string{"--speeds", strings.Repeat("1,", 1000) + "1", "--requests", "10"}, "speeds"},
		{"lb-algorithms", []string{"--speeds", "1,-2"}, "speeds"},
		{"lb-algorithms", []string{"--speeds", "1,1e-9"}, "speeds"},
		{"lb-algorithms", []string{"--rho", "0"}, "rho"},
		{"lb-algorithms", []string{"--rho", "1e-9"}, "rho"},
		{"lb-algorithms", []string{"--rho", "NaN"}, "rho"},
		{"lb-algorithms", []string{"--stale", "-1"}, "stale"},
		{"lb-algorithms", []string{"--trace-seed", "-1"}, "trace-seed"},
		{"balls-into-bins", []string{"--n", "1"}, "n"},
		{"balls-into-bins", []string{"--n", "0"}, "n"},
		{"balls-into-bins", []string{"--n", "10000001"}, "n"},
		{"balls-into-bins", []string{"--n", strings.Repeat("10000000,", 10) + "1000"}, "n"},
		{"balls-into-bins", []string{"--n", strings.Repeat("2,", 100) + "2"}, "n"},
		{"balls-into-bins", []string{"--seed", "4294967296"}, "seed"},
	}
	for _, tc := range tests {
		name := tc.scenario + " " + strings.Join(tc.args, " ")
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			sc, _ := Lookup(tc.scenario)
			f := NewFlags(sc.Name)
			run := sc.Bind(f)
			if err := f.FlagSet().Parse(tc.args); err != nil {
				if !strings.Contains(err.Error(), "-"+tc.flag) {
					t.Errorf("parse error %q does not name --%s", err, tc.flag)
				}
				return
			}
			rep, err := run()
			if err == nil {
				t.Fatalf("accepted; printed:\n%s", rep.Text.String())
			}
			if u, ok := err.(*UsageError); !ok || u.Flag != tc.flag {
				t.Errorf("err = %#v, want a usage error for --%s", err, tc.flag)
			}
		})
	}
}

// The JSON tables carry the printed results as numbers, and the chart has a
// falling tail per algorithm, at the extremes of the accepted parameters too.
func TestLBAlgorithmsTablesAndChart(t *testing.T) {
	sc, _ := Lookup("lb-algorithms")
	for _, args := range [][]string{
		nil,
		{"--rho", "100", "--speeds", "0.001", "--requests", "2000"},
		{"--rho", "0.001", "--speeds", "1e6,0.001", "--requests", "2000", "--stale", "1e300"},
		{"--requests", "1"},
	} {
		rep := runDefaults(t, sc, args...)
		text := rep.Text.String()
		if strings.Contains(text, "NaN") || strings.Contains(text, "Infinity") {
			t.Errorf("%v printed a non-number:\n%s", args, text)
		}
		var algos *Table
		for _, tb := range rep.Tables {
			if tb.Name == "algorithms" {
				algos = tb
			}
		}
		if algos == nil || len(algos.Rows) != 6 || len(rep.Charts) != 1 || len(rep.Charts[0].Series) != 6 {
			t.Fatalf("%v: want 6 table rows and 6 chart series", args)
		}
		lines := strings.Split(text, "\n")
		for i, row := range algos.Rows {
			mean, p99 := row[1].(float64), row[2].(float64)
			if math.IsNaN(mean) || math.IsInf(p99, 0) || !strings.Contains(lines[2+i], Fixed(mean, 1)) {
				t.Errorf("%v: row %v does not match line %q", args, row, lines[2+i])
			}
		}
		for _, s := range rep.Charts[0].Series {
			if s.Y[0] != 100 {
				t.Errorf("%v %s: tail starts at %v%%, want 100%%", args, s.Name, s.Y[0])
			}
			for k := 1; k < len(s.X); k++ {
				if s.Y[k] >= s.Y[k-1] || s.X[k] < s.X[k-1] {
					t.Fatalf("%v %s: point %d (%v, %v) does not continue the tail", args, s.Name, k, s.X[k], s.Y[k])
				}
			}
		}
	}
}

// The trace is the picker's own state: the 20:20:1 row and the seed check are
// in the JSON tables too.
func TestSmoothWRRTables(t *testing.T) {
	sc, _ := Lookup("smooth-wrr")
	rep := runDefaults(t, sc)
	want := map[string]int{"trace": 7, "sequences": 2, "seed_vector": 1, "weights_20_20_1": 1}
	for _, tb := range rep.Tables {
		if len(tb.Rows) != want[tb.Name] {
			t.Errorf("table %s has %d rows, want %d", tb.Name, len(tb.Rows), want[tb.Name])
		}
		delete(want, tb.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing tables %v", want)
	}
	short := runDefaults(t, sc, "--picks", "3")
	if got := strings.Count(short.Text.String(), "pick "); got != 3 {
		t.Errorf("--picks 3 traced %d picks, want 3", got)
	}
}
