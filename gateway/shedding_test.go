package gateway

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	service "github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// TestREADMESheddingSession replays the README's shedding session on
// examples/gateway/shedding.yaml: 60 sheddable and 10 critical requests at
// once against a backend of 4 workers × 100 ms. Every critical request is
// served; exactly 30 sheddable ones are refused by the rate limit (429
// ratelimit:per-ip); the others are served or refused admit:queue (how
// many of each depends on timing); the backend sees only the requests
// answered 200. Each request has its own connection, as curl's.
func TestREADMESheddingSession(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	be, err := service.New(service.Config{Workers: 4, Queue: 1000,
		Service: service.Dist{Kind: service.Constant, Mean: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: be}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); be.Close() })
	cfg := loadExample(t, "shedding.yaml")
	cfg.Clusters[0].Endpoints[0].Address = ln.Addr().String()
	g := launchExample(t, cfg)

	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	burst := func(route string, n int) {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				line := oneShot(t, "http://"+g.Addr("listener-0")+route)
				mu.Lock()
				counts[strings.SplitN(route, "/", 3)[1]+" "+line]++
				mu.Unlock()
			}()
		}
	}
	burst("/browse/x", 60)
	burst("/checkout/pay", 10)
	wg.Wait()
	t.Logf("%v", sorted(counts))
	served := counts["browse 200 "]
	if counts["checkout 200 "] != 10 || counts["browse 429 ratelimit:per-ip"] != 30 ||
		served+counts["browse 503 admit:queue"] != 30 || served < 2 {
		t.Fatalf("answers %v; want 10 critical 200, 30 sheddable 429 ratelimit:per-ip, the other 30 served (at least the 2 places) or 503 admit:queue", sorted(counts))
	}
	if st := be.Stats(); st.Arrived != int64(10+served) {
		t.Fatalf("the backend saw %d requests; want the %d answered 200", st.Arrived, 10+served)
	}
}

// oneShot sends GET url on a connection of its own and returns "status
// reason".
func oneShot(t *testing.T, url string) string {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return "error " + err.Error()
	}
	resp.Body.Close()
	return fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Spillway-Reason"))
}

func sorted(m map[string]int) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%d× %s", v, k))
	}
	sort.Strings(out)
	return out
}
