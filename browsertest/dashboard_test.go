package browsertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/gateway"
	"github.com/spillwayhq/spillway/internal/leakcheck"
)

const (
	routes       = 5
	endpoints    = 10 // per route, each route its own cluster
	adminToken   = "browser-test-token"
	screenWidth  = 1366
	screenHeight = 768
)

// TestDashboardInChromium: with 5 routes × 10 endpoints under about 50
// requests a second, the dashboard (logged in with the admin token
// through its form, never in a URL) receives points in its charts, shows
// an endpoint drained through the admin API as draining within 5 s, has
// no horizontal scroll at 1366×768, and leaves a screenshot.
func TestDashboardInChromium(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) }) // last: after the servers' cleanups
	exec := chromium(t)
	g, eps := startGateway(t)
	stopLoad := sendLoad(g.Addr("web"), 50)

	ctx, cancel := browser(t, exec)
	base := "http://" + g.AdminAddr()
	must(t, "open the dashboard", chromedp.Do(ctx,
		chromedp.EmulateViewport(screenWidth, screenHeight),
		chromedp.Navigate(base+"/dashboard"),
		chromedp.WaitVisible("#login"),
	))
	must(t, "log in", chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](
		`document.querySelector("#login input[name=token]").value = "`+adminToken+`";
		 document.getElementById("login").requestSubmit()`)))
	waitFor(t, ctx, 15*time.Second, "the charts to receive data",
		`+document.body.dataset.samples >= 3 && +document.body.dataset.points > 50 &&
		 document.querySelectorAll(".panel").length === `+fmt.Sprint(2*routes))
	if url, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); strings.Contains(url, adminToken) {
		t.Errorf("the token is in the URL: %s", url)
	}

	drained := eps[2][3]
	drain(t, base, "c3", drained)
	began := time.Now()
	waitFor(t, ctx, 5*time.Second, "the drained endpoint shown draining",
		`!!document.querySelector('.chip[data-endpoint="`+drained+`"][data-state="draining"]')`)
	t.Logf("drained endpoint shown draining after %v", time.Since(began).Round(10*time.Millisecond))

	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	must(t, "read scrollWidth", err)
	if width > screenWidth {
		t.Errorf("document is %d px wide at %d×%d: horizontal scroll", width, screenWidth, screenHeight)
	}
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	must(t, "screenshot", err)
	path := os.Getenv("SPILLWAY_SCREENSHOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "dashboard-1366x768.png")
	}
	must(t, "save the screenshot", os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot (%d×%d, %d bytes): %s", screenWidth, screenHeight, len(shot), path)

	cancel()
	stopLoad()
	shutdown(t, g)
}

// chromium returns the browser to run: SPILLWAY_CHROMIUM or Debian's.
func chromium(t *testing.T) string {
	exec := os.Getenv("SPILLWAY_CHROMIUM")
	if exec == "" {
		exec = "/usr/bin/chromium"
	}
	if _, err := os.Stat(exec); err != nil {
		t.Fatalf("no Chromium (apt-get install -y chromium, or set SPILLWAY_CHROMIUM): %v", err)
	}
	return exec
}

// browser starts a headless Chromium; the cancel ends it.
func browser(t *testing.T, exec string) (context.Context, context.CancelFunc) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exec), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(screenWidth, screenHeight), chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
	var once sync.Once
	stop := func() { once.Do(func() { tcancel(); cancel(); acancel() }) }
	t.Cleanup(stop)
	return ctx, stop
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitFor evaluates cond in the page every 100 ms until it is true.
func waitFor(t *testing.T, ctx context.Context, within time.Duration, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](
				`document.getElementById("status").textContent + " | samples " + document.body.dataset.samples + ", points " + document.body.dataset.points`))
			t.Fatalf("waited %v for %s (last error %v); page status: %s", within, what, err, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startGateway starts routes clusters of endpoints backends each behind a
// gateway on 127.0.0.1:0, admin on 127.0.0.1:0 with a token.
func startGateway(t *testing.T) (*gateway.Gateway, [][]string) {
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "version: 1\nadmin: {address: \"127.0.0.1:0\", token: %s}\nreload: {watch: false}\n", adminToken)
	cfg.WriteString("listeners: [{name: web, address: \"127.0.0.1:0\"}]\nroutes:\n")
	for r := 1; r <= routes; r++ {
		fmt.Fprintf(&cfg, "  - {name: r%d, match: {prefix: /r%d}, cluster: c%d}\n", r, r, r)
	}
	cfg.WriteString("clusters:\n")
	eps := make([][]string, routes)
	for c := range routes {
		for e := range endpoints {
			eps[c] = append(eps[c], startBackend(t, fmt.Sprintf("c%d-%d", c+1, e)))
		}
		fmt.Fprintf(&cfg, "  - name: c%d\n    endpoints: [\"%s\"]\n    admission: {algorithm: fixed, initial_limit: 40}\n",
			c+1, strings.Join(eps[c], `", "`))
	}
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	must(t, "write the config", os.WriteFile(file, []byte(cfg.String()), 0o600))
	loaded, err := config.Load(file)
	must(t, "load the config", err)
	g, err := gateway.Build(loaded, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, "build the gateway", err)
	must(t, "start the gateway", g.Start())
	t.Cleanup(func() { shutdown(t, g) })
	return g, eps
}

var shutdowns sync.Map

func shutdown(t *testing.T, g *gateway.Gateway) {
	if _, done := shutdowns.LoadOrStore(g, true); done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Errorf("gateway shutdown: %v", err)
	}
}

// startBackend serves a backend of 4 workers, 20 ms exponential.
func startBackend(t *testing.T, name string) string {
	b, err := backend.New(backend.Config{Name: name, Workers: 4, Queue: 16,
		Service: backend.Dist{Kind: backend.Exponential, Mean: 20 * time.Millisecond}})
	must(t, "backend", err)
	s := httptest.NewServer(b)
	t.Cleanup(func() { b.Close(); s.Close() })
	return strings.TrimPrefix(s.URL, "http://")
}

// sendLoad sends about rate requests a second over the routes until the
// returned stop is called (which waits for the requests in flight).
func sendLoad(addr string, rate float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	c := &http.Client{Timeout: 5 * time.Second}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := c.Get(fmt.Sprintf("http://%s/r%d/x", addr, i%routes+1))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done); wg.Wait(); c.CloseIdleConnections() })
	}
}

// drain drains one endpoint through the admin API.
func drain(t *testing.T, base, cluster, addr string) {
	req, err := http.NewRequest("POST", base+"/clusters/"+cluster+"/endpoints/"+addr+"/drain", nil)
	must(t, "drain request", err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	must(t, "drain", err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("drain %s: %d %s", addr, resp.StatusCode, body)
	}
}
