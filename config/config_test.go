package config

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/discovery"
	"github.com/spillwayhq/spillway/health"
	"github.com/spillwayhq/spillway/httpserver"
)

func TestMinimalExample(t *testing.T) {
	data, err := os.ReadFile("../examples/gateway/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines++
		}
	}
	if lines > 5 {
		t.Errorf("minimal.yaml has %d lines besides comments, want at most 5", lines)
	}
	c, err := Load("../examples/gateway/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checkMinimal(t, c)
}

// The same file in JSON.
func TestMinimalJSON(t *testing.T) {
	c := mustParse(t, t.TempDir(), `{"version": 1, "listeners": [{"address": "127.0.0.1:8080"}],
		"routes": [{"cluster": "app"}], "clusters": [{"name": "app", "endpoints": ["127.0.0.1:9001"]}]}`, noEnv)
	checkMinimal(t, c)
}

// checkMinimal checks the minimal file's values and every default the
// reference documents for them (written out here by hand).
func checkMinimal(t *testing.T, c *Config) {
	t.Helper()
	l, r, cl := c.Listeners[0], c.Routes[0], c.Clusters[0]
	for _, x := range []struct {
		name      string
		got, want any
	}{
		{"admin", c.Admin.Address, "127.0.0.1:9901"},
		{"listener name", l.Name, "listener-0"},
		{"address", l.Address, "127.0.0.1:8080"},
		{"protocol", l.Protocol, "http"},
		{"http2", l.HTTP2, true},
		{"tls", l.TLS, (*ListenerTLS)(nil)},
		{"limits", l.Limits, Limits{HeaderTimeout: Duration(10 * time.Second), IdleTimeout: Duration(75 * time.Second),
			BodyInactivity: Duration(60 * time.Second), MaxHeaderBytes: 32 << 10, MaxHeaderCount: 100, MaxAgeJitter: 0.1}},
		{"proxy protocol", l.ProxyProtocol, (*ProxyProto)(nil)},
		{"drain", c.Drain, Drain{Timeout: Duration(10 * time.Second)}},
		{"reload", c.Reload, Reload{Watch: true, Debounce: Duration(500 * time.Millisecond)}},
		{"overload", c.Overload, Overload{Interval: Duration(250 * time.Millisecond)}},
		{"admin metrics", c.Admin.Metrics, true},
		{"access log", [2]any{r.AccessLog, r.AccessSample}, [2]any{"off", 0.01}},
		{"cluster proxy protocol", cl.ProxyProtocol, "off"},
		{"route name", r.Name, "route-0"},
		{"route cluster", r.Cluster, "app"},
		{"timeouts", r.Timeouts, Timeouts{Connect: Duration(5 * time.Second), ResponseHeader: Duration(30 * time.Second),
			Request: Duration(60 * time.Second), Idle: Duration(60 * time.Second)}},
		{"upgrades", r.Upgrades, []string{"websocket"}},
		{"max body", r.MaxBodyBytes, Bytes(0)},
		{"endpoints", cl.StaticEndpoints(), []balancer.Endpoint{{Addr: "127.0.0.1:9001", Weight: 1}}},
		{"picker", cl.Picker, "least_request"},
		{"protocol", cl.Protocol, "http1"},
		{"pool", cl.Pool, Pool{MaxIdlePerEndpoint: 64, IdleTimeout: Duration(90 * time.Second)}},
		{"set config", cl.SetConfig(), balancer.SetConfig{SlowStartMin: 0.1, PanicThreshold: 0.5, LatencyDecay: 10}},
		{"picker kind", reflect.TypeOf(cl.NewPicker()), reflect.TypeFor[*balancer.LeastRequest]()},
		{"server", l.HTTPServer(), httpserver.Config{Addr: "127.0.0.1:8080", ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout: 75 * time.Second, BodyTimeout: 60 * time.Second, SendTimeout: 60 * time.Second, MaxHeaderBytes: 32768}},
		{"routes served", len(c.ListenerRoutes(&c.Listeners[0])), 1},
	} {
		if !reflect.DeepEqual(x.got, x.want) {
			t.Errorf("%s: got %#v, want %#v", x.name, x.got, x.want)
		}
	}
	if _, ok := cl.Source().(*discovery.DNS); ok || cl.Source() == nil {
		t.Errorf("source %T, want a static one", cl.Source())
	}
	if _, ok := cl.ActiveConfig(); ok {
		t.Error("active checks without health.active")
	}
}

func TestFullExample(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "api", "api.example.com")
	writeCert(t, dir, "www", "www.example.com")
	t.Setenv("SPILLWAY_TLS_DIR", dir)
	t.Setenv("UPSTREAM_TOKEN", "s3cret")
	c, err := Load("../examples/gateway/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pub := &c.Listeners[0]
	srv := pub.ServerTLS()
	if len(srv.Certificates) != 2 || srv.MinVersion != tls.VersionTLS12 || !slices.Equal(srv.NextProtos, []string{"h2", "http/1.1"}) {
		t.Errorf("server TLS: %d certificates, version %x, ALPN %v", len(srv.Certificates), srv.MinVersion, srv.NextProtos)
	}
	if got := c.Routes[0].RequestHeaders.Add["Authorization"]; got != "Bearer s3cret" {
		t.Errorf("Authorization %q", got)
	}
	if p := pub.TrustedPrefixes(); len(p) != 2 || p[1].String() != "192.168.1.1/32" {
		t.Errorf("trusted %v", p)
	}
	if names := routeNames(c.ListenerRoutes(pub)); !slices.Equal(names, []string{"api", "ws", "grpc", "static", "everything-else"}) {
		t.Errorf("routes of public: %v", names)
	}
	if !slices.Equal(c.Routes[1].Upgrades, []string{"websocket"}) || len(c.Routes[0].Upgrades) != 0 {
		t.Errorf("upgrades %q and %q", c.Routes[1].Upgrades, c.Routes[0].Upgrades)
	}
	if c.Routes[1].Timeouts.Request != Duration(10*time.Minute) {
		t.Errorf("anchored timeouts %+v", c.Routes[1].Timeouts)
	}
	if re := c.Routes[3].Match.PathRegexp; re == nil || !re.MatchString("/assets/a1.css") || re.MatchString("/x/assets/a1.css") {
		t.Errorf("path regexp %v", re)
	}
	app := c.Cluster("app")
	if cfg := app.SetConfig(); cfg.SlowStart != 30 || !cfg.NewUnhealthy {
		t.Errorf("app set config %+v", cfg)
	}
	if h, ok := app.HealthCheck().(*health.HTTPCheck); !ok || h.Path != "/healthz" ||
		!slices.Equal(h.Expected, []health.StatusRange{{Min: 200, Max: 299}, {Min: 304, Max: 304}}) {
		t.Errorf("app check %#v", app.HealthCheck())
	}
	if o, ok := app.OutlierConfig(); !ok || o.BaseEjectionTime != 30 || o.MaxEjectionTime != 300 {
		t.Errorf("app outlier %+v", o)
	}
	if d, ok := c.Cluster("greeter").Source().(*discovery.DNS); !ok || d.Name != "greeter.internal" || d.Port != 50051 {
		t.Errorf("greeter source %#v", c.Cluster("greeter").Source())
	}
	st := c.Cluster("static")
	if f, ok := st.Source().(*discovery.File); !ok || f.Path != filepath.Join("..", "examples", "gateway", "endpoints.yaml") {
		t.Errorf("static source %#v", st.Source())
	}
	if tb := st.TableBuilder(); tb == nil || st.SetConfig().Tables[0] != tb {
		t.Errorf("static table builder %v, set config %v", tb, st.SetConfig().Tables)
	}
	if p, ok := st.HashPolicy(); !ok || p.Header != "X-User" || p.Cookie != "session" || !p.ClientIP {
		t.Errorf("hash policy %+v", p)
	}
	if ct := st.ClientTLS(); ct == nil || ct.ServerName != "static.internal" || !slices.Equal(ct.NextProtos, []string{"h2"}) {
		t.Errorf("static client TLS %+v", ct)
	}
	if _, ok := c.Cluster("db").TableBuilder().(*balancer.MaglevConfig); !ok {
		t.Errorf("db table builder %T", c.Cluster("db").TableBuilder())
	}
}

func routeNames(rs []*Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// TestStaticEndpointsInAddressOrder: the endpoints listed in a file are
// handed to the balancer in address order, the order every discovery
// source emits (so the list applied at start and the source's first one
// agree, and round robin's rotation does not change when it arrives);
// each keeps its own weight and zone.
func TestStaticEndpointsInAddressOrder(t *testing.T) {
	c := mustParse(t, t.TempDir(), `{"version": 1, "listeners": [{"address": "127.0.0.1:8080"}],
		"routes": [{"cluster": "app"}], "clusters": [{"name": "app", "picker": "round_robin", "endpoints": [
			{"address": "127.0.0.1:9003", "weight": 3}, {"address": "127.0.0.1:9001", "zone": "a"}, "127.0.0.1:9002"]}]}`, noEnv)
	want := []balancer.Endpoint{
		{Addr: "127.0.0.1:9001", Weight: 1, Meta: map[string]string{"zone": "a"}},
		{Addr: "127.0.0.1:9002", Weight: 1},
		{Addr: "127.0.0.1:9003", Weight: 3},
	}
	if got := c.Clusters[0].StaticEndpoints(); !reflect.DeepEqual(got, want) {
		t.Fatalf("StaticEndpoints = %+v, want %+v", got, want)
	}
}
