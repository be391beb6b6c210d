package sim

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/loadgen"
)

func parseConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func loadExample(t *testing.T, name string) *config.Config {
	t.Helper()
	cfg, err := config.Load("../examples/gateway/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func steps(t *testing.T, spec string, d time.Duration) []loadgen.Step {
	t.Helper()
	s, err := loadgen.ParseRate(spec, d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func simulate(t *testing.T, m ConfigModel) loadgen.Result {
	t.Helper()
	res, _, err := SimulateConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A rule of 30 per minute with a burst of 30, per ip, and one client at
// 10 req/s for 60 s: the bucket's 30 go in the first 3 s, then one token
// every 2 s — 30 + 60/2 = 60 calls pass, give or take the one token due
// at the very end; every other call is refused ratelimit:per-ip.
func TestSimConfigRateLimitArithmetic(t *testing.T) {
	cfg := parseConfig(t, `version: 1
listeners: [{address: "127.0.0.1:8080"}]
routes:
  - name: api
    cluster: app
    policies:
      ratelimit:
        rules: [{id: per-ip, key: [ip], rate: 30, per: 1m, burst: 30}]
clusters: [{name: app, endpoints: ["127.0.0.1:9001"]}]
`)
	res := simulate(t, ConfigModel{Config: cfg, Backend: DefaultBackend, Steps: steps(t, "10", time.Minute),
		Clients: 1, Timeout: time.Second, Seed: 7})
	s := res.Steps[0]
	refused := s.Refusals["default"]["ratelimit:per-ip"]
	if s.Good < 59 || s.Good > 61 || s.Good+refused != s.Offered {
		t.Errorf("offered %d: good %d, want 60 ± 1, and refused %d, want the rest; refusals %v", s.Offered, s.Good, refused, s.Refusals)
	}
	if s.Offered < 500 || s.Offered > 700 {
		t.Errorf("offered %d, want about 600", s.Offered)
	}
	// Two clients: each has its own bucket, so twice as many pass.
	res = simulate(t, ConfigModel{Config: cfg, Backend: DefaultBackend, Steps: steps(t, "10", time.Minute),
		Clients: 2, Timeout: time.Second, Seed: 7})
	if g := res.Steps[0].Good; g < 117 || g > 122 {
		t.Errorf("two clients: good %d, want 120 ± 2", g)
	}
}

// The admission of a config gives what PredictOverload predicts for the
// same parameters (the same Limiter in front of the same backend model;
// the draws differ, so the numbers agree within noise).
func TestSimConfigAgreesWithPredictOverload(t *testing.T) {
	cfg := parseConfig(t, `version: 1
listeners: [{address: "127.0.0.1:8080"}]
routes: [{name: api, cluster: app}]
clusters:
  - name: app
    endpoints: ["127.0.0.1:9001"]
    admission:
      algorithm: fixed
      initial_limit: 10
      shares: {critical: 1, sheddable: 0.5}
      queue: {discipline: fifo, max_wait: 300ms}
`)
	classes, err := loadgen.ParseClasses("critical=0.3,sheddable=0.7")
	if err != nil {
		t.Fatal(err)
	}
	for _, load := range []float64{50, 200} {
		pred, err := PredictOverload(OverloadModel{Seed: 3, Workers: 10, Service: 100 * time.Millisecond, Queue: 1000,
			Timeout: time.Second, Critical: 0.3, Loads: []float64{load}, Duration: 60 * time.Second,
			Admission: cfg.Clusters[0].Admission})
		if err != nil {
			t.Fatal(err)
		}
		res := simulate(t, ConfigModel{Config: cfg, Backend: DefaultBackend, Steps: []loadgen.Step{{Rate: load, Duration: 60 * time.Second}},
			Classes: classes, Clients: 100, Timeout: time.Second, Seed: 3})
		s, p := res.Steps[0], pred[0]
		crit := res.Steps[0].Classes["critical"]
		critOK := float64(crit.Good) / float64(crit.Offered)
		if d := s.Goodput/p.GoodPerSec - 1; math.Abs(d) > 0.08 {
			t.Errorf("load %v: goodput %.1f, predicted %.1f", load, s.Goodput, p.GoodPerSec)
		}
		if math.Abs(critOK-p.CriticalOK) > 0.03 {
			t.Errorf("load %v: critical ok %.3f, predicted %.3f", load, critOK, p.CriticalOK)
		}
		rej := float64(s.Offered-s.Good) / float64(s.Offered)
		prej := float64(p.Rejected+p.TimedOut) / float64(p.Offered)
		if math.Abs(rej-prej) > 0.03 {
			t.Errorf("load %v: failed share %.3f, predicted %.3f", load, rej, prej)
		}
	}
}

// cart.yaml: four endpoints of 100/s each (one of weight 50) behind
// least_request; up to 350 req/s every call is good, and the knee is not
// below 350.
func TestSimConfigCart(t *testing.T) {
	res := simulate(t, ConfigModel{Config: loadExample(t, "cart.yaml"), Backend: DefaultBackend,
		Steps: steps(t, "50:400:50", 10*time.Second), Clients: 100, Timeout: time.Second, Seed: 1})
	for _, s := range res.Steps[:7] {
		if s.ErrorRate() > 0.01 || s.GoodShare() < 0.99 || math.Abs(s.Goodput/s.Rate-1) > 0.15 {
			t.Errorf("rate %v: goodput %.1f, errors %.2f%%", s.Rate, s.Goodput, 100*s.ErrorRate())
		}
	}
	k, _ := loadgen.FindKnee(res.Steps, loadgen.KneeCriteria{})
	if k.Rate < 350 {
		t.Errorf("knee %+v, want at least 350", k)
	}
}

// shedding.yaml on its README backend (4 workers × 100 ms): critical
// checkout keeps its calls while sheddable browse is refused admit:queue.
func TestSimConfigShedding(t *testing.T) {
	b := DefaultBackend
	b.Workers = 4
	res := simulate(t, ConfigModel{Config: loadExample(t, "shedding.yaml"), Backend: b,
		Steps: steps(t, "60", 30*time.Second), Clients: 100, Timeout: time.Second, Seed: 1})
	s := res.Steps[0]
	crit, shed := s.Classes["critical"], s.Classes["sheddable"]
	critOK, shedOK := float64(crit.Good)/float64(crit.Offered), float64(shed.Good)/float64(shed.Offered)
	if critOK < 0.95 || shedOK > 0.6 || s.Refusals["sheddable"]["admit:queue"] == 0 {
		t.Errorf("critical ok %.2f (want ≥ 0.95), sheddable ok %.2f (want ≤ 0.6), refusals %v", critOK, shedOK, s.Refusals)
	}
	if g := s.Goodput; g < 30 || g > 41 {
		t.Errorf("goodput %.1f, want at most the 40/s four places give (less while only sheddable calls wait)", g)
	}
}

// A seed gives one run; another seed another.
func TestSimConfigDeterministic(t *testing.T) {
	m := ConfigModel{Config: loadExample(t, "cart.yaml"), Backend: BackendSpec{Workers: 5, Service: 100 * time.Millisecond, Dist: "exp", Errors: 0.05, Queue: 100},
		Steps: steps(t, "100:300:100", 5*time.Second), Clients: 10, Timeout: time.Second, Seed: 9,
		Client: loadgen.ClientPolicy{Retry: loadgen.RetryBudget, Retries: 3}}
	a, sa, _ := SimulateConfig(m)
	b, sb, _ := SimulateConfig(m)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(sa, sb) {
		t.Error("two runs with one seed differ")
	}
	m.Seed = 10
	if c := simulate(t, m); reflect.DeepEqual(a, c) {
		t.Error("two seeds gave the same run")
	}
}

// Errors the gateway retries (cart retries 503) are retried on another
// endpoint; errors it does not (500) reach the client.
func TestSimConfigGatewayRetries(t *testing.T) {
	m := ConfigModel{Config: loadExample(t, "cart.yaml"), Backend: BackendSpec{Workers: 10, Service: 50 * time.Millisecond, Dist: "const", Errors: 0.1, Queue: 100},
		Steps: steps(t, "100", 20*time.Second), Clients: 10, Timeout: time.Second, Seed: 2}
	s := simulate(t, m).Steps[0]
	if e := s.ErrorRate(); math.Abs(e-0.1) > 0.03 || s.Statuses[500] == 0 {
		t.Errorf("500s are not retried by cart: errors %.3f, want about 0.1; statuses %v", e, s.Statuses)
	}
	// With no queue and one worker per endpoint, a busy endpoint answers
	// 503, which cart retries on an endpoint not tried yet: fewer 503s
	// reach the clients than without, but its budget (retries at most 20%
	// of requests, plus the budget's initial tokens) caps what it saves.
	m.Backend = BackendSpec{Workers: 1, Service: 50 * time.Millisecond, Dist: "const", Queue: 0}
	m.Steps = steps(t, "40", 20*time.Second)
	with := simulate(t, m).Steps[0]
	m.Config = loadExample(t, "cart.yaml")
	m.Config.Routes[0].Policies.Retry.Attempts = 1
	without := simulate(t, m).Steps[0]
	saved := without.Statuses[503] - with.Statuses[503]
	if without.Statuses[503] < with.Offered/10 || 4*with.Statuses[503] > 3*without.Statuses[503] || saved > with.Offered/4 {
		t.Errorf("503s: %d with cart's retries, %d without, of about %d calls", with.Statuses[503], without.Statuses[503], with.Offered)
	}
}

func TestSimConfigBadModel(t *testing.T) {
	cfg := loadExample(t, "cart.yaml")
	good := ConfigModel{Config: cfg, Backend: DefaultBackend, Steps: steps(t, "10", time.Second), Clients: 1, Timeout: time.Second}
	for name, mut := range map[string]func(*ConfigModel){
		"route":   func(m *ConfigModel) { m.Route = "nope" },
		"clients": func(m *ConfigModel) { m.Clients = 0 },
		"timeout": func(m *ConfigModel) { m.Timeout = 0 },
		"steps":   func(m *ConfigModel) { m.Steps = nil },
		"load":    func(m *ConfigModel) { m.Steps = []loadgen.Step{{Rate: 1e6, Duration: time.Hour}} },
		"workers": func(m *ConfigModel) { m.Backend.Workers = 0 },
	} {
		m := good
		mut(&m)
		if _, _, err := SimulateConfig(m); !IsUsage(err) {
			t.Errorf("%s: err %v, want a usage error", name, err)
		}
	}
	for _, spec := range []string{"workers=x", "dist=pareto", "errors=2", "speed=1", "workers"} {
		if _, err := ParseBackend(spec); !IsUsage(err) {
			t.Errorf("backend %q: err %v, want a usage error", spec, err)
		}
	}
	for _, spec := range []string{"30s-10s:5", "x@1s-2s:1", "1s-2s", "1s-2s:-1"} {
		if _, err := ParseSchedule(spec); !IsUsage(err) {
			t.Errorf("schedule %q: err %v, want a usage error", spec, err)
		}
	}
}

// A schedule that takes endpoint 0's workers away: cart's active checks
// (2 s, fall 3) take it out, and calls stop failing on it.
func TestSimConfigScheduleAndHealth(t *testing.T) {
	sched, err := ParseSchedule("0@10s-40s:0")
	if err != nil {
		t.Fatal(err)
	}
	m := ConfigModel{Config: loadExample(t, "cart.yaml"), Backend: BackendSpec{Workers: 10, Service: 50 * time.Millisecond, Dist: "exp", Queue: 0},
		Schedule: sched, Steps: steps(t, "100", 10*time.Second)[:1], Clients: 10, Timeout: time.Second, Seed: 4}
	m.Steps = []loadgen.Step{{Rate: 100, Duration: 10 * time.Second}, {Rate: 100, Duration: 10 * time.Second}, {Rate: 100, Duration: 20 * time.Second}}
	res := simulate(t, m)
	if res.Steps[0].ErrorRate() > 0.01 || res.Steps[2].ErrorRate() > 0.01 {
		t.Errorf("errors before the loss %.3f, after the checks took it out %.3f; want none", res.Steps[0].ErrorRate(), res.Steps[2].ErrorRate())
	}
}
