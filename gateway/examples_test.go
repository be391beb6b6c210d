package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/deadline"
	"github.com/spillwayhq/spillway/internal/syncbuf"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/yamlfile"
)

// exampleDir is examples/gateway, from this package's directory.
var exampleDir = filepath.Join("..", "examples", "gateway")

// exampleKinds says what TestExamplesLoad does with each file of
// examples/gateway: load it as a gateway configuration, expect its
// documented errors, or read it as a rules file. A new file must be added
// here, so no example goes untested.
var exampleKinds = map[string]string{
	"minimal.yaml":      "config",
	"two-backends.yaml": "config",
	"full.yaml":         "config", // needs certificates and two variables: see fullExampleEnv
	"broken.yaml":       "broken",
	"cart.yaml":         "config",
	"ratelimit.yaml":    "config",
	"adaptive.yaml":     "config",
	"rules.yaml":        "rules",
	"shedding.yaml":     "config", // README's shedding session
}

// brokenProblems are broken.yaml's problems as README.md prints them.
const brokenProblems = `broken.yaml:5:20: routes[0].cluster: no cluster is named "nope" (clusters: app)
broken.yaml:5:46: routes[0].timeouts.request: want a duration such as 250ms, 10s or 1m30s, got "10x"`

// TestExamplesLoad: every file in examples/gateway is known to this test;
// the configurations load, broken.yaml fails with exactly the two problems
// README.md shows, and rules.yaml is a rules file.
func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(exampleDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	fullExampleEnv(t)
	for _, path := range files {
		name := filepath.Base(path)
		switch exampleKinds[name] {
		case "config":
			if _, err := config.Load(path); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case "broken":
			_, err := config.Load(path)
			var fe *yamlfile.FileError
			want := strings.ReplaceAll(brokenProblems, "broken.yaml:", path+":")
			if !errors.As(err, &fe) || !errors.Is(err, config.ErrInvalid) || fe.Error() != want {
				t.Errorf("%s: got %v, want:\n%s", name, err, want)
			}
		case "rules":
			if _, err := rules.Load(path); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		default:
			t.Errorf("%s: not in exampleKinds; add it, with a test that loads it", name)
		}
	}
}

// fullExampleEnv gives full.yaml the two certificates and the variables
// its header comment says it needs.
func fullExampleEnv(t *testing.T) {
	dir := t.TempDir()
	newCert(t, dir, "api")
	newCert(t, dir, "www")
	t.Setenv("SPILLWAY_TLS_DIR", dir)
	t.Setenv("UPSTREAM_TOKEN", "secret")
}

// TestExampleRulesAreTheSeeds: rules.yaml holds seed 002's four rules with
// the seed's ids, keys, limits and fail modes (the library's copy of the
// seed's file, ratelimit/rules/testdata/seed.json, is the reference); only
// the matches are added.
func TestExampleRulesAreTheSeeds(t *testing.T) {
	seed, err := rules.Load(filepath.Join("..", "ratelimit", "rules", "testdata", "seed.json"))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := rules.Load(filepath.Join(exampleDir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ours.Rules) != len(seed.Rules) {
		t.Fatalf("%d rules, the seed has %d", len(ours.Rules), len(seed.Rules))
	}
	for i, s := range seed.Rules {
		o := ours.Rules[i]
		if o.ID != s.ID || !slices.Equal(o.Key, s.Key) || o.Spec != s.Spec || o.FailMode != s.FailMode {
			t.Errorf("rule %d: %s %v %+v %v, the seed's: %s %v %+v %v", i, o.ID, o.Key, o.Spec, o.FailMode, s.ID, s.Key, s.Spec, s.FailMode)
		}
	}
}

// loadExample loads examples/gateway/name with its listeners on free
// loopback ports, the admin endpoint and the file watch off.
func loadExample(t *testing.T, name string) *config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join(exampleDir, name))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Listeners {
		cfg.Listeners[i].Address = "127.0.0.1:0"
	}
	cfg.Admin.Address = ""
	cfg.Reload.Watch = false
	return cfg
}

// launchExample builds and starts cfg (shut down at cleanup); its log is
// printed when the test fails.
func launchExample(t *testing.T, cfg *config.Config) *Gateway {
	t.Helper()
	var buf syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", buf.String())
		}
	})
	return launch(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
}

// cartBackend is one of cart.yaml's servers: /healthz answers 200 only
// with the check's Host (shop.example), every other path 200 with its
// name, or 503 when sick; a sick one records the request ids it saw.
type cartBackend struct {
	name   string
	sick   bool
	served atomic.Int64
	mu     sync.Mutex
	ids    map[string]int // X-Request-Id → times seen (sick only)
}

func (b *cartBackend) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		if r.Host != "shop.example" || r.Method != http.MethodGet {
			w.WriteHeader(http.StatusBadRequest)
		}
		return
	}
	b.served.Add(1)
	if b.sick {
		b.mu.Lock()
		b.ids[r.Header.Get("X-Request-Id")]++
		b.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	fmt.Fprint(w, b.name)
}

// TestExampleCart: cart.yaml says what seed 001's HAProxy backend says
// (the values are the seed's), and served on loopback with its four
// servers replaced by test servers — cart2 answering 503 to every
// request — every GET is answered 200 by a healthy server: the
// check (GET /healthz with Host shop.example) lets all four in, and a
// request the sick one answers is retried on another, never on it again.
func TestExampleCart(t *testing.T) {
	noLeaks(t)
	cfg := loadExample(t, "cart.yaml")
	checkCartConfig(t, cfg)
	cl := &cfg.Clusters[0]
	backs := make([]*cartBackend, len(cl.Endpoints))
	for i := range cl.Endpoints {
		b := &cartBackend{name: fmt.Sprintf("cart%d", i+1), sick: i == 1, ids: map[string]int{}}
		backs[i] = b
		cl.Endpoints[i].Address = startBackendFunc(t, b.serve)
	}
	g := launchExample(t, cfg)
	c := h1Client(t)
	url := "http://" + g.Addr("shop") + "/cart"
	// Every server's first check has passed (a loaded machine may run
	// them apart: with two of four in, the sick one is not yet eligible
	// and would see none of the requests below).
	all := map[string]bool{}
	for _, ep := range cl.Endpoints {
		all[ep.Address] = true
	}
	waitStates(t, g, cl.Name, all)
	// Until the sick server has had three requests, at most 300. With
	// nothing in flight a request's two candidates, drawn by weight, are
	// ranked by weight alone and the first of the heaviest wins: cart2
	// gets about a third of them (cart3, weight 50, only 1/49).
	for i := 0; i < 300 && backs[1].served.Load() < 3; i++ {
		code, _, body := fetch(t, c, "GET", url, nil)
		if code != 200 || !strings.HasPrefix(body, "cart") || body == "cart2" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	if n := backs[1].served.Load(); n < 3 {
		t.Fatalf("the sick server had %d of 300 requests", n)
	}
	for id, n := range backs[1].ids {
		if id == "" || n != 1 {
			t.Errorf("the sick server saw request id %q %d times, want once (retries go to untried servers)", id, n)
		}
	}
}

// checkCartConfig compares cart.yaml with the seed's HAProxy lines.
func checkCartConfig(t *testing.T, cfg *config.Config) {
	t.Helper()
	if len(cfg.Routes) != 1 || len(cfg.Clusters) != 1 {
		t.Fatalf("%d routes, %d clusters", len(cfg.Routes), len(cfg.Clusters))
	}
	r, cl := &cfg.Routes[0], &cfg.Clusters[0]
	var weights []int
	for _, e := range cl.Endpoints {
		weights = append(weights, e.Weight)
	}
	a := cl.Health.Active
	switch {
	case cl.Picker != "least_request" || cl.SlowStart.D() != 30*time.Second:
		t.Errorf("picker %s, slow start %v; want least_request (leastconn), slowstart 30s", cl.Picker, cl.SlowStart.D())
	case !slices.Equal(weights, []int{100, 100, 50, 100}):
		t.Errorf("weights %v", weights)
	case a == nil || a.Type != "http" || a.Method != "GET" || a.Path != "/healthz" || a.Host != "shop.example" ||
		a.Interval.D() != 2*time.Second || a.Fall != 3 || a.Rise != 2 || a.Timeout.D() != time.Second:
		t.Errorf("active check %+v; want GET /healthz, Host shop.example, inter 2s fall 3 rise 2, timeout check 1s", a)
	case r.Policies.Retry.Attempts != 3:
		t.Errorf("attempts %d; want 3 (retries 2 after the first)", r.Policies.Retry.Attempts)
	case r.Timeouts.Connect.D() != 2*time.Second || r.Timeouts.ResponseHeader.D() != 5*time.Second:
		t.Errorf("timeouts %+v; want connect 2s, response_header 5s (timeout server)", r.Timeouts)
	}
}

// TestExampleRateLimit: ratelimit.yaml's rules, served from memory in
// front of a test server: one user's GET passes; its POST /login passes
// ten times, the seed's limit, and the eleventh is refused 429 by the
// login rule; a phone's POST /otp/sms three times, then 429 by otp-sms.
// The refused requests never reach the server.
func TestExampleRateLimit(t *testing.T) {
	noLeaks(t)
	cfg := loadExample(t, "ratelimit.yaml")
	if cfg.RateLimit.Store != "memory" || cfg.RateLimit.Redis != nil {
		t.Fatalf("store %q, redis %v; want memory by default", cfg.RateLimit.Store, cfg.RateLimit.Redis)
	}
	var hits atomic.Int64
	cfg.Clusters[0].Endpoints[0].Address = startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
	})
	g := launchExample(t, cfg)
	c, base := h1Client(t), "http://"+g.Addr("listener-0")
	user := http.Header{"X-User-Id": {"u42"}}
	if code, _, body := fetch(t, c, "GET", base+"/", user); code != 200 {
		t.Fatalf("GET: %d %s", code, body)
	}
	limited := func(path string, h http.Header, n int, rule string) {
		t.Helper()
		for i := 1; i <= n; i++ {
			if code, _, body := fetch(t, c, "POST", base+path, h); code != 200 {
				t.Fatalf("POST %s %d of %d: %d %s", path, i, n, code, body)
			}
		}
		code, h2, _ := fetch(t, c, "POST", base+path, h)
		if code != 429 || h2.Get("Spillway-Reason") != "ratelimit:"+rule || h2.Get("Retry-After") == "" {
			t.Fatalf("POST %s past %d: %d, reason %q, Retry-After %q", path, n, code, h2.Get("Spillway-Reason"), h2.Get("Retry-After"))
		}
	}
	limited("/login", user, 10, "login")
	limited("/otp/sms", http.Header{"X-Phone": {"+8801700000000"}}, 3, "otp-sms")
	if n := hits.Load(); n != 1+10+3 {
		t.Errorf("the server saw %d requests, want 14 (the refused ones never reach it)", n)
	}
}

// TestExampleAdaptive: adaptive.yaml served in front of two test servers
// that report the control fields they receive: each route's class goes
// upstream (critical, sheddable, default) whatever an untrusted client
// claims, with the remaining budget (at most the route's default) and the
// brownout decision.
func TestExampleAdaptive(t *testing.T) {
	noLeaks(t)
	cfg := loadExample(t, "adaptive.yaml")
	cl := &cfg.Clusters[0]
	if a := cl.Admission; a == nil || a.AlgorithmName != "gradient2" || a.Queue.Discipline != "codel" || a.Brownout == nil ||
		cl.Breaker == nil || cl.Breaker.Fallback == nil {
		t.Fatalf("admission %+v, breaker %+v: want gradient2, codel, brownout, a breaker with a fallback", a, cl.Breaker)
	}
	echo := func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s|%s", r.Header.Get("Spillway-Criticality"), r.Header.Get("Spillway-Timeout"), r.Header.Get("Spillway-Brownout"))
	}
	for i := range cl.Endpoints {
		cl.Endpoints[i].Address = startBackendFunc(t, echo)
	}
	g := launchExample(t, cfg)
	c, base := h1Client(t), "http://"+g.Addr("listener-0")
	spoof := http.Header{"Spillway-Criticality": {"critical"}, "Spillway-Timeout": {"1H"}, "Spillway-Brownout": {"1"}}
	for _, tc := range []struct {
		path, class string
		budget      time.Duration
	}{
		{"/checkout/pay", "critical", 3 * time.Second},
		{"/recommendations", "sheddable", 500 * time.Millisecond},
		{"/products/1", "default", 2 * time.Second},
	} {
		code, _, body := fetch(t, c, "GET", base+tc.path, spoof)
		parts := strings.Split(body, "|")
		if code != 200 || len(parts) != 3 {
			t.Fatalf("%s: %d %q", tc.path, code, body)
		}
		d, err := deadline.ParseTimeout(parts[1])
		if parts[0] != tc.class || err != nil || d <= 0 || d > tc.budget || (parts[2] != "0" && parts[2] != "1") {
			t.Errorf("%s: upstream got class %q, Spillway-Timeout %q (%v), brownout %q; want %s, at most %v, 0 or 1",
				tc.path, parts[0], parts[1], err, parts[2], tc.class, tc.budget)
		}
	}
}
