package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/internal/syncbuf"
)

// TestRateLimitKeyIgnoresSpoofedXFF: the ip key part is the peer's
// address unless the peer is one of the listener's trusted_proxies. From
// an untrusted peer two requests with different X-Forwarded-For share one
// budget (burst 1: the second is refused); from a trusted peer each
// forwarded address has its own (both pass, and a third from the first
// address is refused: the key is that address).
func TestRateLimitKeyIgnoresSpoofedXFF(t *testing.T) {
	noLeaks(t)
	be := startBackendFunc(t, func(http.ResponseWriter, *http.Request) {})
	for _, trusted := range []bool{false, true} {
		proxies := `[]`
		if trusted {
			proxies = `["127.0.0.1/32"]`
		}
		g := start(t, fmt.Sprintf(`
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0", trusted_proxies: %s}]
routes:
  - cluster: app
    policies: {ratelimit: {rules: [{id: per-ip, key: [ip], rate: 1, per: 1h, burst: 1}]}}
clusters: [{name: app, endpoints: ["%s"]}]
`, proxies, be))
		c, url := h1Client(t), "http://"+g.Addr("web")+"/x"
		xff := func(addr string) int {
			code, _, _ := fetch(t, c, "GET", url, http.Header{"X-Forwarded-For": {addr}})
			return code
		}
		got := []int{xff("192.0.2.1"), xff("198.51.100.2"), xff("192.0.2.1")}
		want := []int{200, 429, 429}
		if trusted {
			want = []int{200, 200, 429}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("trusted peer %v: X-Forwarded-For 192.0.2.1, 198.51.100.2, 192.0.2.1 answered %v, want %v", trusted, got, want)
		}
	}
}

// The fleet test's rule: 100 per day with a burst of 100 (the brief's
// "100 per 10 s", over a day so that nothing refills while the test runs,
// however slow the machine: the count admitted is then exactly the burst).
const fleetRule = `{id: fleet, key: [ip], rate: 100, per: 1d, burst: 100}`

const fleetConfig = `
version: 1
admin: {address: "%s"}
listeners: [{name: web, address: "%s"}]
ratelimit:
  store: redis
  redis: {addresses: ["%s"], prefix: %s, timeout: 1s}
  %s
routes: [{cluster: app, policies: {retry: {attempts: 1}, ratelimit: {rules: [` + fleetRule + `]}}}]
clusters: [{name: app, endpoints: ["%s"]}]
`

// TestTwoGatewayProcessesOneLimit: two spillway processes (./cmd/spillway
// built once, each run as `spillway serve FILE`) on one Redis of the
// test's own enforce one limit: 300 requests from one client address,
// alternating between the gateways, 8 at a time. Without leasing exactly
// the limit (100) is admitted. With leasing (size 10, ttl 1s) at most the
// documented bound (docs/CONFIG.md, ratelimit.leasing: the limit over
// W + ttl; nothing refills here, so the limit itself), and at least the
// limit less the units a lease may strand (size + size/2 per gateway);
// and the first request takes a whole lease, 10 units, from Redis (read
// from the rule's key), so leasing is seen to be on.
func TestTwoGatewayProcessesOneLimit(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	be := startBackendFunc(t, func(http.ResponseWriter, *http.Request) {})
	bin := buildSpillway(t)
	for _, lease := range []bool{false, true} {
		name, section := "exact", ""
		if lease {
			name, section = "leasing", "leasing: {size: 10, ttl: 1s}"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var urls []string
			for i := range 2 {
				admin, web := freeAddr(t), freeAddr(t)
				path := filepath.Join(dir, fmt.Sprintf("gw%d.yaml", i))
				writeFile(t, path, fmt.Sprintf(fleetConfig, admin, web, srv.Addr(), "rl-"+name, section, be))
				runSpillway(t, bin, path, admin)
				urls = append(urls, "http://"+web+"/x")
			}
			first := fleetSend(t, urls[:1], 1)
			if first[0] != 1 {
				t.Fatalf("the first request: %v admitted, want 1", first)
			}
			units := chargedUnits(t, rdb, "rl-"+name+":{127.0.0.1}:fleet", 864)
			wantUnits := 1
			if lease {
				wantUnits = 10
			}
			if units != wantUnits {
				t.Errorf("Redis charged %d units for the first request, want %d", units, wantUnits)
			}
			byGw := fleetSend(t, urls, 299)
			admitted := 1 + byGw[0] + byGw[1]
			t.Logf("admitted %d of 300 (gateway 0: %d, gateway 1: %d)", admitted, 1+byGw[0], byGw[1])
			if byGw[0] == 0 || byGw[1] == 0 {
				t.Errorf("admitted by gateway: %v; want both to admit some", byGw)
			}
			switch {
			case !lease && admitted != 100:
				t.Errorf("without leasing: %d admitted, want exactly the limit, 100", admitted)
			case lease && (admitted > 100 || admitted < 100-2*(10+5)):
				t.Errorf("with leasing: %d admitted, want at most the limit over W + ttl (100: nothing refills) and at least 100 − 2 × (10 + 5) stranded", admitted)
			}
		})
	}
}

// fleetSend sends n GET requests, 8 at a time, the i-th to
// urls[i%len(urls)], and returns how many each URL admitted (200); any
// answer but 200 or the rule's 429 fails t.
func fleetSend(t *testing.T, urls []string, n int) []int {
	t.Helper()
	clients := make([]*http.Client, len(urls))
	for i := range clients {
		clients[i] = h1Client(t)
	}
	var mu sync.Mutex
	admitted := make([]int, len(urls))
	var errs []string
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				k := i % len(urls)
				code, reason, err := fleetGet(clients[k], urls[k])
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err.Error())
				case code == 200:
					admitted[k]++
				case code != 429 || reason != "ratelimit:fleet":
					errs = append(errs, fmt.Sprintf("%s: %d %s", urls[k], code, reason))
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d bad answers, the first: %s", len(errs), errs[0])
	}
	return admitted
}

func fleetGet(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Spillway-Reason"), nil
}

// chargedUnits reads a GCRA key on Redis (redisstore's layout: the TAT in
// µs, "q" or "q:r") and returns the units it holds charged, for an
// emission interval of interval seconds: (TAT − Redis's now) / interval,
// rounded.
func chargedUnits(t *testing.T, rdb *redis.Client, key string, interval float64) int {
	t.Helper()
	ctx := context.Background()
	v, err := rdb.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	q, _, _ := strings.Cut(v, ":")
	tat, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		t.Fatalf("GET %s: %q is not a TAT", key, v)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := float64(tat-now.UnixMicro()) / 1e6
	return int(ahead/interval + 0.5)
}

// freeAddr returns a loopback address on which nothing listened a moment
// ago, for a child process to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// buildSpillway builds ./cmd/spillway into the test's temporary directory
// with the go command that runs the tests.
func buildSpillway(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build cmd/spillway: %v", err)
	}
	out := filepath.Join(t.TempDir(), "spillway")
	began := time.Now()
	cmd := exec.Command(gobin, "build", "-o", out, "github.com/spillwayhq/spillway/cmd/spillway")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/spillway: %v\n%s", err, b)
	}
	t.Logf("go build ./cmd/spillway: %v", time.Since(began).Round(time.Millisecond))
	return out
}

// runSpillway runs `bin serve path` until the test ends (SIGTERM, then
// SIGKILL after 10 s) and waits until its admin at admin answers /ready.
// Its output is shown if the test fails.
func runSpillway(t *testing.T, bin, path, admin string) {
	t.Helper()
	var out syncbuf.Buffer
	cmd := exec.Command(bin, "serve", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("spillway serve %s: no exit within 10 s of SIGTERM", path)
		}
		if t.Failed() {
			t.Logf("spillway serve %s:\n%s", path, out.String())
		}
	})
	c := h1Client(t)
	eventually(t, 20*time.Second, "spillway serve "+path+" ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("spillway serve %s exited: %v\n%s", path, werr, out.String())
		default:
		}
		resp, err := c.Get("http://" + admin + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}
