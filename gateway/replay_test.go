package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// TestRetryReplaysBody: a request with a body is retried on another
// endpoint with the same bytes when it is idempotent (PUT) or carries an
// Idempotency-Key, on both engines, for bodies of known length and
// chunked; a body longer than buffer_bytes is sent once (the 503 is
// forwarded), and so is a POST without a key.
func TestRetryReplaysBody(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	var busy, echoed atomic.Int64
	// Both endpoints read the whole body; the first answers 503 unless it
	// is the second attempt's turn, so every request meets a 503 once
	// when it lands there first.
	refuse := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		busy.Add(1)
		w.WriteHeader(503)
	})
	echo := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		echoed.Add(1)
		fmt.Fprintf(w, "%s %d %s", r.Method, len(b), b)
	})
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - cluster: app
    policies:
      retry: {attempts: 2, buffer_bytes: 1KiB, on: [503], backoff: {base: 1ms, cap: 2ms}, budget: {min_per_second: 1000}}
clusters: [{name: app, picker: round_robin, endpoints: ["`+refuse+`", "`+echo+`"]}]
`)
	url := "http://" + g.Addr("web") + "/x"
	small := strings.Repeat("b", 700)
	for _, c := range []*http.Client{h1Client(t), h2cClient(t)} {
		for i := 0; i < 4; i++ { // round robin: half start on the refusing endpoint
			for _, tc := range []struct {
				method, key string
				chunked     bool
			}{{"PUT", "", false}, {"POST", "k1", false}, {"PUT", "", true}} {
				code, body := send(t, c, tc.method, url, small, tc.key, tc.chunked)
				if want := fmt.Sprintf("%s 700 %s", tc.method, small); code != 200 || body != want {
					t.Fatalf("%s chunked=%v: %d %.40q, want 200 and the body echoed", tc.method, tc.chunked, code, body)
				}
			}
		}
	}
	if busy.Load() == 0 {
		t.Fatal("no request met the refusing endpoint: the test proves nothing")
	}
	big := strings.Repeat("B", 2000)
	saw503 := 0
	for i := 0; i < 4; i++ {
		for _, tc := range []struct{ method, key, body string }{{"PUT", "", big}, {"POST", "", small}} {
			code, _ := send(t, h1Client(t), tc.method, url, tc.body, tc.key, false)
			switch code {
			case 503:
				saw503++
			case 200:
			default:
				t.Fatalf("%s of %d bytes: %d", tc.method, len(tc.body), code)
			}
		}
	}
	if saw503 == 0 {
		t.Fatal("a body past buffer_bytes or a POST without a key was retried: no 503 forwarded")
	}
}

// send sends method with body (chunked: of unknown length) and returns the
// status and the answer's body.
func send(t *testing.T, c *http.Client, method, url, body, key string, chunked bool) (int, string) {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // hides the length: sent chunked (or with no length on HTTP/2)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestRouteChainSharedByListeners: a route on two listeners has one chain,
// so its bulkhead bounds the route, not each listener.
func TestRouteChainSharedByListeners(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		<-release
	})
	g := start(t, `
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: a, address: "127.0.0.1:0"}, {name: b, address: "127.0.0.1:0"}]
routes: [{name: r, cluster: app, policies: {max_concurrent: 1}}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`)
	done := make(chan int)
	go func() {
		code, _ := send(t, h1Client(t), "GET", "http://"+g.Addr("a")+"/x", "", "", false)
		done <- code
	}()
	<-held
	code, h, _ := fetch(t, h1Client(t), "GET", "http://"+g.Addr("b")+"/x", nil)
	close(release)
	if code != 503 || h.Get("Spillway-Reason") != "bulkhead" {
		t.Fatalf("second request, on the other listener: %d %q; want 503 bulkhead", code, h.Get("Spillway-Reason"))
	}
	if c := <-done; c != 200 {
		t.Fatalf("held request: %d", c)
	}
}
