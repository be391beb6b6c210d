package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// reportSteps are two hand-made steps: a clean one, and one past the
// knee that is also invalid and met refusals.
func reportSteps() []StepResult {
	clean := StepResult{Index: 0, Rate: 100, Duration: 10 * time.Second, Elapsed: 10 * time.Second,
		Offered: 1000, Sent: 1000, OK: 1000, Good: 1000, Throughput: 100, Goodput: 100,
		Latency:     Quantiles{P50: 50 * ms, P90: 51200 * time.Microsecond, P99: 52 * ms, P999: 55 * ms, Max: 60 * ms},
		GoodLatency: Quantiles{P99: 52 * ms},
		SendLag:     Quantiles{P99: 300 * time.Microsecond},
		Statuses:    map[int]int{200: 1000},
		Classes:     map[string]ClassResult{"": {Offered: 1000, Good: 1000}}}
	hot := StepResult{Index: 1, Rate: 250, Duration: 10 * time.Second, Elapsed: 10 * time.Second,
		Offered: 2500, Sent: 2497, Unsent: 3, OK: 2000, Good: 1985, Failed: 515, Timeouts: 40, Retries: 7, Attempts: 2504,
		Throughput: 200, Goodput: 198.5,
		Latency:     Quantiles{P50: 61 * ms, P90: 480 * ms, P99: 1000 * ms, P999: 1000 * ms, Max: 1000 * ms},
		GoodLatency: Quantiles{P99: 700 * ms},
		SendLag:     Quantiles{P99: 7500 * time.Microsecond},
		Invalid:     true,
		Statuses:    map[int]int{200: 2000, 503: 460, 0: 40},
		Refusals: map[string]map[string]int{
			"sheddable": {"admit:queue": 310, "ratelimit": 20, "a": 20, "b": 1, "c": 1},
			"critical":  {"admit:queue": 2},
		},
		Classes: map[string]ClassResult{"critical": {Offered: 750, Good: 748}, "sheddable": {Offered: 1750, Good: 1237}}}
	return []StepResult{clean, hot}
}

func reportKnee() *Knee {
	probe := StepResult{Index: 2, Rate: 175, Offered: 1750, Sent: 1750, OK: 1750, Good: 1750, Goodput: 175, Throughput: 175,
		Latency: Quantiles{P50: 50 * ms, P90: 52 * ms, P99: 60 * ms, P999: 62 * ms}}
	return &Knee{Rate: 175, Safe: 157.5, Fail: 250, FailReason: "invalid (send lag p99 7.5ms)", BaseP99: 52 * ms, Probes: []StepResult{probe}}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, Result{Steps: reportSteps(), Aborted: "errors 20% over 5s, above 10%"}, reportKnee()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		" step   rate/s  offered   good/s    thr/s   p50 ms   p90 ms   p99 ms p99.9 ms  errors  unsent retries  notes",
		"    1      100     1000    100.0    100.0     50.0     51.2     52.0     55.0   0.00%       0       0",
		"    2      250     2500    198.5    200.0     61.0      480     1000     1000  20.00%       3       7  INVALID (send lag p99 7.50 ms); refused: critical admit:queue 2; sheddable admit:queue 310, a 20, ratelimit 20, 2 more",
		"bisection:",
		"   b1      175     1750    175.0    175.0     50.0     52.0     60.0     62.0   0.00%       0       0",
		"knee: 175 req/s, safe rate 157.5 req/s (250 req/s failed: invalid (send lag p99 7.5ms))",
		"aborted: errors 20% over 5s, above 10%",
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), b.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, got[i], want[i])
		}
	}
}

func TestKneeLine(t *testing.T) {
	for _, c := range []struct {
		k    Knee
		want string
	}{
		{Knee{Rate: 300, Safe: 270, Bounded: true}, "knee: at least 300 req/s (safe rate 270 req/s): every trusted step passed; ramp higher to find it"},
		{Knee{Fail: 100, FailReason: "errors 5.00% above 1.00%"}, "knee: none found: the lowest trusted step, 100 req/s, already failed (errors 5.00% above 1.00%)"},
		{Knee{}, "knee: none found: no step could be trusted"},
		{Knee{Rate: 212.5, Safe: 191.25, Fail: 218.75}, "knee: 212.5 req/s, safe rate 191.3 req/s (218.8 req/s failed)"},
	} {
		if got := KneeLine(c.k); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

func TestWriteJSONL(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSONL(&b, Result{Steps: reportSteps()}, reportKnee()); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d: %v: %s", len(lines)+1, err, sc.Text())
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 2 steps, 1 probe, 1 summary", len(lines))
	}
	hot := lines[1]
	checks := map[string]any{
		"type": "step", "index": 1.0, "rate": 250.0, "duration_ms": 10000.0, "offered": 2500.0, "unsent": 3.0, "ok": 2000.0,
		"good": 1985.0, "retries": 7.0, "attempts": 2504.0, "goodput": 198.5, "error_rate": 0.2, "good_share": 0.794, "invalid": true, "partial": false,
	}
	for k, v := range checks {
		if hot[k] != v {
			t.Errorf("step 2: %s = %v, want %v", k, hot[k], v)
		}
	}
	if p99 := hot["latency_ms"].(map[string]any)["p99"]; p99 != 1000.0 {
		t.Errorf("latency_ms.p99 = %v, want 1000", p99)
	}
	if lag := hot["send_lag_ms"].(map[string]any)["p99"]; lag != 7.5 {
		t.Errorf("send_lag_ms.p99 = %v, want 7.5", lag)
	}
	if n := hot["statuses"].(map[string]any)["503"]; n != 460.0 {
		t.Errorf("statuses.503 = %v, want 460", n)
	}
	if n := hot["refusals"].(map[string]any)["sheddable"].(map[string]any)["admit:queue"]; n != 310.0 {
		t.Errorf("refusals.sheddable.admit:queue = %v, want 310", n)
	}
	if c := hot["classes"].(map[string]any)["critical"].(map[string]any); c["offered"] != 750.0 || c["good"] != 748.0 {
		t.Errorf("classes.critical = %v", c)
	}
	if lines[2]["type"] != "probe" || lines[2]["rate"] != 175.0 {
		t.Errorf("probe line: %v", lines[2])
	}
	sum := lines[3]
	if sum["type"] != "summary" || sum["steps"] != 2.0 || sum["probes"] != 1.0 || sum["offered"] != 3500.0 || sum["good"] != 2985.0 || sum["aborted"] != "" {
		t.Errorf("summary: %v", sum)
	}
	if k := sum["knee"].(map[string]any); k["rate"] != 175.0 || k["safe"] != 157.5 || k["fail"] != 250.0 || k["base_p99_ms"] != 52.0 || k["bounded"] != false {
		t.Errorf("summary knee: %v", k)
	}
}

func TestWriteJSONLNoKnee(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSONL(&b, Result{Steps: reportSteps()[:1], Aborted: "stop"}, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"knee":null`) || !strings.Contains(lines[1], `"aborted":"stop"`) {
		t.Errorf("got:\n%s", b.String())
	}
}

func TestWriteSVG(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, Result{Steps: reportSteps()}, reportKnee()); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
	}
	for _, want := range []string{"goodput (invalid)", "p99, every call", "knee 175", "offered"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if err := WriteSVG(io.Discard, Result{}, nil); err != nil {
		t.Errorf("no steps: %v", err)
	}
}

func TestProgressWriter(t *testing.T) {
	p := Progress{Step: 1, Rate: 200, Elapsed: 3 * time.Second, Sent: 600, Unsent: 2, InFlight: 11, Goodput: 198.3,
		P99: 54200 * time.Microsecond, ErrorRate: 0.004, SendLagP99: 250 * time.Microsecond}
	line := "step 2/5  rate 200/s   3.0s  good 198.3/s  p99 54.2 ms  errors 0.4%  unsent 2  in flight 11  send lag p99 0.25 ms"
	var plain bytes.Buffer
	pw := NewProgressWriter(&plain, false, 5)
	pw.Report(p)
	pw.Report(p)
	pw.Clear()
	if want := line + "\n" + line + "\n"; plain.String() != want {
		t.Errorf("plain:\n got %q\nwant %q", plain.String(), want)
	}
	var tty bytes.Buffer
	pw = NewProgressWriter(&tty, true, 5)
	pw.Report(p)
	pw.Report(p)
	pw.Println("step 2 done")
	pw.Clear() // nothing left to erase
	if want := "\r\x1b[2K" + line + "\r\x1b[2K" + line + "\r\x1b[2Kstep 2 done\n"; tty.String() != want {
		t.Errorf("tty:\n got %q\nwant %q", tty.String(), want)
	}
	var labelled bytes.Buffer
	pw = NewProgressWriter(&labelled, false, 5)
	pw.SetLabel("probe 2")
	pw.Report(p)
	if want := "probe 2  rate 200/s" + strings.TrimPrefix(line, "step 2/5  rate 200/s") + "\n"; labelled.String() != want {
		t.Errorf("labelled:\n got %q\nwant %q", labelled.String(), want)
	}
	if got := ProgressLine(Progress{Step: 0, Rate: 50}, 0); !strings.HasPrefix(got, "step 1  rate 50/s") {
		t.Errorf("unknown step count: %q", got)
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "progress")
	if err != nil {
		t.Fatal(err)
	}
	if IsTerminal(f) {
		t.Error("a regular file is a terminal")
	}
}
