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
	adColAfter    = 3
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
// mean limit before the dip is within ±25% of C.
//
// Where it settles: Gradient's fixed point is limit × (1 − gradient) =
// √limit, with gradient = RTT_noload ÷ RTT_actual and RTT_actual the p10
// of the last round trip's RTTs. At 2× load sheddable requests never get
// in, default ones fill up to their share, 0.9 × limit, and critical ones
// above it; the fastest tenth of the RTTs are those admitted at about
// 0.9 × limit in flight, L × 0.9 × limit ÷ C_now. So
// 0.9 × limit × (1 − 1/√limit) = C_now: limit ≈ 123 for C = 100 and ≈ 63.6
// (+27%) for C/2 = 50. The settled 5 s buckets (the dip's second half, and
// after the dip) are held to [−25%, +35%] of C_now, room for the spread of
// in-flight counts, and so is the dip's phase mean, which also includes the
// fall from ≈ 125 in its first seconds.
func TestAdaptiveGradientSettles(t *testing.T) {
	rows, rep := adaptiveResults(t)
	g := rows["gradient"]
	before, during := g[adColBefore].(float64), g[adColDuring].(float64)
	t.Logf("gradient: mean limit %.1f before the dip, %.1f during", before, during)
	if before < 75 || before > 125 {
		t.Errorf("mean limit before the dip %.1f, want within ±25%% of 100", before)
	}
	if during < 37.5 || during > 67.5 {
		t.Errorf("mean limit during the dip %.1f, want within [-25%%, +35%%] of 50", during)
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
		if at > 30 && at <= 40 && (lim < 37.5 || lim > 67.5) {
			t.Errorf("5 s ending at %v s: mean limit %.1f, want within [-25%%, +35%%] of 50", at, lim)
		}
		if at > 50 && (lim < 75 || lim > 135) {
			t.Errorf("5 s ending at %v s: mean limit %.1f after the dip, want within [-25%%, +35%%] of 100", at, lim)
		}
	}
}

// With latency noise (exponential, mean 0.5 × L and 1 × L added to every
// request), Gradient and Vegas still find the true concurrency: their mean
// limit before and after the dip within ±25% of C = 100 (the noise is
// service time every request may suffer, so the latency knee is still at C;
// the minimum RTT as the no-load RTT gave ≈ 14 and ≈ 44 at noise 0.5), and
// their goodput at least 80% of the fixed limit of C's. Noise makes every
// answer slower at any limit: at C in flight about C ÷ (L × (1 + noise))
// answers a second, 67% and 50% of capacity, which the fixed limit of C
// shows.
func TestAdaptiveNoise(t *testing.T) {
	for _, noise := range []string{"0.5", "1"} {
		rows, _ := adaptiveResults(t, "--noise", noise)
		fixedGood := rows["fixed"][adColGoodput].(float64)
		for _, name := range []string{"gradient", "vegas"} {
			r := rows[name]
			before, after, good := r[adColBefore].(float64), r[adColAfter].(float64), r[adColGoodput].(float64)
			t.Logf("noise %s, %s: mean limit %.1f before the dip, %.1f after; goodput %.1f%% (fixed limit %.1f%%)",
				noise, name, before, after, good, fixedGood)
			if before < 75 || before > 125 || after < 75 || after > 125 {
				t.Errorf("noise %s, %s: mean limit %.1f before and %.1f after the dip, want within ±25%% of 100",
					noise, name, before, after)
			}
			if good < 0.8*fixedGood {
				t.Errorf("noise %s, %s: goodput %.1f%%, want ≥ 80%% of the fixed limit's %.1f%%", noise, name, good, fixedGood)
			}
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
