package sim

import (
	"os"
	"strings"
	"testing"
)

// TestGolden runs every scenario with its default flags (and its RefArgs,
// when the defaults print something else) and compares the text with the
// reference script's output, copied into testdata/. A scenario without a
// reference experiment (Ref "") is skipped; its own tests check it.
func TestGolden(t *testing.T) {
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			if sc.Ref == "" {
				t.Skip("no reference experiment")
			}
			want, err := os.ReadFile("testdata/" + sc.Ref + ".out")
			if err != nil {
				t.Fatal(err)
			}
			rep := runDefaults(t, sc, sc.RefArgs...)
			if got := rep.Text.String(); got != string(want) {
				t.Errorf("output with %v differs from testdata/%s.out\n%s", sc.RefArgs, sc.Ref, diffLines(got, string(want)))
			}
		})
	}
}

func runDefaults(t *testing.T, sc Scenario, args ...string) *Report {
	t.Helper()
	f := NewFlags(sc.Name)
	run := sc.Bind(f)
	if err := f.FlagSet().Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	rep, err := run()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// diffLines shows the first lines where got and want differ.
func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl && shown < 8 {
			b.WriteString("line " + Int(i+1) + ":\n  got  " + gl + "\n  want " + wl + "\n")
			shown++
		}
	}
	return b.String()
}
