package loadgen

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The outputs of a run: a table (WriteTable), JSON lines (WriteJSONL) and
// an SVG chart (WriteSVG, in svg.go). Each shows the run's steps, then the
// knee's bisection probes and confirmations when there is a knee, and says
// when the run was aborted.

// topReasons is how many refusal reasons a table row names per class.
const topReasons = 3

// WriteTable writes one line per step, numbered from 1 (and, when knee is
// not nil, per bisection probe, b1…, and per confirmation, c1…, its notes
// saying what it measured again and whether it passed): asked rate, arrivals offered, goodput and
// throughput per second, latency quantiles in milliseconds, errors, unsent,
// retries and notes — INVALID with the send lag p99 when the generator was
// late, partial when the run stopped during the step, and the refusals'
// top reasons by class. Then the knee, and why the run stopped early.
func WriteTable(w io.Writer, res Result, knee *Knee) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%5s %8s %8s %8s %8s %8s %8s %8s %8s %7s %7s %7s  %s\n",
		"step", "rate/s", "offered", "good/s", "thr/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "errors", "unsent", "retries", "notes")
	for _, s := range res.Steps {
		tableRow(&b, strconv.Itoa(s.Index+1), s, "")
	}
	if knee != nil && len(knee.Probes) > 0 {
		b.WriteString("bisection:\n")
		for i, s := range knee.Probes {
			tableRow(&b, "b"+strconv.Itoa(i+1), s, "")
		}
	}
	if knee != nil && len(knee.Confirmations) > 0 {
		b.WriteString("confirmations:\n")
		for i, cf := range knee.Confirmations {
			tableRow(&b, "c"+strconv.Itoa(i+1), cf.Step, confirmNote(cf))
		}
	}
	if knee != nil {
		b.WriteString(KneeLine(*knee) + "\n")
	}
	if res.Aborted != "" {
		fmt.Fprintf(&b, "aborted: %s\n", res.Aborted)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tableRow writes s's row, note first in its notes.
func tableRow(b *strings.Builder, label string, s StepResult, note string) {
	all := notes(s)
	if note != "" {
		all = strings.TrimSuffix(note+"; "+all, "; ")
	}
	row := fmt.Sprintf("%5s %8s %8d %8.1f %8.1f %8s %8s %8s %8s %6.2f%% %7d %7d  %s",
		label, formatRate(s.Rate), s.Offered, s.Goodput, s.Throughput,
		millis(s.Latency.P50), millis(s.Latency.P90), millis(s.Latency.P99), millis(s.Latency.P999),
		100*s.ErrorRate(), s.Unsent, s.Retries, all)
	b.WriteString(strings.TrimRight(row, " ") + "\n")
}

// notes is a row's last column.
func notes(s StepResult) string {
	var parts []string
	if s.Invalid {
		parts = append(parts, "INVALID (send lag p99 "+millis(s.SendLag.P99)+" ms)")
	}
	if s.Partial {
		parts = append(parts, "partial")
	}
	if r := refusalSummary(s.Refusals); r != "" {
		parts = append(parts, "refused: "+r)
	}
	return strings.Join(parts, "; ")
}

// confirmNote says what cf measured again and how it ended: "confirms
// step 2: passed (first: p99 229ms above 3 × 73ms)" or "confirms b3:
// failed too (p99 …)" (no reason when the row's notes give it: INVALID,
// partial).
func confirmNote(cf Confirmation) string {
	switch {
	case cf.Passed():
		return fmt.Sprintf("confirms %s: passed (first: %s)", cf.Of, cf.First)
	case !isTrusted(cf.Step) && cf.Step.Offered > 0:
		return fmt.Sprintf("confirms %s: failed too", cf.Of)
	}
	return fmt.Sprintf("confirms %s: failed too (%s)", cf.Of, cf.Reason)
}

// refusalSummary names each class's most frequent refusal reasons:
// "sheddable admit:queue 310, ratelimit 20; critical admit:queue 2",
// classes in order of name ("" is "(no class)").
func refusalSummary(ref map[string]map[string]int) string {
	var parts []string
	for _, class := range slices.Sorted(maps.Keys(ref)) {
		reasons := slices.SortedFunc(maps.Keys(ref[class]), func(a, b string) int {
			return cmp.Or(cmp.Compare(ref[class][b], ref[class][a]), cmp.Compare(a, b))
		})
		if len(reasons) == 0 {
			continue
		}
		var items []string
		for _, r := range reasons[:min(topReasons, len(reasons))] {
			items = append(items, fmt.Sprintf("%s %d", r, ref[class][r]))
		}
		if n := len(reasons) - topReasons; n > 0 {
			items = append(items, fmt.Sprintf("%d more", n))
		}
		name := class
		if name == "" {
			name = "(no class)"
		}
		parts = append(parts, name+" "+strings.Join(items, ", "))
	}
	return strings.Join(parts, "; ")
}

// KneeLine is a sentence about the knee: its rate and safe rate, or that
// the ramp did not reach it, or that none was found.
func KneeLine(k Knee) string {
	switch {
	case k.Rate <= 0 && k.Fail > 0:
		return fmt.Sprintf("knee: none found: the lowest trusted step, %s req/s, already failed (%s)", formatRate(k.Fail), k.FailReason)
	case k.Rate <= 0:
		return "knee: none found: no step could be trusted"
	case k.Bounded:
		return fmt.Sprintf("knee: at least %s req/s (safe rate %s req/s): every trusted step passed; ramp higher to find it",
			formatRate(k.Rate), formatRate(k.Safe))
	}
	line := fmt.Sprintf("knee: %s req/s, safe rate %s req/s (%s req/s failed", formatRate(k.Rate), formatRate(k.Safe), formatRate(k.Fail))
	if k.FailReason != "" {
		line += ": " + k.FailReason
	}
	return line + ")"
}

// millis formats d in milliseconds: two decimals below 10 ms, one below
// 100 ms, none above.
func millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64)
	case ms < 100:
		return strconv.FormatFloat(ms, 'f', 1, 64)
	}
	return strconv.FormatFloat(ms, 'f', 0, 64)
}

// formatRate formats a rate to at most one decimal.
func formatRate(r float64) string {
	return strconv.FormatFloat(math.Round(r*10)/10, 'f', -1, 64)
}
