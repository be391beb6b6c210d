package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cartFile = "../../examples/gateway/cart.yaml"

// spillway sim config prints loadgen's table for the file's routes, the
// knee, and with --svg a chart of the policies' state.
func TestSimConfigCommand(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "state.svg")
	code, stdout, stderr := runCmd(t, "sim", "config", "../../examples/gateway/shedding.yaml", "--backend", "workers=4", "--rate", "20,60", "--svg", svg)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"shedding.yaml: simulated: every route; each endpoint 4 workers", "good/s", "p99.9 ms",
		"refused: sheddable admit:queue", "knee:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in:\n%s", want, stdout)
		}
	}
	data, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(data), "Admission: limit, in flight, queued") || !strings.Contains(string(data), "admit:queue") {
		t.Errorf("svg: %v, %d bytes", err, len(data))
	}
	// The same seed prints the same table.
	_, again, _ := runCmd(t, "sim", "config", "../../examples/gateway/shedding.yaml", "--backend", "workers=4", "--rate", "20,60")
	if again != stdout {
		t.Errorf("two runs differ:\n%s\n%s", stdout, again)
	}
}

// Bad flags exit 2 and name every bad one; so does a missing or bad file.
func TestSimConfigCommandErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"sim", "config"}, []string{"a config file is needed"}},
		{[]string{"sim", "config", cartFile, "--rate", "x", "--backend", "dist=pareto", "--retry", "often", "--clients", "0"},
			[]string{"--rate: ", "--backend: backend: dist \"pareto\"", "--retry: want none, immediate", "--clients: want 1 to"}},
		{[]string{"sim", "config", cartFile, "--schedule", "30s-10s:5"}, []string{"--schedule: ", "is empty"}},
		{[]string{"sim", "config", cartFile, "--route", "nope"}, []string{`--route "nope": no such route`}},
		{[]string{"sim", "config", cartFile, "--nope"}, []string{"unknown flag --nope"}},
		{[]string{"sim", "config", "no-such-file.yaml"}, []string{"no-such-file.yaml"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(t, c.args...)
		if code != 2 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, want 2 and none", c.args, code, stdout)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q, want %q", c.args, stderr, w)
			}
		}
	}
}
