package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/sim"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// A bad argument gets exit status 2 and exactly one line on stderr naming
// the flag (or the scenario) and the problem.
func TestBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sim", "no-such-scenario"}, `unknown scenario "no-such-scenario"`},
		{[]string{"sim", "codel", "--limit", "-3"}, "--limit: must be greater than 0"},
		{[]string{"sim", "codel", "--service", "0"}, "--service: must be greater than 0"},
		{[]string{"sim", "codel", "--target", "abc"}, "--target: not a number"},
		{[]string{"sim", "overload-policies", "--loads", "50,x,100"}, "--loads: item 2"},
		{[]string{"sim", "overload-policies", "--duration", "-1"}, "--duration: must be greater than 0"},
		{[]string{"sim", "overload-policies", "--critical", "1.5"}, "--critical: must be between 0 and 1"},
		{[]string{"sim", "token-vs-leaky", "--rate", "0"}, "--rate: must be greater than 0"},
		{[]string{"sim", "retry-storm", "--capacity", "-5"}, "--capacity: must be greater than 0"},
		{[]string{"sim", "lb-algorithms", "--speeds", "1,,2"}, "--speeds: item 2"},
		{[]string{"sim", "smooth-wrr", "--weights", "5;1"}, "--weights: item 1"},
		{[]string{"sim", "windows", "--window", "0"}, "--window: must be greater than 0"},
		{[]string{"sim", "health-check-timing", "--servers", "2.5"}, "--servers: not a whole number"},
		{[]string{"sim", "circuit-breaker", "--nope", "1"}, "unknown flag --nope"},
		{[]string{"sim", "codel", "--seed"}, "--seed: needs a value"},
		{[]string{"sim", "codel", "--format", "xml"}, "--format: must be text or json"},
		{[]string{"sim", "smooth-wrr", "--svg", "x.svg"}, "unknown flag --svg"},
		{[]string{"sim", "codel", "extra"}, `unexpected argument "extra"`},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"sim", "--format", "json", "overload-policies"},
			"flags go after the scenario: spillway sim overload-policies --format json"},
		{[]string{"sim", "--format", "json"}, "flags go after the scenario: spillway sim SCENARIO --format json"},
		{[]string{"sim", "--seed-text", "circuit-breaker"}, "spillway sim circuit-breaker --seed-text"},
		{[]string{"sim", "overload-policies", "--duration", "1e308"}, "overload-policies: --duration: load 50 × duration 1e+308"},
		{[]string{"sim", "adaptive", "--duration", "3600"}, "adaptive: --duration: --load × capacity × --duration"},
		{[]string{"sim", "codel", "--base-rate", "1e9"}, "codel: --base-rate: --base-rate 1000000000 × --end 12"},
		{[]string{"sim", "retry-storm", "--end", "36000"}, "retry-storm: --end: --new × --end"},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(t, c.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", c.args, code, stderr)
		}
		if stdout != "" {
			t.Errorf("%v: wrote %q to stdout", c.args, stdout)
		}
		if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: stderr %q, want one line containing %q", c.args, stderr, c.want)
		}
	}
}

// circuit-breaker speaks English by default; --seed-text prints the
// reference's own text (its golden files are checked in package sim).
func TestCircuitBreakerText(t *testing.T) {
	seed, err := os.ReadFile(filepath.Join("..", "..", "sim", "testdata", "circuit_breaker.out"))
	if err != nil {
		t.Fatal(err)
	}
	english, err := os.ReadFile(filepath.Join("..", "..", "sim", "testdata", "circuit_breaker_en.out"))
	if err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCmd(t, "sim", "circuit-breaker"); code != 0 || stdout != string(english) {
		t.Errorf("sim circuit-breaker: exit %d, stderr %q, output\n%s", code, stderr, stdout)
	}
	if code, stdout, stderr := runCmd(t, "sim", "circuit-breaker", "--seed-text"); code != 0 || stdout != string(seed) {
		t.Errorf("sim circuit-breaker --seed-text: exit %d, stderr %q, output\n%s", code, stderr, stdout)
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := runCmd(t, "sim", "-h")
	if code != 0 || !strings.Contains(stdout, "retry-storm") {
		t.Errorf("sim -h: exit %d, output %q", code, stdout)
	}
	code, stdout, _ = runCmd(t, "sim", "codel", "-h")
	if code != 0 || !strings.Contains(stdout, "-interval") || !strings.Contains(stdout, "-svg") {
		t.Errorf("sim codel -h: exit %d, output %q", code, stdout)
	}
	if code, _, stderr := runCmd(t); code != 2 || !strings.Contains(stderr, "Usage") {
		t.Errorf("no arguments: exit %d, stderr %q", code, stderr)
	}
}

// sim all prints every scenario's default output under a header: the
// reference output itself (scenarios without a reference experiment, Ref "",
// are not compared), or for a scenario whose defaults differ from it (its
// RefArgs) what "spillway sim NAME" prints, with a header naming the flags
// that give the reference.
func TestSimAll(t *testing.T) {
	code, stdout, stderr := runCmd(t, "sim", "all")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sections := strings.Split(stdout, "=== ")[1:]
	if len(sections) != len(sim.Scenarios()) {
		t.Fatalf("%d sections, want %d", len(sections), len(sim.Scenarios()))
	}
	for i, sc := range sim.Scenarios() {
		if sc.Ref == "" { // no reference experiment to compare with
			continue
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "sim", "testdata", sc.Ref+".out"))
		if err != nil {
			t.Fatal(err)
		}
		header := sc.Name + " (reference: " + sc.Ref + ".out)\n"
		if sc.RefArgs != nil {
			header = sc.Name + " (reference: " + sc.Ref + ".out with " + strings.Join(sc.RefArgs, " ") + ")\n"
			_, own, _ := runCmd(t, "sim", sc.Name)
			want = []byte(own)
		}
		body, ok := strings.CutPrefix(sections[i], header)
		if !ok {
			t.Errorf("section %d starts %q, want %q", i, sections[i][:min(len(sections[i]), 60)], header)
			continue
		}
		if i < len(sections)-1 {
			body = strings.TrimSuffix(body, "\n")
		}
		if body != string(want) {
			t.Errorf("%s: sim all output differs from the reference", sc.Name)
		}
	}
}

// --format json gives, for every scenario, tables whose rows carry every column.
func TestJSON(t *testing.T) {
	code, stdout, stderr := runCmd(t, "sim", "all", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var all []struct {
		Scenario string `json:"scenario"`
		Tables   []struct {
			Name string           `json:"name"`
			Rows []map[string]any `json:"rows"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(stdout), &all); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if len(all) != len(sim.Scenarios()) {
		t.Fatalf("%d scenarios in JSON, want %d", len(all), len(sim.Scenarios()))
	}
	for _, s := range all {
		rows := 0
		for _, tb := range s.Tables {
			rows += len(tb.Rows)
			for _, r := range tb.Rows {
				if len(r) == 0 {
					t.Errorf("%s/%s: empty row", s.Scenario, tb.Name)
				}
			}
		}
		if rows == 0 {
			t.Errorf("%s: no rows in JSON", s.Scenario)
		}
	}
}

// Every scenario that promises a chart writes a well-formed SVG with lines.
func TestSVG(t *testing.T) {
	dir := t.TempDir()
	var charts []string
	for _, sc := range sim.Scenarios() {
		if sc.Chart {
			charts = append(charts, sc.Name)
		}
	}
	for _, name := range []string{"overload-policies", "codel", "retry-storm", "lb-algorithms"} {
		if sc, _ := sim.Lookup(name); !sc.Chart {
			t.Errorf("%s does not offer --svg", name)
		}
	}
	for _, name := range charts {
		path := filepath.Join(dir, name+".svg")
		code, _, stderr := runCmd(t, "sim", name, "--svg", path)
		if code != 0 {
			t.Errorf("%s --svg: exit %d: %s", name, code, stderr)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			XMLName xml.Name
		}
		if err := xml.Unmarshal(data, &doc); err != nil || doc.XMLName.Local != "svg" {
			t.Errorf("%s: not an SVG document: %v", name, err)
		}
		if !bytes.Contains(data, []byte("<polyline")) {
			t.Errorf("%s: chart has no lines", name)
		}
	}
}

// Degenerate but valid parameters (every flag set to 1 in turn) never
// panic and never print NaN or Infinity; a refused combination is one line
// with exit status 2.
func TestDegenerateParameters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario once per flag")
	}
	for _, sc := range sim.Scenarios() {
		f := sim.NewFlags(sc.Name)
		sc.Bind(f)
		var names []string
		f.FlagSet().VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
		for _, name := range names {
			code, stdout, stderr := runCmd(t, "sim", sc.Name, "--"+name, "1")
			switch {
			case code == 2 && strings.Count(stderr, "\n") == 1:
			case code != 0:
				t.Errorf("%s --%s 1: exit %d: %s", sc.Name, name, code, stderr)
			case strings.Contains(stdout, "NaN") || strings.Contains(stdout, "Infinity"):
				t.Errorf("%s --%s 1: output has NaN or Infinity:\n%s", sc.Name, name, stdout)
			}
		}
	}
}
