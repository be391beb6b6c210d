package httplimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// call is one AllowN a fake store saw.
type call struct {
	key  string
	now  float64
	cost int
}

// fakeStore answers with decide (allowed by default) and records calls.
type fakeStore struct {
	mu     sync.Mutex
	calls  []call
	decide func(key string, now float64, cost int) (ratelimit.Decision, error)
}

func (f *fakeStore) AllowN(_ context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{key, now, cost})
	f.mu.Unlock()
	if f.decide == nil {
		return ratelimit.Decision{Allowed: true, Remaining: 100}, nil
	}
	return f.decide(key, now, cost)
}

func (f *fakeStore) seen() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

var _ ratelimit.Keyed = (*fakeStore)(nil)

var errDown = errors.New("store down")

// mustRules parses a rules file or fails the test.
func mustRules(t testing.TB, src string) *rules.Set {
	t.Helper()
	set, err := rules.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// fakes returns a Store factory handing out the given stores by rule id
// (and in-memory stores for the others).
func fakes(stores map[string]ratelimit.Keyed) func(rules.Rule) (ratelimit.Keyed, error) {
	return func(r rules.Rule) (ratelimit.Keyed, error) {
		if s, ok := stores[r.ID]; ok {
			return s, nil
		}
		return ratelimit.NewMemory(r.Spec, ratelimit.MemoryConfig{MaxKeys: 1024})
	}
}

// hello counts its calls and answers "hello".
type hello struct{ n atomic.Int64 }

func (h *hello) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.n.Add(1)
	_, _ = io.WriteString(w, "hello\n")
}

// newLimiter builds a Limiter with a manual clock at t = 1000 unless cfg
// has a clock.
func newLimiter(t testing.TB, src string, cfg Config) (*Limiter, *clock.Manual) {
	t.Helper()
	clk := &clock.Manual{T: 1000}
	if cfg.Clock == nil {
		cfg.Clock = clk
	}
	l, err := New(mustRules(t, src), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// serve runs one request through h on a recorder.
func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func get(path string, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = "192.0.2.1:4321"
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

// count returns the decisions counter of a rule and outcome.
func count(l *Limiter, rule, outcome string) float64 {
	return testutil.ToFloat64(l.metrics.vec.WithLabelValues(rule, outcome))
}

// checkGoroutines fails the test if goroutines started during it are still
// running after a settling poll (at most 10 s: it ends as soon as they do,
// and a loaded machine may take seconds to run them to their end).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("%d goroutines before, %d after", before, n)
		}
	})
}
