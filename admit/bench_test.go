package admit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// discard is a ResponseWriter reused across iterations, so the benchmark
// measures the middleware, not httptest.ResponseRecorder's buffers.
type discard struct {
	h      http.Header
	status int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.status = code }

func (d *discard) reset() {
	clear(d.h)
	d.status = 0
}

// BenchmarkHTTPReject is the refusal path: the limit is full, every request
// gets the pre-built 503.
func BenchmarkHTTPReject(b *testing.B) {
	l := newLimiter(b, 1, limit.LimiterConfig{Shares: oneShare})
	g := newGate(b, admit.Config{Limiter: l})
	h := g.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { b.Fatal("handler called") }), admit.HTTPOptions{})
	held, _ := l.Acquire(0, shed.Critical)
	defer held.Done(0, limit.Ignore)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := &discard{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, r)
	}
	if w.status != http.StatusServiceUnavailable {
		b.Fatalf("status %d", w.status)
	}
}

// BenchmarkHTTPAdmit is the admitted path with a no-op handler: class from
// the header, a place, the context, the outcome.
func BenchmarkHTTPAdmit(b *testing.B) {
	l := newLimiter(b, 1000, limit.LimiterConfig{})
	g := newGate(b, admit.Config{Limiter: l})
	h := g.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }), admit.HTTPOptions{})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set(shed.ClassHeader, "critical")
	w := &discard{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, r)
	}
	if w.status != 204 {
		b.Fatalf("status %d", w.status)
	}
}

// BenchmarkHTTPBare is the same no-op handler without the middleware, the
// baseline for BenchmarkHTTPAdmit.
func BenchmarkHTTPBare(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := &discard{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, r)
	}
}
