package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/internal/syncbuf"
)

// policyGateway is the gateway of the policy admin tests: route limited
// (class sheddable, a rate-limit rule of burst 2 per minute per IP) and
// route main (class default) to cluster app (fixed admission limit 10,
// default's share 1, and a breaker far from opening by itself). The
// backend holds /hold requests until release is closed.
func policyGateway(t *testing.T, release chan struct{}, held *seenList) (*Gateway, *syncbuf.Buffer) {
	t.Helper()
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/hold") {
			held.add(r.URL.Path)
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})
	cfg, err := config.Parse("test.yaml", []byte(`
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - name: limited
    match: {prefix: /limited}
    cluster: app
    policies:
      class: sheddable
      ratelimit:
        rules: [{id: per-ip, key: [ip], rate: 2, per: 1m, burst: 2}]
  - {name: main, cluster: app, policies: {class: default}}
clusters:
  - name: app
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 10, shares: {critical: 1, default: 1, sheddable: 1}}
    breaker: {threshold: 100, open: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", log.String())
		}
	})
	return launch(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}), &log
}

// overridePost POSTs an override with the admin header and returns the
// status and body.
func overridePost(t *testing.T, g *Gateway, path string) (int, string) {
	t.Helper()
	code, _, body := fetch(t, h1Client(t), "POST", "http://"+g.AdminAddr()+path, http.Header{"X-Spillway-Admin": {"1"}})
	return code, body
}

// expectAnswer fetches path from the gateway and checks the status and
// the Spillway-Reason field ("" for none).
func expectAnswer(t *testing.T, c *http.Client, g *Gateway, path string, status int, reason string) {
	t.Helper()
	code, h, body := fetch(t, c, "GET", "http://"+g.Addr("web")+path, nil)
	if code != status || h.Get("Spillway-Reason") != reason {
		t.Fatalf("GET %s: %d %q %s, want %d %q", path, code, h.Get("Spillway-Reason"), body, status, reason)
	}
}

// policies reads GET /policies.
func policies(t *testing.T, g *Gateway) policyDoc {
	t.Helper()
	code, _, body := fetch(t, h1Client(t), "GET", "http://"+g.AdminAddr()+"/policies", nil)
	if code != 200 {
		t.Fatalf("GET /policies: %d %s", code, body)
	}
	var doc policyDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("GET /policies: %v\n%s", err, body)
	}
	return doc
}

// policyDoc is the part of GET /policies the tests read.
type policyDoc struct {
	Routes []struct {
		Name      string                       `json:"name"`
		Class     string                       `json:"class"`
		Bypassed  bool                         `json:"bypassed"`
		Refusals  map[string]map[string]uint64 `json:"refusals"`
		RateLimit []struct {
			Rule      string            `json:"rule"`
			Decisions map[string]uint64 `json:"decisions"`
		} `json:"rate_limit"`
	} `json:"routes"`
	Clusters []struct {
		Name      string `json:"name"`
		Algorithm string `json:"algorithm"`
		Admission *struct {
			Limit    int `json:"limit"`
			InFlight int `json:"in_flight"`
			Pinned   int `json:"pinned"`
		} `json:"admission"`
		Breaker *struct {
			State  string `json:"state"`
			Forced string `json:"forced"`
		} `json:"breaker"`
	} `json:"clusters"`
}

// overridesOf reads the Overrides section of GET /config as
// "what target value" strings.
func overridesOf(t *testing.T, g *Gateway) []string {
	t.Helper()
	code, _, body := fetch(t, h1Client(t), "GET", "http://"+g.AdminAddr()+"/config", nil)
	if code != 200 {
		t.Fatalf("GET /config: %d %s", code, body)
	}
	var doc struct {
		Routes    []json.RawMessage
		Overrides []struct{ What, Target, Value string }
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Routes) == 0 {
		t.Fatalf("GET /config: %v (%d routes)\n%s", err, len(doc.Routes), body)
	}
	out := []string{}
	for _, o := range doc.Overrides {
		out = append(out, o.What+" "+o.Target+" "+o.Value)
	}
	return out
}

// metricsText scrapes /metrics.
func metricsText(t *testing.T, g *Gateway) string {
	t.Helper()
	code, _, body := fetch(t, h1Client(t), "GET", "http://"+g.AdminAddr()+"/metrics", nil)
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	return body
}

// hasSeries waits for a scrape that shows line (a series and its value):
// a request is counted just after its answer is written.
func hasSeries(t *testing.T, g *Gateway, lines ...string) {
	t.Helper()
	var text string
	eventually(t, 5*time.Second, "series "+strings.Join(lines, ", "), func() bool {
		text = metricsText(t, g)
		for _, l := range lines {
			if !strings.Contains(text, "\n"+l+"\n") {
				return false
			}
		}
		return true
	})
}

// TestPolicyRefusalsCounted: the rate limit's refusal is counted by
// reason and class in /metrics and in GET /policies, with the rule's
// decisions and the cluster's admission and breaker state.
func TestPolicyRefusalsCounted(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	release := make(chan struct{})
	defer close(release)
	g, _ := policyGateway(t, release, &seenList{})
	c := h1Client(t)
	expectAnswer(t, c, g, "/limited/a", 200, "")
	expectAnswer(t, c, g, "/limited/b", 200, "")
	expectAnswer(t, c, g, "/limited/c", 429, "ratelimit:per-ip")
	expectAnswer(t, c, g, "/limited/d", 429, "ratelimit:per-ip")
	expectAnswer(t, c, g, "/other", 200, "")
	hasSeries(t, g,
		`spillway_refusals_total{class="sheddable",reason="ratelimit:per-ip",route="limited"} 2`,
		`spillway_route_ratelimit_decisions_total{outcome="allowed",route="limited",rule="per-ip"} 2`,
		`spillway_route_ratelimit_decisions_total{outcome="denied",route="limited",rule="per-ip"} 2`,
		`spillway_admission_limit{gate="app"} 10`,
		`spillway_admission_pinned_limit{gate="app"} 0`,
		`spillway_breaker_forced{breaker="app",state="open"} 0`,
		`spillway_route_policies_bypassed{route="limited"} 0`)
	if text := metricsText(t, g); strings.Contains(text, `spillway_refusals_total{class="default"`) {
		t.Errorf("route main's answers, all the upstream's, counted as refusals:\n%s", text)
	}
	admissionIdle(t, g) // the last answer's slot may come back after its bytes
	doc := policies(t, g)
	if len(doc.Routes) != 2 || len(doc.Clusters) != 1 {
		t.Fatalf("GET /policies: %d routes, %d clusters, want 2 and 1: %+v", len(doc.Routes), len(doc.Clusters), doc)
	}
	lim := doc.Routes[0]
	if lim.Name != "limited" || lim.Class != "sheddable" || lim.Refusals["ratelimit:per-ip"]["sheddable"] != 2 || len(lim.Refusals) != 1 {
		t.Errorf("route limited: %+v", lim)
	}
	if len(lim.RateLimit) != 1 || lim.RateLimit[0].Rule != "per-ip" ||
		lim.RateLimit[0].Decisions["allowed"] != 2 || lim.RateLimit[0].Decisions["denied"] != 2 {
		t.Errorf("route limited's rules: %+v", lim.RateLimit)
	}
	if m := doc.Routes[1]; m.Name != "main" || len(m.Refusals) != 0 || len(m.RateLimit) != 0 {
		t.Errorf("route main: %+v", m)
	}
	cl := doc.Clusters[0]
	if cl.Name != "app" || cl.Algorithm != "fixed" || cl.Admission == nil || cl.Admission.Limit != 10 ||
		cl.Admission.InFlight != 0 || cl.Admission.Pinned != 0 || cl.Breaker == nil || cl.Breaker.State != "closed" || cl.Breaker.Forced != "" {
		t.Errorf("cluster app: %+v %+v %+v", cl, cl.Admission, cl.Breaker)
	}
}

// TestPolicyOverrides: forcing the breaker open refuses the next request
// breaker-open; pinning the limit to 1 with one request held refuses the
// next admit:limit; bypassing the rate-limited route lets its refused
// requests through; auto and off undo each. Every override is in GET
// /config while in force and logged once; refused POSTs change nothing.
func TestPolicyOverrides(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	release := make(chan struct{})
	var held seenList
	g, log := policyGateway(t, release, &held)
	c := h1Client(t)

	if code, _, _ := fetch(t, c, "POST", "http://"+g.AdminAddr()+"/clusters/app/breaker/open", nil); code != 403 {
		t.Fatalf("POST without the admin header: %d, want 403", code)
	}
	for path, want := range map[string]int{
		"/clusters/nope/breaker/open": 404, "/routes/nope/bypass/on": 404,
		"/clusters/app/breaker/half": 400, "/clusters/app/limit/0": 400, "/clusters/app/limit/x": 400,
		"/clusters/app/brownout/0.5": 400, // app has no dimmer
		"/routes/main/bypass/yes":    400,
	} {
		if code, body := overridePost(t, g, path); code != want {
			t.Errorf("POST %s: %d %s, want %d", path, code, body, want)
		}
	}
	if o := overridesOf(t, g); len(o) != 0 {
		t.Fatalf("refused POSTs left overrides: %q", o)
	}
	expectAnswer(t, c, g, "/x", 200, "")

	mustPost(t, g, "/clusters/app/breaker/open")
	expectAnswer(t, c, g, "/x", 503, "breaker-open")
	if o := overridesOf(t, g); strings.Join(o, ",") != "breaker app open" {
		t.Errorf("overrides %q, want the breaker's", o)
	}
	hasSeries(t, g, `spillway_refusals_total{class="default",reason="breaker-open",route="main"} 1`,
		`spillway_breaker_forced{breaker="app",state="open"} 1`)
	mustPost(t, g, "/clusters/app/breaker/auto")
	expectAnswer(t, c, g, "/x", 200, "")

	mustPost(t, g, "/clusters/app/limit/1")
	// The last answer's admission slot is given back just after its bytes
	// go out: a client can read them first (under load, by milliseconds).
	// The held request must find the slot free, or it is refused.
	admissionIdle(t, g)
	done := make(chan int, 1)
	go func() {
		code, _, _ := fetch(t, h1Client(t), "GET", "http://"+g.Addr("web")+"/hold", nil)
		done <- code
	}()
	eventually(t, 5*time.Second, "the held request reaches the backend", func() bool { return held.has("/hold") })
	expectAnswer(t, c, g, "/x", 503, "admit:limit")
	if cl := policies(t, g).Clusters[0]; cl.Admission.Pinned != 1 || cl.Admission.Limit != 1 || cl.Admission.InFlight != 1 {
		t.Errorf("pinned admission: %+v", cl.Admission)
	}
	if o := overridesOf(t, g); strings.Join(o, ",") != "limit app 1" {
		t.Errorf("overrides %q, want the pinned limit", o)
	}
	mustPost(t, g, "/clusters/app/limit/auto")
	expectAnswer(t, c, g, "/x", 200, "")
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("held request: %d", code)
	}

	expectAnswer(t, c, g, "/limited/1", 200, "")
	expectAnswer(t, c, g, "/limited/2", 200, "")
	expectAnswer(t, c, g, "/limited/3", 429, "ratelimit:per-ip")
	mustPost(t, g, "/routes/limited/bypass/on")
	expectAnswer(t, c, g, "/limited/4", 200, "")
	if o := overridesOf(t, g); strings.Join(o, ",") != "bypass limited on" {
		t.Errorf("overrides %q, want the bypass", o)
	}
	hasSeries(t, g, `spillway_route_policies_bypassed{route="limited"} 1`)
	mustPost(t, g, "/routes/limited/bypass/off")
	expectAnswer(t, c, g, "/limited/5", 429, "ratelimit:per-ip")
	if o := overridesOf(t, g); len(o) != 0 {
		t.Errorf("overrides left: %q", o)
	}
	if n := strings.Count(log.String(), `msg="admin: override"`); n != 6 {
		t.Errorf("%d override log lines, want 6 (one per accepted POST):\n%s", n, log.String())
	}
}

// admissionIdle waits until cluster app's admission has nothing in
// flight.
func admissionIdle(t *testing.T, g *Gateway) {
	t.Helper()
	eventually(t, 5*time.Second, "app's admission to have nothing in flight", func() bool {
		cl := policies(t, g).Clusters
		return len(cl) == 1 && cl[0].Admission != nil && cl[0].Admission.InFlight == 0
	})
}

// mustPost POSTs an override that must be accepted.
func mustPost(t *testing.T, g *Gateway, path string) {
	t.Helper()
	if code, body := overridePost(t, g, path); code != 200 {
		t.Fatalf("POST %s: %d %s", path, code, body)
	}
}

// TestBrownoutOverride: a forced brownout level decides what the backend
// is told (Spillway-Brownout 0 at level 0, 1 at level 1) whatever the
// dimmer's level; auto gives the decision back to the dimmer (level 1:
// nothing is slow).
func TestBrownoutOverride(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	var seen seenList
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path + "=" + r.Header.Get("Spillway-Brownout"))
	})
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app}]
clusters:
  - name: app
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 10, brownout: {target_p99: 10s}}
`)
	c := h1Client(t)
	get := func(path string) {
		t.Helper()
		if code, _, body := fetch(t, c, "GET", "http://"+g.Addr("web")+path, nil); code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	get("/before")
	mustPost(t, g, "/clusters/app/brownout/0")
	for i := range 5 {
		get("/off" + strconv.Itoa(i))
	}
	if cl := policies(t, g).Clusters[0]; cl.Admission == nil {
		t.Fatal("no admission in GET /policies")
	}
	hasSeries(t, g, `spillway_admission_brownout_forced_level{gate="app"} 0`)
	if o := overridesOf(t, g); strings.Join(o, ",") != "brownout app 0" {
		t.Errorf("overrides %q, want the brownout", o)
	}
	mustPost(t, g, "/clusters/app/brownout/auto")
	get("/after")
	want := []string{"/before=1", "/off0=0", "/off1=0", "/off2=0", "/off3=0", "/off4=0", "/after=1"}
	if got := seen.list(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the backend saw %q, want %q", got, want)
	}
}

// TestOverridesAcrossReload: a reload of an unchanged file keeps the
// cluster's forced breaker (its guard is carried) and drops the route's
// bypass (its chain is rebuilt); one that changes the breaker's
// definition drops the forced state too.
func TestOverridesAcrossReload(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {})
	file := t.TempDir() + "/gateway.yaml"
	body := func(threshold int) string {
		return `version: 1
admin: {address: "127.0.0.1:0"}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: forced, match: {prefix: /forced}, cluster: app}
  - name: limited
    cluster: other
    policies: {ratelimit: {rules: [{id: per-ip, key: [ip], rate: 1, per: 1m, burst: 1}]}}
clusters:
  - {name: app, endpoints: ["` + be + `"], breaker: {threshold: ` + strconv.Itoa(threshold) + `, open: 1m}}
  - {name: other, endpoints: ["` + be + `"]}
`
	}
	writeFile(t, file, body(50))
	g := startFile(t, file)
	c := h1Client(t)
	expectAnswer(t, c, g, "/l1", 200, "")
	expectAnswer(t, c, g, "/l2", 429, "ratelimit:per-ip")
	mustPost(t, g, "/clusters/app/breaker/open")
	mustPost(t, g, "/routes/limited/bypass/on")
	expectAnswer(t, c, g, "/forced/1", 503, "breaker-open")
	expectAnswer(t, c, g, "/l3", 200, "")

	mustPost(t, g, "/reload")
	expectAnswer(t, c, g, "/forced/2", 503, "breaker-open")
	expectAnswer(t, c, g, "/l4", 429, "ratelimit:per-ip")
	if o := overridesOf(t, g); strings.Join(o, ",") != "breaker app open" {
		t.Errorf("after a reload of the same file: overrides %q, want the breaker's only", o)
	}

	writeFile(t, file, body(60))
	mustPost(t, g, "/reload")
	expectAnswer(t, c, g, "/forced/3", 200, "")
	if o := overridesOf(t, g); len(o) != 0 {
		t.Errorf("after the breaker changed: overrides %q, want none", o)
	}
}
