package proxy

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/spillwayhq/spillway/internal/syncbuf"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/upstream"
)

// logSetup starts a proxy whose access log is JSON in a buffer: /dead
// goes to a closed port, /hold to the gated backend's held requests,
// /sampled to a sampled route, the rest to a backend answering "hello"
// with the request id it saw in X-Seen-Id.
func logSetup(t *testing.T, h2 bool, sample float64) (string, *syncbuf.Buffer, *gated, string) {
	logs := &syncbuf.Buffer{}
	g, held := newGated(t)
	hello := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Seen-Id", r.Header.Get("X-Request-Id"))
		_, _ = io.WriteString(w, "hello")
	}))
	deadAddr := closedAddr(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, hello), MaxBodyBytes: 10, AccessLog: LogFull}
	hold := &Route{Name: "hold", Cluster: newCluster(t, "held", upstream.Config{}, held), AccessLog: LogFull}
	dead := &Route{Name: "dead", Cluster: newCluster(t, "dead", upstream.Config{}, deadAddr), AccessLog: LogFull}
	sampled := &Route{Name: "sampled", Cluster: rt.Cluster, AccessLog: LogSampled, AccessSample: sample}
	routes := routerFunc(func(v *request.View) (*Route, bool) {
		switch v.Path {
		case "/dead":
			return dead, true
		case "/hold":
			return hold, true
		case "/sampled":
			return sampled, true
		}
		return rt, true
	})
	addr, _ := startProxy(t, Config{HTTP2: h2, AccessLog: slog.New(slog.NewJSONHandler(logs, nil))}, routes)
	return addr, logs, g, deadAddr
}

// accessLines returns the access log lines written so far, decoded,
// once there are n of them (5 s at most).
func accessLines(t *testing.T, logs *syncbuf.Buffer, n int) []map[string]any {
	t.Helper()
	var out []map[string]any
	waitFor(t, "access log lines", func() bool {
		out = out[:0]
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if l == "" || json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "access" {
				continue
			}
			out = append(out, m)
		}
		return len(out) >= n
	})
	return out
}

// logCase is one request and the fields its line must have (numbers as
// JSON decodes them); "bytes_out" is checked against what the client
// received, request_id against what the backend saw when it is "seen".
type logCase struct {
	method, path, body, id string
	want                   map[string]any
	upstream               bool // upstream_ms present
}

func logCases(dead string) []logCase {
	return []logCase{
		{"POST", "/p?secret=1", "abcde", "client-id-1", map[string]any{
			"route": "r", "method": "POST", "host": "a", "path": "/p", "status": 200.0, "reason": "",
			"cluster": "app", "bytes_in": 5.0, "request_id": "client-id-1", "attempts": 1.0, "client": "127.0.0.1",
		}, true},
		{"GET", "/", "", "", map[string]any{"route": "r", "status": 200.0, "bytes_in": 0.0, "request_id": "seen", "attempts": 1.0}, true},
		{"GET", "/dead", "", "", map[string]any{
			"route": "dead", "status": 502.0, "reason": "upstream-refused", "cluster": "dead", "endpoint": dead, "attempts": 1.0,
		}, false},
		{"POST", "/", "01234567890", "", map[string]any{
			"route": "r", "status": 413.0, "reason": "body-too-large", "endpoint": "", "bytes_in": 0.0, "attempts": 0.0,
		}, false},
	}
}

// rawDial opens a connection closed at the end of the test.
func rawDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// checkLine compares a line with a case, given what the client received.
func checkLine(t *testing.T, line map[string]any, tc logCase, body, seenID string) {
	t.Helper()
	for k, v := range tc.want {
		if k == "request_id" && v == "seen" {
			if line[k] != seenID || !hexID.MatchString(seenID) {
				t.Errorf("%s %s: request_id %v, the backend saw %q", tc.method, tc.path, line[k], seenID)
			}
			continue
		}
		if line[k] != v {
			t.Errorf("%s %s: %s = %#v, want %#v (line %v)", tc.method, tc.path, k, line[k], v, line)
		}
	}
	if line["bytes_out"] != float64(len(body)) {
		t.Errorf("%s %s: bytes_out %v, the client received %d", tc.method, tc.path, line["bytes_out"], len(body))
	}
	up, hasUp := line["upstream_ms"].(float64)
	if hasUp != tc.upstream {
		t.Errorf("%s %s: upstream_ms %v, want present %v", tc.method, tc.path, line["upstream_ms"], tc.upstream)
	}
	if d, _ := line["duration_ms"].(float64); d < up || d > 5000 {
		t.Errorf("%s %s: duration_ms %v, upstream_ms %v", tc.method, tc.path, d, up)
	}
}

// runLogCases sends the cases with cl and checks their lines.
func runLogCases(t *testing.T, cl *http.Client, addr string, logs *syncbuf.Buffer, dead string) {
	for i, tc := range logCases(dead) {
		req, err := http.NewRequest(tc.method, "http://"+addr+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "A:8080"
		if tc.body == "" {
			req.Body = nil
		}
		if tc.id != "" {
			req.Header.Set("X-Request-Id", tc.id)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		lines := accessLines(t, logs, i+1)
		checkLine(t, lines[i], tc, string(b), resp.Header.Get("X-Seen-Id"))
	}
}

func TestAccessLogH1(t *testing.T) {
	noLeaks(t)
	addr, logs, g, dead := logSetup(t, false, 0)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	runLogCases(t, &http.Client{Transport: tr}, addr, logs, dead)
	c := rawDial(t, addr)
	_, _ = io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: a\r\n\r\n")
	g.waitEntered(t, 1)
	_ = c.Close()
	line := accessLines(t, logs, 5)[4]
	if line["status"] != 499.0 || line["reason"] != "client-gone" || line["route"] != "hold" {
		t.Fatalf("client gone: %v", line)
	}
}

func TestAccessLogH2(t *testing.T) {
	noLeaks(t)
	addr, logs, g, dead := logSetup(t, true, 0)
	runLogCases(t, h2cClient(t), addr, logs, dead)
	p := dialH2(t, addr)
	p.get(1, "/hold")
	g.waitEntered(t, 1)
	_ = p.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	line := accessLines(t, logs, 5)[4]
	if line["status"] != 499.0 || line["reason"] != "client-gone" || line["route"] != "hold" {
		t.Fatalf("stream reset: %v", line)
	}
}

// TestAccessLogSampled: a sampled route logs none of its requests at
// share 0, all at share 1, and about half at 0.5 (200 requests: between
// 50 and 150, a bound missed with probability below 1e-12).
func TestAccessLogSampled(t *testing.T) {
	noLeaks(t)
	for _, tc := range []struct {
		share  float64
		n      int
		lo, hi int
	}{{0, 50, 0, 0}, {1, 50, 50, 50}, {0.5, 200, 50, 150}} {
		addr, logs, _, _ := logSetup(t, false, tc.share)
		tr := &http.Transport{}
		cl := &http.Client{Transport: tr}
		for i := 0; i < tc.n; i++ {
			resp, err := cl.Get("http://" + addr + "/sampled")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		// A line of the fully logged route marks the end: its request
		// follows the others on the same kept-alive connection, which
		// writes a request's line before it reads the next request.
		resp, err := cl.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		tr.CloseIdleConnections()
		waitFor(t, "the marker line", func() bool { return strings.Contains(logs.String(), `"route":"r"`) })
		got := strings.Count(logs.String(), `"route":"sampled"`)
		if got < tc.lo || got > tc.hi {
			t.Errorf("share %v: %d of %d requests logged, want %d to %d", tc.share, got, tc.n, tc.lo, tc.hi)
		}
	}
}
