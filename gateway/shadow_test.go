package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// logRecorder is a slog.Handler that keeps every record (attributes
// added by With are dropped: the lines tested here carry their own).
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// shadowLines sums the counts of the shadow lines logged so far by
// message, route, class and reason ("admission route=main class=default
// reason=limit"), and returns how many lines there were.
func (h *logRecorder) shadowLines() (map[string]uint64, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out, lines := map[string]uint64{}, 0
	for _, r := range h.recs {
		kind, ok := strings.CutSuffix(r.Message, " shadow: would have refused")
		if !ok {
			continue
		}
		lines++
		var count uint64
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "count" {
				count = a.Value.Uint64()
			} else if a.Key != "cluster" {
				kind += fmt.Sprintf(" %s=%s", a.Key, a.Value)
			}
			return true
		})
		out[kind] += count
	}
	return out, lines
}

// TestShadowLog: shadow admission and a shadow breaker refuse nothing,
// and the gateway's periodic summary logs, per route and kind, how many they
// would have refused since its last lines: none before any, the counts
// after (3 requests over a fixed limit of 1, 2 attempts to an open
// breaker), none again when nothing more was, and never a line for a
// shadow admission that refused nothing.
func TestShadowLog(t *testing.T) {
	noLeaks(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hold":
			arrived <- struct{}{}
			<-release
		case "/flaky":
			w.WriteHeader(500)
		}
	})
	rec := &logRecorder{}
	g := startOpts(t, `
version: 1
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: flaky, match: {prefix: /flaky}, cluster: flaky, policies: {retry: {attempts: 1}}}
  - {name: quiet, match: {prefix: /quiet}, cluster: quiet}
  - {name: main, cluster: app}
clusters:
  - name: app
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 1, shadow: true, shares: {critical: 1, default: 1, sheddable: 1}}
  - name: quiet
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 100, shadow: true}
  - name: flaky
    endpoints: ["`+be+`"]
    breaker: {threshold: 1, open: 1m, shadow: true}
`, Options{Logger: slog.New(rec)})
	g.logShadow(nil)
	if got, n := rec.shadowLines(); n != 0 {
		t.Fatalf("before any shadow refusal: %d lines %v", n, got)
	}
	c := h1Client(t)
	base := "http://" + g.Addr("web")
	done := make(chan int, 1)
	go func() { code, _, _ := fetch(t, c, "GET", base+"/hold", nil); done <- code }()
	<-arrived
	for _, path := range []string{"/x", "/y", "/z", "/quiet/x", "/flaky", "/flaky", "/flaky"} {
		want := map[bool]int{true: 500, false: 200}[path == "/flaky"]
		if code, _, _ := fetch(t, c, "GET", base+path, nil); code != want {
			t.Fatalf("GET %s: %d, want %d (shadow refuses nothing)", path, code, want)
		}
	}
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("held request: %d", code)
	}
	want := map[string]uint64{
		"admission route=main class=default reason=limit": 3, // /x /y /z while /hold held the place
		"breaker route=flaky class=default":               2, // the first /flaky opened it
	}
	// The gateway's own ticker logs them, within a period or two.
	eventually(t, 10*shadowLogEvery, "the shadow lines", func() bool { got, _ := rec.shadowLines(); return maps.Equal(got, want) })
	g.logShadow(nil)
	got, n := rec.shadowLines()
	if !maps.Equal(got, want) {
		t.Fatalf("shadow lines sum to %v; want %v", got, want)
	}
	g.logShadow(nil)
	if _, again := rec.shadowLines(); again != n {
		t.Fatalf("%d more lines with nothing more refused", again-n)
	}
}
