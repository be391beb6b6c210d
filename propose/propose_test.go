package propose

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/loadgen"
)

func step(rate float64, p50, mean, p99 time.Duration) loadgen.StepResult {
	return loadgen.StepResult{Rate: rate, Offered: int(rate) * 10, Good: int(rate) * 10,
		Latency: loadgen.Quantiles{P50: p50, Mean: mean, P99: p99}}
}

// A ramp 50, 100, 200 passing and 250 failing: the knee is 200 req/s, with
// a service time of 10 ms at 50 req/s and, at 200, a mean of 50 ms and a
// p99 of 120 ms.
func ramp() (loadgen.Knee, []loadgen.StepResult) {
	steps := []loadgen.StepResult{
		step(100, 12*time.Millisecond, 13*time.Millisecond, 30*time.Millisecond),
		step(50, 10*time.Millisecond, 11*time.Millisecond, 25*time.Millisecond),
		step(200, 40*time.Millisecond, 50*time.Millisecond, 120*time.Millisecond),
		step(250, 400*time.Millisecond, 500*time.Millisecond, time.Second),
	}
	return loadgen.Knee{Rate: 200, Safe: 180, Fail: 250}, steps
}

// The numbers, computed by hand from the rules in the package comment.
func TestMakeByHand(t *testing.T) {
	k, steps := ramp()
	probeKnee := loadgen.Knee{Rate: 212.5, Fail: 225, Probes: []loadgen.StepResult{
		step(225, 90*time.Millisecond, 100*time.Millisecond, time.Second),
		step(212.5, 40*time.Millisecond, 48100*time.Microsecond, 123400*time.Microsecond)}}
	baseSteps := []loadgen.StepResult{step(50, 10200*time.Microsecond, 0, 0), step(200, 0, 0, 0)}
	// 200's first measurement stalled (mean 60 ms, p99 1 s); its
	// confirmation passed with the ramp's figures: the proposal takes those.
	stalled := append(steps[:2:2], step(200, 40*time.Millisecond, 60*time.Millisecond, time.Second), steps[3])
	confirmedKnee := loadgen.Knee{Rate: 200, Fail: 250, Confirmations: []loadgen.Confirmation{
		{Step: steps[2], Of: "step 3", First: "p99 1000ms above 3 × 25ms"},
		{Step: step(250, 0, 0, time.Second), Of: "step 4", First: "p99 1000ms above 3 × 25ms", Reason: "p99 1000ms above 3 × 25ms"}}}
	meanless := []loadgen.StepResult{step(50, 10*time.Millisecond, 0, 0), step(200, 40*time.Millisecond, 0, 90*time.Millisecond)}
	for _, c := range []struct {
		name     string
		k        loadgen.Knee
		steps    []loadgen.StepResult
		o        Options
		rate     float64
		global   bool
		conc     int
		wait     time.Duration
		timeout  time.Duration
		latency  string
		inFlight float64
	}{
		// 0.9 × 200 = 180/s; 200 × 50 ms = 10 in flight, 0.9 × 10 = 9;
		// 2 × 10 ms = 20 ms; 2 × 120 ms = 240 ms.
		{"one gateway", k, steps, Options{Endpoint: "127.0.0.1:9001"}, 180, false, 9, 20 * time.Millisecond, 240 * time.Millisecond, "mean", 10},
		// 180 ÷ 3 = 60/s each; ⌊9 ÷ 3⌋ = 3 each.
		{"three gateways, memory", k, steps, Options{Endpoint: "127.0.0.1:9001", Replicas: 3}, 60, false, 3, 20 * time.Millisecond, 240 * time.Millisecond, "mean", 10},
		// Redis: the rate is global, 180; admission still per gateway, 3.
		{"three gateways, redis", k, steps, Options{Endpoint: "127.0.0.1:9001", Replicas: 3, Redis: "127.0.0.1:6379"}, 180, true, 3, 20 * time.Millisecond, 240 * time.Millisecond, "mean", 10},
		// The knee from a probe: 0.9 × 212.5 = 191.25, ÷ 4 = 47.8125 → 47.8;
		// 212.5 × 48.1 ms = 10.22125, 0.9 × that ÷ 4 = 2.2998 → 2;
		// 2 × 10.2 ms = 20.4 → 21 ms; 2 × 123.4 ms = 246.8 → 250 ms.
		{"probed knee", probeKnee, baseSteps, Options{Endpoint: "10.0.0.1:80", Replicas: 4}, 47.8, false, 2, 21 * time.Millisecond, 250 * time.Millisecond, "mean", 10.22125},
		// The knee step is the passing confirmation: as "one gateway".
		{"confirmed knee", confirmedKnee, stalled, Options{Endpoint: "127.0.0.1:9001"}, 180, false, 9, 20 * time.Millisecond, 240 * time.Millisecond, "mean", 10},
		// No mean: the p50, 200 × 40 ms = 8 in flight, ⌊7.2⌋ = 7; 2 × 90 ms.
		{"p50 for want of a mean", k, meanless, Options{Endpoint: "127.0.0.1:9001"}, 180, false, 7, 20 * time.Millisecond, 180 * time.Millisecond, "p50", 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Make(c.k, c.steps, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if p.RateLimit != c.rate || p.Global != c.global || p.Concurrency != c.conc || p.MaxWait != c.wait ||
				p.Timeout != c.timeout || p.LatencyName != c.latency || !near(p.InFlight, c.inFlight) {
				t.Errorf("got rate %v global %v concurrency %d max_wait %v timeout %v latency %s in flight %v;\n"+
					"want %v %v %d %v %v %s %v", p.RateLimit, p.Global, p.Concurrency, p.MaxWait, p.Timeout, p.LatencyName,
					p.InFlight, c.rate, c.global, c.conc, c.wait, c.timeout, c.latency, c.inFlight)
			}
			parsed(t, p)
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// parsed checks that the YAML is a configuration the gateway's own loader
// accepts as it is, carrying the proposal's numbers where the gateway
// reads them.
func parsed(t *testing.T, p *Proposal) {
	t.Helper()
	y := p.YAML()
	cfg, err := config.Parse("proposed.yaml", []byte(y))
	if err != nil {
		t.Fatalf("config.Parse refuses the proposal: %v\n%s", err, y)
	}
	if len(cfg.Routes) != 1 || len(cfg.Clusters) != 1 {
		t.Fatalf("%d routes, %d clusters, want 1 and 1", len(cfg.Routes), len(cfg.Clusters))
	}
	r, cl := cfg.Routes[0], cfg.Clusters[0]
	rules := r.Policies.RateLimit.RuleSet().Rules
	a := cl.Admission
	switch {
	case r.Timeouts.Request.D() != p.Timeout:
		t.Errorf("timeouts.request %v, want %v", r.Timeouts.Request.D(), p.Timeout)
	case len(rules) != 1 || rules[0].Spec.Rate != p.RateLimit || rules[0].Spec.Per != 1 || len(rules[0].Key) != 0:
		t.Errorf("rules %+v, want one keyless rule of %v per second", rules, p.RateLimit)
	case a == nil || a.AlgorithmName != "fixed" || a.InitialLimit != p.Concurrency:
		t.Errorf("admission %+v, want fixed at %d", a, p.Concurrency)
	case a.Queue.Discipline != "fifo" || a.Queue.MaxWait.D() != p.MaxWait:
		t.Errorf("queue %+v, want fifo with max_wait %v", a.Queue, p.MaxWait)
	case a.Shares.Default != 1:
		t.Errorf("shares %+v, want default 1", a.Shares)
	case len(cl.Endpoints) != 1 || cl.Endpoints[0].Address != p.Endpoint:
		t.Errorf("endpoints %+v, want %s", cl.Endpoints, p.Endpoint)
	case (cfg.RateLimit.Store == "redis") != p.Global:
		t.Errorf("store %q with global %v", cfg.RateLimit.Store, p.Global)
	}
}

// The comments say which kind of limit each is and give the formula.
func TestYAMLComments(t *testing.T) {
	k, steps := ramp()
	p, err := Make(k, steps, Options{Endpoint: "127.0.0.1:9001", Replicas: 3, Route: "orders", Source: "http://127.0.0.1:9001/x"})
	if err != nil {
		t.Fatal(err)
	}
	y := p.YAML()
	for _, want := range []string{
		"for http://127.0.0.1:9001/x: knee 200 req/s",
		"safe rate = 0.9 × the knee = 0.9 × 200 = 180 req/s for the whole fleet",
		"per gateway instance (memory store, 3 replicas): 180 ÷ 3",
		"store: memory   # each gateway counts alone",
		"{id: orders-safe-rate, rate: 60, per: 1s}",
		"Little's law: in flight at the knee = knee rate × mean latency there = 200/s × 50ms = 10;",
		"⌊0.9 × 10 ÷ 3⌋ = 3.",
		"2 × the p99 at the knee (120ms)",
		"the p50 at the lowest step, 10ms,",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("proposal lacks %q:\n%s", want, y)
		}
	}
	if strings.Contains(y, "did not reach the knee") {
		t.Errorf("a bounded-knee warning on a knee that was found:\n%s", y)
	}
	k.Bounded = true
	p, _ = Make(k, steps, Options{Endpoint: "127.0.0.1:9001", TLS: true})
	y = p.YAML()
	if !strings.Contains(y, "did not reach the knee") || !strings.Contains(y, "tls: {}") {
		t.Errorf("want the bounded-knee warning and TLS to the endpoint:\n%s", y)
	}
	parsed(t, p)
}

// The listener moves off 127.0.0.1:8080 when that is the tested service.
func TestListenerNotTheEndpoint(t *testing.T) {
	k, steps := ramp()
	p, err := Make(k, steps, Options{Endpoint: "127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Listen != "127.0.0.1:8081" {
		t.Errorf("listener %s, want 127.0.0.1:8081", p.Listen)
	}
	parsed(t, p)
}

func TestMakeErrors(t *testing.T) {
	k, steps := ramp()
	ok := Options{Endpoint: "127.0.0.1:9001"}
	for _, c := range []struct {
		name  string
		k     loadgen.Knee
		steps []loadgen.StepResult
		o     Options
		want  string
	}{
		{"no knee", loadgen.Knee{}, steps, ok, "no knee"},
		{"no step at the knee", loadgen.Knee{Rate: 150}, steps, ok, "no step at the knee rate 150"},
		{"no trusted step", k, []loadgen.StepResult{{Rate: 200, Invalid: true, Offered: 5}}, ok, "no trusted step"},
		{"bad endpoint", k, steps, Options{Endpoint: "nohost"}, "endpoint: want host:port"},
		{"bad redis", k, steps, Options{Endpoint: "a:1", Redis: "x"}, "redis: want host:port"},
		{"bad route", k, steps, Options{Endpoint: "a:1", Route: "a b"}, "route: want"},
		{"negative replicas", k, steps, Options{Endpoint: "a:1", Replicas: -1}, "replicas: must be 0 or more"},
	} {
		_, err := Make(c.k, c.steps, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := Make(loadgen.Knee{}, steps, ok); !errors.Is(err, ErrNoKnee) {
		t.Errorf("no knee: %v is not ErrNoKnee", err)
	}
}

func TestRounding(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{180, 180}, {47.8125, 47.8}, {0.9567, 0.956}, {1234.5, 1234}, {100, 100}, {999.99, 999}, {0, 0},
	} {
		if got := floorSig(c.x, 3); got != c.want {
			t.Errorf("floorSig(%v, 3) = %v, want %v", c.x, got, c.want)
		}
	}
	for _, c := range []struct{ d, want time.Duration }{
		{240 * time.Millisecond, 240 * time.Millisecond},
		{246800 * time.Microsecond, 250 * time.Millisecond},
		{1234 * time.Millisecond, 1300 * time.Millisecond},
		{9100 * time.Microsecond, 10 * time.Millisecond},
		{500 * time.Microsecond, time.Millisecond},
		{3 * time.Millisecond, 3 * time.Millisecond},
	} {
		if got := ceilSig(c.d, 2); got != c.want {
			t.Errorf("ceilSig(%v, 2) = %v, want %v", c.d, got, c.want)
		}
	}
}
