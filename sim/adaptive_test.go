package sim

import (
	"bytes"
	"strings"
	"testing"
)

// adaptiveResults runs the adaptive scenario with args and returns its
// results table rows by algorithm, and the report.
func adaptiveResults(t *testing.T, args ...string) (map[string][]any, *Report) {
	t.Helper()
	rep := runDefaults(t, adaptive, args...)
	rows := map[string][]any{}
	for _, tb := range rep.Tables {
		if tb.Name != "results" {
			continue
		}
		for _, row := range tb.Rows {
			rows[row[0].(string)] = row
		}
	}
	if len(rows) != 5 {
		t.Fatalf("results table has %d algorithms, want 5", len(rows))
	}
	return rows, rep
}

// Columns of the results table.
const (
	adColBefore   = 1
	adColDuring   = 2
	adColGoodput  = 4
	adColCritical = 6
)

func TestAdaptiveDeterministic(t *testing.T) {
	_, a := adaptiveResults(t, "--noise", "0.2")
	_, b := adaptiveResults(t, "--noise", "0.2")
	if a.Text.String() != b.Text.String() {
		t.Error("two runs with the same flags printed different text")
	}
	var ja, jb bytes.Buffer
	if err := a.WriteJSON(&ja, "adaptive"); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteJSON(&jb, "adaptive"); err != nil {
		t.Fatal(err)
	}
	if ja.String() != jb.String() {
		t.Error("two runs with the same flags gave different JSON")
	}
	if _, c := adaptiveResults(t, "--noise", "0.2", "--seed", "7"); c.Text.String() == a.Text.String() {
		t.Error("another seed gave the same text; the seed is not used")
	}
}

// With the defaults (C = 100, halved to 50 from 20 s to 40 s), Gradient's
// mean limit before the dip is within ±25% of C. During the dip the phase
// mean, which includes the fall from ≈125 in the first seconds, is 27%
// above C/2 (it settles near C/2 + √(C/2) + a little, as limit/doc.go
// says): the phase mean is held to +30%, and the settled 5 s buckets of the
// dip's second half to ±25%.
func TestAdaptiveGradientSettles(t *testing.T) {
	rows, rep := adaptiveResults(t)
	g := rows["gradient"]
	before, during := g[adColBefore].(float64), g[adColDuring].(float64)
	t.Logf("gradient: mean limit %.1f before the dip, %.1f during", before, during)
	if before < 75 || before > 125 {
		t.Errorf("mean limit before the dip %.1f, want within ±25%% of 100", before)
	}
	if during < 37.5 || during > 65 {
		t.Errorf("mean limit during the dip %.1f, want within [-25%%, +30%%] of 50", during)
	}
	var series *Table
	for _, tb := range rep.Tables {
		if tb.Name == "series_gradient" {
			series = tb
		}
	}
	if series == nil || len(series.Rows) != 12 {
		t.Fatalf("series_gradient table missing or not 12 rows")
	}
	for _, row := range series.Rows {
		at, lim := row[0].(float64), row[1].(float64)
		if at > 30 && at <= 40 && (lim < 37.5 || lim > 62.5) {
			t.Errorf("5 s ending at %v s: mean limit %.1f, want within ±25%% of 50", at, lim)
		}
		if at > 50 && (lim < 75 || lim > 125) {
			t.Errorf("5 s ending at %v s: mean limit %.1f after the dip, want within ±25%% of 100", at, lim)
		}
	}
}

// At 2× load (no dip), Gradient answers ≥ 99% of critical requests in time
// and keeps goodput ≥ 90% of capacity; the fixed limit refuses no critical
// request but wastes the places it keeps for them.
func TestAdaptiveCriticalAt2x(t *testing.T) {
	rows, _ := adaptiveResults(t, "--dip-from", "0", "--dip-to", "0")
	g := rows["gradient"]
	if c := g[adColCritical].(float64); c < 99 {
		t.Errorf("gradient critical ok %.2f%%, want ≥ 99%%", c)
	}
	if gp := g[adColGoodput].(float64); gp < 90 {
		t.Errorf("gradient goodput %.1f%%, want ≥ 90%%", gp)
	}
}

func TestAdaptiveUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--dip-from", "30", "--dip-to", "10"},
		{"--critical", "0.7", "--sheddable", "0.5"},
		{"--duration", "4000"},
		{"--load", "100"}, // 100 × 2500/s × 60 s = 1.5e7 arrivals
		{"--noise", "1000"},
	} {
		f := NewFlags("adaptive")
		run := adaptive.Bind(f)
		if err := f.FlagSet().Parse(args); err != nil {
			t.Errorf("%v: parse: %v", args, err)
			continue
		}
		if _, err := run(); !IsUsage(err) {
			t.Errorf("%v: got %v, want a *UsageError", args, err)
		}
	}
	for _, args := range [][]string{
		{"--concurrency", "0"}, {"--concurrency", "200000"}, {"--latency", "0"}, {"--timeout", "-1"},
		{"--critical", "1.5"}, {"--duration", "NaN"},
	} {
		f := NewFlags("adaptive")
		adaptive.Bind(f)
		if err := f.FlagSet().Parse(args); err == nil {
			t.Errorf("%v: parsed, want an error", args)
		}
	}
}

// Degenerate but accepted flags print no NaN or Infinity.
func TestAdaptiveDegenerate(t *testing.T) {
	for _, args := range [][]string{
		{"--critical", "0", "--sheddable", "0"},
		{"--critical", "1", "--sheddable", "0"},
		{"--timeout", "0.001"},
		{"--duration", "0.001"},
		{"--duration", "1e-9"},
		{"--concurrency", "1", "--latency", "100", "--load", "0.001"},
		{"--dip-from", "0", "--dip-to", "1000"},
		{"--dip-from", "1000", "--dip-to", "1000"},
		{"--duration", "3600", "--concurrency", "1", "--latency", "0.01"},
		{"--noise", "100", "--duration", "5"},
	} {
		rep := runDefaults(t, adaptive, args...)
		text := rep.Text.String()
		if strings.Contains(text, "NaN") || strings.Contains(text, "Inf") {
			t.Errorf("%v: output has NaN or Infinity:\n%s", args, text)
		}
		var js bytes.Buffer
		if err := rep.WriteJSON(&js, "adaptive"); err != nil {
			t.Errorf("%v: %v", args, err)
		}
		var svg bytes.Buffer
		if err := rep.WriteSVG(&svg); err != nil {
			t.Errorf("%v: svg: %v", args, err)
		}
	}
}
