package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/internal/syncbuf"
)

// named starts a backend that answers its name.
func named(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// start builds and starts a gateway from YAML text.
func start(t *testing.T, yaml string) *Gateway { return startOpts(t, yaml, Options{}) }

// startOpts is start with options.
func startOpts(t testing.TB, yaml string, opts Options) *Gateway {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return launch(t, cfg, opts)
}

// launch builds and starts a gateway from cfg and shuts it down at
// cleanup (within 10 s, without error).
func launch(t testing.TB, cfg *config.Config, opts Options) *Gateway {
	t.Helper()
	g, err := Build(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return g
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTwoBackendsBalancedAndRouted(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	a, b, api := named(t, "a"), named(t, "b"), named(t, "api")
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {match: {prefix: /api}, cluster: api, rewrite: {prefix: /v2}}
  - {cluster: app}
clusters:
  - {name: app, picker: round_robin, endpoints: ["`+a+`", "`+b+`"]}
  - {name: api, endpoints: ["`+api+`"]}
`)
	base := "http://" + g.Addr("web")
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	seen := map[string]int{}
	for i := 0; i < 10; i++ {
		code, body := get(t, c, base+"/x")
		if code != 200 {
			t.Fatalf("status %d: %s", code, body)
		}
		seen[body]++
	}
	if seen["a /x"] != 5 || seen["b /x"] != 5 {
		t.Fatalf("round robin over two backends: %v, want 5 and 5", seen)
	}
	if code, body := get(t, c, base+"/api/users"); code != 200 || body != "api /v2/users" {
		t.Fatalf("prefix route with rewrite: %d %q", code, body)
	}
	if code, body := get(t, c, base+"/apix"); code != 200 || !strings.HasSuffix(body, " /apix") || strings.HasPrefix(body, "api") {
		t.Fatalf("/apix must not take the /api route: %d %q", code, body)
	}
	if code, _ := get(t, c, "http://"+g.AdminAddr()+"/ready"); code != 200 {
		t.Fatalf("admin /ready: %d", code)
	}
}

// TestOutlierEjects: an endpoint answering 500s is ejected after
// consecutive_5xx of them, and the rest of the traffic goes to the other.
func TestOutlierEjects(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	good := named(t, "good")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bad := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad", http.StatusInternalServerError)
	})}
	go func() { _ = bad.Serve(ln) }()
	t.Cleanup(func() { _ = bad.Close() })
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: app}]
clusters:
  - name: app
    picker: round_robin
    endpoints: ["`+good+`", "`+ln.Addr().String()+`"]
    health: {outlier: {consecutive_5xx: 3, base_ejection_time: 1h, max_ejection_percent: 50}}
`)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	fails := 0
	for i := 0; i < 40; i++ {
		if code, _ := get(t, c, "http://"+g.Addr("web")+"/"); code == 500 {
			fails++
		}
	}
	if fails != 3 {
		t.Fatalf("%d answers of 500, want exactly 3 (then the endpoint is ejected)", fails)
	}
}

// TestRingHashSticks: with picker ring_hash on a header, every request of
// one user reaches one backend, and users spread over both.
func TestRingHashSticks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	a, b := named(t, "a"), named(t, "b")
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: app}]
clusters:
  - {name: app, picker: ring_hash, hash_key: {header: X-User}, endpoints: ["`+a+`", "`+b+`"]}
`)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	backends := map[string]bool{}
	for u := 0; u < 20; u++ {
		first := ""
		for i := 0; i < 5; i++ {
			req, _ := http.NewRequest("GET", "http://"+g.Addr("web")+"/", nil)
			req.Header.Set("X-User", fmt.Sprint("user-", u))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if first == "" {
				first = string(body)
			} else if string(body) != first {
				t.Fatalf("user-%d reached %q then %q", u, first, body)
			}
		}
		backends[first] = true
	}
	if len(backends) != 2 {
		t.Fatalf("20 users all on %v", backends)
	}
}

// TestAccessLog: a route with access_log logs one line per request with
// its status and, for the gateway's own answers, the reason code.
func TestAccessLog(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	a := named(t, "a")
	cfg, err := config.Parse("test.yaml", []byte(`
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: logged, match: {prefix: /logged}, cluster: app, access_log: full}
  - {name: dead, match: {prefix: /dead}, cluster: dead, access_log: full}
  - {name: quiet, cluster: app}
clusters:
  - {name: app, endpoints: ["`+a+`"]}
  - {name: dead, endpoints: ["127.0.0.1:1"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	var buf syncbuf.Buffer
	g, err := Build(cfg, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Shutdown(context.Background()) })
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	get(t, c, "http://"+g.Addr("web")+"/logged/x")
	get(t, c, "http://"+g.Addr("web")+"/dead")
	get(t, c, "http://"+g.Addr("web")+"/quiet")
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer h2.CloseIdleConnections()
	get(t, h2, "http://"+g.Addr("web")+"/logged/h2")
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "msg=access") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("want 3 access lines (the quiet route logs nothing), got:\n%s", buf.String())
	}
	if !strings.Contains(lines[2], "route=logged method=GET") || !strings.Contains(lines[2], "status=200") {
		t.Errorf("HTTP/2 line: %s", lines[2])
	}
	if !strings.Contains(lines[0], "route=logged method=GET host=127.0.0.1") || !strings.Contains(lines[0], "status=200 reason=\"\"") {
		t.Errorf("first line: %s", lines[0])
	}
	if !strings.Contains(lines[1], "route=dead") || !strings.Contains(lines[1], "status=502 reason=upstream-refused") {
		t.Errorf("second line: %s", lines[1])
	}
}
