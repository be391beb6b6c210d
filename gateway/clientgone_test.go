package gateway

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// TestCloseAfterWholeAnswer: a client that closes its connection the
// moment it has read its whole answer was served — counted 2xx from the
// upstream, never client-gone — though the disconnect watcher may see the
// close before the exchange is wound up. (Before the fix about one
// request in ten of curl's was logged 499.)
func TestCloseAfterWholeAnswer(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // past a few sweeps: the watcher runs
		_, _ = w.Write([]byte("ok"))
	})
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: r, cluster: app}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`)
	const clients, rounds = 20, 10
	var wg sync.WaitGroup
	errs := make(chan string, clients*rounds)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < rounds; j++ {
				if err := getThenClose(g.Addr("web")); err != "" {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	hasSeries(t, g, `spillway_requests_total{cluster="app",code_class="2xx",route="r",source="upstream"} 200`)
	if text := metricsText(t, g); strings.Contains(text, `reason="client-gone"`) {
		t.Fatalf("a client that read its whole answer was counted gone:\n%s", grepLines(text, "client-gone"))
	}
}

// getThenClose sends one keep-alive GET, reads the whole answer and closes.
func getThenClose(addr string) string {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
		return err.Error()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err.Error()
	}
	var b [8]byte
	n, _ := resp.Body.Read(b[:])
	if resp.StatusCode != 200 || string(b[:n]) != "ok" {
		return "answer " + resp.Status + " " + string(b[:n])
	}
	return ""
}
