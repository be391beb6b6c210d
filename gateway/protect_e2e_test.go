package gateway

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/overload"
)

// The goroutine thresholds of TestOverloadGoroutines, above the test
// process's goroutines at its start (the gateway adds a few dozen at most),
// and the goroutines each batch of idle connections puts beyond a
// threshold (other goroutines come and go: this is the margin for them).
const (
	protSoft   = 200
	protHard   = 500
	protMargin = 40
)

// TestOverloadGoroutines: the overload guard on the gateway's real
// goroutine count. Idle client connections (each held by one gateway
// goroutine waiting for its first request) past goroutines_soft turn
// keep-alive off: a kept-alive connection's next answer carries
// "Connection: close" and the connection closes after it. More past
// goroutines_hard: a new connection is closed at accept, unanswered, while
// one opened before is still answered. Closing the second batch brings the
// guard back to keep-alive-off (below 90% of hard, still above soft), the
// first back to normal, where a new connection is kept alive again. Each
// of the four transitions is counted once (Guard.Stats, and
// spillway_overload_actions_total) and logged once.
func TestOverloadGoroutines(t *testing.T) {
	noLeaks(t)
	be := named(t, "app")
	base := runtime.NumGoroutine()
	soft, hard := base+protSoft, base+protHard
	rec := &logRecorder{}
	g := startOpts(t, fmt.Sprintf(`
version: 1
admin: {address: "127.0.0.1:0"}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: app}]
clusters: [{name: app, endpoints: ["%s"]}]
overload: {goroutines_soft: %d, goroutines_hard: %d, interval: 20ms}
`, be, soft, hard), Options{Logger: slog.New(rec)})
	addr := g.Addr("web")
	probes := make([]*rawConn, 3)
	for i := range probes {
		probes[i] = dialKept(t, addr)
	}
	if n := runtime.NumGoroutine(); n+2*protMargin > soft {
		t.Fatalf("%d goroutines with the gateway started (%d before): too close to goroutines_soft %d", n, base, soft)
	}

	first := openIdle(t, addr, soft+protMargin-runtime.NumGoroutine())
	waitState(t, g, overload.KeepAliveOff)
	eventually(t, 5*time.Second, "an answer with Connection: close, then the connection closed", func() bool {
		return probes[0].closedAfter(t)
	})
	checkActions(t, g, 1, 0, false)

	second := openIdle(t, addr, hard+protMargin-runtime.NumGoroutine())
	waitState(t, g, overload.Refuse)
	refusedAtAccept(t, g, addr)
	if code, conn, err := probes[1].get(t); err != nil || code != 200 || conn != "close" {
		t.Fatalf("a connection opened before refuse: %d Connection=%q %v, want 200 close", code, conn, err)
	}

	closeConns(second)
	waitState(t, g, overload.KeepAliveOff)
	closeConns(first)
	waitState(t, g, overload.Normal)
	eventually(t, 5*time.Second, "a new connection kept alive", func() bool {
		return dialConn(t, addr).keptAlive(t)
	})
	if !probes[2].keptAlive(t) {
		t.Fatal("a connection opened before the overload: Connection: close back in normal")
	}
	checkActions(t, g, 2, 1, true)
	checkTransitions(t, g, rec, soft, hard)
}

// rawConn is a client connection with a 10 s deadline on each exchange.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialConn(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, br := dialRaw(t, addr)
	return &rawConn{c, br}
}

// get sends GET /x and reads the answer: its status and "close" when it
// carried Connection: close (which ReadResponse takes out of the header
// into Response.Close), else "".
func (r *rawConn) get(t *testing.T) (int, string, error) {
	t.Helper()
	_ = r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(r.c, crlf("GET /x HTTP/1.1\nHost: gw\n\n")); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "app /x" {
		return 0, "", fmt.Errorf("body %q: %v", b, err)
	}
	conn := resp.Header.Get("Connection")
	if resp.Close {
		conn = "close"
	}
	return resp.StatusCode, conn, nil
}

// refusedAtAccept: a new connection gets no answer (the dial itself may
// fail: the gateway's close can reach the client before its handshake
// ends), and the guard counts one more connection refused for overload.
func refusedAtAccept(t *testing.T, g *Gateway, addr string) {
	t.Helper()
	before := g.guard.Stats().Refused[overload.ReasonOverload]
	if c, err := net.Dial("tcp", addr); err == nil {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, crlf("GET /x HTTP/1.1\nHost: gw\n\n")) // may fail: closed at accept
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			t.Fatalf("a new connection was answered %d in state refuse", resp.StatusCode)
		}
	}
	eventually(t, 5*time.Second, "the connection counted as refused for overload", func() bool {
		return g.guard.Stats().Refused[overload.ReasonOverload] > before
	})
}

// keptAlive sends two requests and reports whether both were answered
// without Connection: close; false (connection closed) if the first was.
func (r *rawConn) keptAlive(t *testing.T) bool {
	t.Helper()
	for range 2 {
		code, conn, err := r.get(t)
		if err != nil || code != 200 {
			t.Fatalf("GET: %d %v", code, err)
		}
		if conn != "" {
			_ = r.c.Close()
			return false
		}
	}
	return true
}

// closedAfter sends a GET: true if its answer carried Connection: close
// and the gateway then closed the connection; false if it was kept alive.
func (r *rawConn) closedAfter(t *testing.T) bool {
	t.Helper()
	code, conn, err := r.get(t)
	switch {
	case err != nil || code != 200:
		t.Fatalf("GET on a kept-alive connection: %d %v", code, err)
	case conn == "":
		return false
	case conn != "close":
		t.Fatalf("Connection: %q", conn)
	}
	if n, err := r.br.ReadByte(); err != io.EOF {
		t.Fatalf("after Connection: close, read %q %v, want EOF", n, err)
	}
	return true
}

// dialKept opens a connection whose first request is answered with
// keep-alive: it stays open, idle.
func dialKept(t *testing.T, addr string) *rawConn {
	t.Helper()
	r := dialConn(t, addr)
	if code, conn, err := r.get(t); err != nil || code != 200 || conn != "" {
		t.Fatalf("first GET: %d Connection=%q %v, want 200 kept alive", code, conn, err)
	}
	return r
}

// openIdle opens n connections that send nothing (closed at cleanup). A
// dial may fail: once the guard refuses, the gateway closes a connection at
// accept, which can reset the client's before its handshake ends.
func openIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	out := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue
		}
		t.Cleanup(func() { _ = c.Close() })
		out = append(out, c)
	}
	return out
}

func closeConns(cs []net.Conn) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// waitState waits for the guard to be in state want.
func waitState(t *testing.T, g *Gateway, want overload.State) {
	t.Helper()
	eventually(t, 10*time.Second, "overload state "+want.String(), func() bool {
		return g.guard.State() == want
	})
	st := g.guard.Stats()
	t.Logf("state %v at %d goroutines (process now: %d)", st.State, st.Goroutines, runtime.NumGoroutine())
}

// checkActions checks the guard's transitions into keepalive-off and
// refuse in Stats and in /metrics, and with refused, that the connections
// refused at accept are counted there (at least the test's one).
func checkActions(t *testing.T, g *Gateway, keepOff, refuse uint64, refused bool) {
	t.Helper()
	st := g.guard.Stats()
	if st.Transitions[overload.KeepAliveOff] != keepOff || st.Transitions[overload.Refuse] != refuse {
		t.Errorf("transitions %v, want %d into keepalive-off and %d into refuse", st.Transitions, keepOff, refuse)
	}
	want := []string{
		fmt.Sprintf(`spillway_overload_actions_total{action="keepalive-off"} %d`, keepOff),
		fmt.Sprintf(`spillway_overload_actions_total{action="refuse-all"} %d`, refuse),
	}
	n := st.Refused[overload.ReasonOverload]
	if refused {
		if n == 0 {
			t.Error("no connection counted as refused for overload")
		}
		want = append(want, fmt.Sprintf(`spillway_overload_actions_total{action="refuse-overload"} %d`, n))
	}
	text := scrapeOnce(t, g)
	for _, l := range want {
		if !strings.Contains(text, "\n"+l+"\n") {
			t.Errorf("/metrics lacks %s; its lines:\n%s", l, grepLines(text, "spillway_overload_actions_total"))
		}
	}
}

// scrapeOnce reads /metrics on a connection it closes (no goroutine of
// the client or the admin server stays behind).
func scrapeOnce(t *testing.T, g *Gateway) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	code, _, body := fetch(t, c, "GET", "http://"+g.AdminAddr()+"/metrics", nil)
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	return body
}

// checkTransitions: each transition was logged once, Warn going up and
// Info going down, with the goroutine thresholds.
func checkTransitions(t *testing.T, g *Gateway, rec *logRecorder, soft, hard int) {
	t.Helper()
	want := []string{
		"WARN normal→keepalive-off", "WARN keepalive-off→refuse",
		"INFO refuse→keepalive-off", "INFO keepalive-off→normal",
	}
	var got []string
	rec.mu.Lock()
	for _, r := range rec.recs {
		if !strings.HasPrefix(r.Message, "overload: state") {
			continue
		}
		a := map[string]string{}
		r.Attrs(func(x slog.Attr) bool { a[x.Key] = x.Value.String(); return true })
		got = append(got, r.Level.String()+" "+a["from"]+"→"+a["to"])
		if a["goroutines_soft"] != fmt.Sprint(soft) || a["goroutines_hard"] != fmt.Sprint(hard) {
			t.Errorf("%q logged thresholds %s and %s, want %d and %d", r.Message, a["goroutines_soft"], a["goroutines_hard"], soft, hard)
		}
	}
	rec.mu.Unlock()
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("overload log lines %q, want %q", got, want)
	}
	if tr := g.guard.Stats().Transitions; tr != [3]uint64{1, 2, 1} {
		t.Errorf("transitions into normal, keepalive-off, refuse: %v, want [1 2 1]", tr)
	}
}
