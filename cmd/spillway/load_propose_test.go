package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/loadgen"
)

// --propose against the backend: the table, then a configuration that the
// gateway's own loader (what spillway validate runs) accepts as printed,
// with the rate limit 10% below the knee, halved for two replicas. The
// ramp (20 and 40 req/s on a backend of 4 workers × 20 ms, 200 req/s) stays
// far below capacity, so the knee is the ramp's top, 40: 0.9 × 40 ÷ 2 = 18
// per gateway. (The service time is 20 ms, not less, so that the lowest
// step's p99 is not a few milliseconds a busy machine's scheduling can
// triple: that failed the knee's p99 test under scripts/stress.)
func TestLoadPropose(t *testing.T) {
	b := startBackend(t, "--workers", "4", "--service", "20ms")
	code, stdout, stderr := loadRun(t, context.Background(), "--url", "http://"+b.addr+"/x", "--rate", "20,40", "--step", "1s",
		// A busy machine's send lag would make the steps untrusted, which
		// is not what this test checks (scripts/stress saw a p99 of 107 ms
		// in a 1 s step); latency counts from the intended send anyway.
		"--max-send-lag", "1s",
		"--quiet", "--propose", "--replicas", "2", "--route", "orders")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	table, yaml, ok := strings.Cut(stdout, "\n# Proposed by spillway load --propose")
	if !ok || !strings.Contains(table, "knee: at least 40 req/s") {
		t.Fatalf("want the table with the knee, then the proposal:\n%s", stdout)
	}
	yaml = "# Proposed" + yaml
	cfg, err := config.Parse("proposed.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("the proposal is not a valid config: %v\n%s", err, yaml)
	}
	r, cl := cfg.Routes[0], cfg.Clusters[0]
	rules := r.Policies.RateLimit.RuleSet().Rules
	if r.Name != "orders" || cl.Endpoints[0].Address != b.addr || len(rules) != 1 || rules[0].Spec.Rate != 18 {
		t.Errorf("route %s, endpoint %s, rules %+v: want orders, %s and one rule of 18/s", r.Name, cl.Endpoints[0].Address, rules, b.addr)
	}
	if !strings.Contains(yaml, "did not reach the knee") || !strings.Contains(yaml, "per gateway instance (memory store, 2 replicas)") {
		t.Errorf("the proposal does not say the knee is a lower bound or that the limit is per gateway:\n%s", yaml)
	}
	// To a file, with JSON lines on stdout.
	file := filepath.Join(t.TempDir(), "p.yaml")
	code, stdout, stderr = loadRun(t, context.Background(), "--url", "http://"+b.addr+"/", "--rate", "20", "--step", "1s",
		"--max-send-lag", "1s", "--quiet", "--propose", "--output", "json", "--propose-file", file)
	data, err := os.ReadFile(file)
	if code != 0 || err != nil || strings.Contains(stdout, "# Proposed") {
		t.Fatalf("exit %d, %v, stderr %q; stdout %q", code, err, stderr, stdout)
	}
	jsonLines(t, stdout)
	if _, err := config.Parse(file, data); err != nil {
		t.Errorf("--propose-file: %v", err)
	}
}

func TestLoadProposeUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--replicas", "2"}, "--replicas: needs --propose"},
		{[]string{"--route", "x"}, "--route: needs --propose"},
		{[]string{"--redis", "127.0.0.1:6379"}, "--redis: needs --propose"},
		{[]string{"--propose-file", "p.yaml"}, "--propose-file: needs --propose"},
		{[]string{"--propose", "--replicas", "0"}, "--replicas: must be at least 1"},
		{[]string{"--propose", "--route", "a b"}, "--propose: propose: route: want"},
		{[]string{"--propose", "--redis", "nohost"}, "--propose: propose: redis: want host:port"},
		{[]string{"--propose", "--output", "json"}, "with --output json, write the config to --propose-file"},
	} {
		args := append([]string{"load", "--rate", "10", "--url", "http://x/"}, c.args...)
		code, stdout, stderr := runCmd(t, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line with %q", c.args, code, stdout, stderr, c.want)
		}
	}
	// Targets on two services cannot share one cluster.
	dir := t.TempDir()
	targets := filepath.Join(dir, "t.txt")
	os.WriteFile(targets, []byte("GET http://127.0.0.1:1/a\n\nGET http://127.0.0.1:2/b\n"), 0o600)
	code, _, stderr := runCmd(t, "load", "--rate", "10", "--targets", targets, "--propose")
	if code != 2 || !strings.Contains(stderr, "the targets go to 127.0.0.1:1 and 127.0.0.1:2") {
		t.Errorf("two services: exit %d, stderr %q", code, stderr)
	}
}

// proposeEndpoint takes the scheme's port when the URL has none.
func TestProposeEndpoint(t *testing.T) {
	for _, c := range []struct {
		url, ep string
		tls     bool
	}{
		{"http://example.com/x", "example.com:80", false},
		{"https://example.com/x", "example.com:443", true},
		{"http://[::1]:9001/", "[::1]:9001", false},
	} {
		ep, tls, err := proposeEndpoint([]loadgen.Target{{URL: c.url}})
		if err != nil || ep != c.ep || tls != c.tls {
			t.Errorf("%s: %s %v %v, want %s %v", c.url, ep, tls, err, c.ep, c.tls)
		}
	}
}
