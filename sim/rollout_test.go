package sim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rolloutRun runs the rollout scenario with args.
func rolloutRun(t *testing.T, args ...string) (*Report, error) {
	t.Helper()
	f := NewFlags("rollout")
	run := rollout.Bind(f)
	if err := f.FlagSet().Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return run()
}

func rolloutOK(t *testing.T, args ...string) *Report {
	t.Helper()
	r, err := rolloutRun(t, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

// rolloutRows is table name's rows.
func rolloutRows(t *testing.T, r *Report, name string) [][]any {
	t.Helper()
	for _, tb := range r.Tables {
		if tb.Name == name {
			return tb.Rows
		}
	}
	t.Fatalf("no table %q", name)
	return nil
}

// Seed 001's numbers: 10 servers at 70%, one out → 7 ÷ 9 = 77.8%, two
// out → 7 ÷ 8 = 87.5%.
func TestRolloutSeedNumbers(t *testing.T) {
	for _, c := range []struct {
		k    int
		want float64
	}{{0, 0.7}, {1, 7.0 / 9}, {2, 0.875}, {10, math.Inf(1)}} {
		if got := RestUtilisation(0.7, 10, c.k); math.Abs(got-c.want) > 1e-12 && got != c.want {
			t.Errorf("RestUtilisation(0.7, 10, %d) = %v, want %v", c.k, got, c.want)
		}
	}
	r := rolloutOK(t)
	for _, want := range []string{"  1        9             77.8%\n", "  2        8             87.5%\n"} {
		if !strings.Contains(r.Text.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, r.Text.String())
		}
	}
	if strings.Contains(r.Text.String(), "WARNING") {
		t.Errorf("a warning without --knee-util:\n%s", r.Text.String())
	}
}

// --knee-util 0.85: two out (87.5%) is above it, one out (77.8%) is not;
// three out of 10 at 70% is exactly 100%: over capacity.
func TestRolloutKneeWarning(t *testing.T) {
	r := rolloutOK(t, "--knee-util", "0.85", "--out", "3")
	lines := strings.Split(r.Text.String(), "\n")
	for _, c := range []struct {
		prefix, want string
	}{{"  1 ", ""}, {"  2 ", "WARNING: above the knee (85.0%)"}, {"  3 ", "OVER CAPACITY"}} {
		line := ""
		for _, l := range lines {
			if strings.HasPrefix(l, c.prefix) {
				line = l
			}
		}
		if c.want == "" && strings.Contains(line, "WARNING") || !strings.Contains(line, c.want) {
			t.Errorf("row %q: want %q", line, c.want)
		}
	}
	rows := rolloutRows(t, r, "utilisation")
	if rows[2][3] != true || rows[1][3] != false || rows[3][4] != true {
		t.Errorf("above_knee / over_capacity columns: %v", rows)
	}
}

// Kubernetes' defaults of 25% each on 10 pods: maxSurge rounds up to 3,
// maxUnavailable down to 2; 8 serving at worst, 87.5%.
func TestRolloutKubernetes(t *testing.T) {
	r := rolloutOK(t, "--max-surge", "25%")
	if !strings.Contains(r.Text.String(), "maxSurge 25% = 3, maxUnavailable 25% = 2: at most 13 pods, at least 8 serving") {
		t.Errorf("output:\n%s", r.Text.String())
	}
	rows := rolloutRows(t, r, "utilisation")
	if len(rows) != 2 || rows[1][0] != 2 || rows[1][2] != 0.875 {
		t.Errorf("rows %v, want k=0 and k=2 at 0.875", rows)
	}
	// maxUnavailable 0 with a surge: no capacity lost.
	rows = rolloutRows(t, rolloutOK(t, "--max-unavailable", "0", "--max-surge", "1"), "utilisation")
	if rows[1][0] != 0 || rows[1][2] != 0.7 {
		t.Errorf("maxUnavailable 0: rows %v", rows)
	}
}

func writeRolloutConfig(t *testing.T, cluster string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gw.yaml")
	data := "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters:\n" + cluster
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A cluster of 4 equal endpoints, checked every 2 s (timeout 1 s, fall 3,
// rise 2), restarted one at a time with 5 s of drain and 10 s of restart:
// 4 batches × (5 + 10 + 2 × 2) = 76 s. Detection 3 × 2 + 1 = 7 s at worst,
// 2/2 + 2 × 2 + 1 = 6 s on average; at 100 req/s a batch (a quarter of the
// traffic) fails 100 × 0.25 × 7 = 175 requests, the rollout 100 × 7 = 700.
func TestRolloutRestartByHand(t *testing.T) {
	path := writeRolloutConfig(t, `  - name: app
    endpoints: ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"]
    health: {active: {interval: 2s, timeout: 1s, fall: 3, rise: 2}}
`)
	r := rolloutOK(t, "--config", path, "--out", "1", "--drain", "5", "--restart", "10", "--rate", "100")
	got := rolloutRows(t, r, "restart")[0]
	want := []any{"app", 4, 1, 4, 19.0, 76.0, 7.0, 6.0, 175.0, 700.0}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("restart column %d: got %v, want %v (row %v)", i, got[i], want[i], got)
		}
	}
	if !strings.Contains(r.Text.String(), "4 batches × (drain 5s + restart 10s + rise 2 × interval 2s) = 4 × 19s = 76s") {
		t.Errorf("output:\n%s", r.Text.String())
	}
}

// cart.yaml's weights 100, 100, 50, 100 (350): one heaviest out leaves
// 250, so 60% becomes 60 × 350 ÷ 250 = 84%; that batch carries 100/350 of
// the traffic: 100 × 100/350 × 7 = 200 requests.
func TestRolloutWeightedCart(t *testing.T) {
	r := rolloutOK(t, "--config", filepath.Join("..", "examples", "gateway", "cart.yaml"), "--out", "1", "--util", "0.6")
	if !strings.Contains(r.Text.String(), "  1        3             84.0%") {
		t.Errorf("output:\n%s", r.Text.String())
	}
	got := rolloutRows(t, r, "restart")[0]
	if got[0] != "cart" || math.Abs(got[8].(float64)-200) > 1e-9 || got[9] != 700.0 {
		t.Errorf("restart row %v: want cart, 200 a batch, 700 in all", got)
	}
}

// Without active checks: outlier detection's 5 failures an endpoint (20 for
// 4), or with nothing at all the endpoint's share for the whole restart,
// 100 × 0.25 × 10 = 250 a batch and 100 × 10 = 1000 in all.
func TestRolloutWithoutActiveChecks(t *testing.T) {
	eps := "    endpoints: [\"10.0.0.1:80\", \"10.0.0.2:80\", \"10.0.0.3:80\", \"10.0.0.4:80\"]\n"
	outlier := writeRolloutConfig(t, "  - name: app\n"+eps+"    health: {outlier: {consecutive_gateway_failure: 5}}\n")
	got := rolloutRows(t, rolloutOK(t, "--config", outlier, "--out", "1"), "restart")[0]
	if got[4] != 15.0 || got[8] != 5.0 || got[9] != 20.0 {
		t.Errorf("outlier: row %v, want 15 s a batch, 5 and 20 failed", got)
	}
	none := writeRolloutConfig(t, "  - name: app\n"+eps)
	got = rolloutRows(t, rolloutOK(t, "--config", none, "--out", "1", "--restart", "10"), "restart")[0]
	if got[8] != 250.0 || got[9] != 1000.0 {
		t.Errorf("no checks: row %v, want 250 and 1000 failed", got)
	}
}

func TestRolloutUsageErrors(t *testing.T) {
	two := writeRolloutConfig(t, "  - {name: app, endpoints: [\"10.0.0.1:80\"]}\n  - {name: other, endpoints: [\"10.0.0.2:80\"]}\n")
	for _, c := range []struct {
		args []string
		flag string
		want string
	}{
		{[]string{"--cluster", "app"}, "cluster", "needs --config"},
		{[]string{"--rate", "5"}, "rate", "needs --config"},
		{[]string{"--out", "1", "--max-surge", "1"}, "out", "either --out or --max-surge"},
		{[]string{"--max-surge", "0", "--max-unavailable", "0"}, "max-unavailable", "may not be 0"},
		{[]string{"--config", "/nonexistent.yaml"}, "config", "nonexistent"},
		{[]string{"--config", two}, "cluster", "has 2 clusters: name one (app, other)"},
		{[]string{"--config", two, "--cluster", "nope"}, "cluster", `no cluster "nope" (it has app, other)`},
		{[]string{"--config", two, "--cluster", "app", "--servers", "3"}, "servers", "lists 1 endpoints"},
	} {
		_, err := rolloutRun(t, c.args...)
		u, ok := err.(*UsageError)
		if !ok || u.Flag != c.flag || !strings.Contains(u.Msg, c.want) || strings.Contains(u.Error(), "\n") {
			t.Errorf("%v: %v, want a one-line usage error of --%s with %q", c.args, err, c.flag, c.want)
		}
	}
	var v kubeValue
	for _, bad := range []string{"x", "-1", "120%"} {
		if v.Set(bad) == nil {
			t.Errorf("--max-surge %s accepted", bad)
		}
	}
}
