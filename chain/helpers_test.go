package chain

import (
	"context"
	"encoding/json"
	"math"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/request"
)

// fields is a request's header: name/value pairs, names matched without
// regard to ASCII case.
type fields []string

func (f fields) Get(name string) (string, bool) {
	for i := 0; i+1 < len(f); i += 2 {
		if strings.EqualFold(f[i], name) {
			return f[i+1], true
		}
	}
	return "", false
}

func (f fields) Values(name string, fn func(string) bool) {
	for i := 0; i+1 < len(f); i += 2 {
		if strings.EqualFold(f[i], name) && !fn(f[i+1]) {
			return
		}
	}
}

// get returns a GET from peer 192.0.2.1 with the header pairs kv; trusted
// says whether the peer is a trusted proxy.
func get(trusted bool, kv ...string) *request.View {
	return viewOf("GET", "192.0.2.1:4000", trusted, kv...)
}

// viewOf returns a request of method from peer with the header pairs kv.
func viewOf(method, peer string, trusted bool, kv ...string) *request.View {
	return &request.View{Method: method, Host: "example.com", Path: "/items", Major: 1, Minor: 1,
		Client: netip.MustParseAddrPort(peer), Trusted: trusted, Header: fields(kv)}
}

// fakeClock is a clock tests move by hand; safe for concurrent use, since
// the Gate reads it on the goroutines of queued requests.
type fakeClock struct{ bits atomic.Uint64 }

func (c *fakeClock) Now() float64   { return math.Float64frombits(c.bits.Load()) }
func (c *fakeClock) Set(t float64)  { c.bits.Store(math.Float64bits(t)) }
func newClock(t float64) *fakeClock { c := &fakeClock{}; c.Set(t); return c }

// fakeLimits is a rate limiter that counts its Check calls and answers
// with verdict (allowed when nil).
type fakeLimits struct {
	checks, abandons atomic.Int64
	verdict          func(out *httplimit.Verdict)
}

func (f *fakeLimits) Check(_ context.Context, _ float64, _ *request.View, _ string, out *httplimit.Verdict) {
	f.checks.Add(1)
	*out = httplimit.Verdict{Allowed: true, RetryAfter: -1}
	if f.verdict != nil {
		f.verdict(out)
	}
}

func (f *fakeLimits) Abandon(*httplimit.Verdict) { f.abandons.Add(1) }

// refuse429 makes a rate limiter's verdict a 429 of rule per-ip with
// Retry-After 5 and RateLimit fields.
func refuse429(out *httplimit.Verdict) {
	*out = httplimit.Verdict{Status: 429, Rule: "per-ip", Reason: "ratelimit:per-ip", RetryAfter: 5,
		Body:   []byte(`{"status":429}`),
		Policy: []byte(`"per-ip";q=10;w=60`), Limit: []byte(`"per-ip";r=0;t=5`)}
}

// recAlg is a fixed limit of n that records the samples it is fed.
type recAlg struct {
	n       int
	mu      sync.Mutex
	samples []limit.Sample
}

func (a *recAlg) Update(s limit.Sample) int {
	a.mu.Lock()
	a.samples = append(a.samples, s)
	a.mu.Unlock()
	return a.n
}

func (a *recAlg) Limit() int { return a.n }

func (a *recAlg) seen() []limit.Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]limit.Sample(nil), a.samples...)
}

// newGate returns a Gate over a limiter of alg with cfg, reading clk,
// whose refusals carry Retry-After 7 exactly (no jitter).
func newGate(t testing.TB, alg limit.Algorithm, cfg limit.LimiterConfig, clk *fakeClock) *admit.Gate {
	t.Helper()
	lim, err := limit.NewLimiter(alg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := admit.New(admit.Config{Limiter: lim, Clock: clk, RetryAfter: 7, RetryJitter: -1})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// oneClass is a LimiterConfig of a single class (every request shares
// the whole limit).
var oneClass = limit.LimiterConfig{Shares: []float64{1}}

// guardOf returns an initialised guard with gate.
func guardOf(gate *admit.Gate) *Guard {
	g := &Guard{Gate: gate}
	g.Init()
	return g
}

// problem is a refusal's problem+json body.
type problem struct {
	Type, Title, Detail, Reason string
	Status                      int
}

// checkRefusal fails t unless ref is the answer (status, reason, Retry-After
// present or not, gRPC code) and its body the problem document with detail.
func checkRefusal(t *testing.T, ref *Refusal, status int, reason string, retry bool, grpc int, detail string) {
	t.Helper()
	if ref == nil {
		t.Fatalf("no refusal; want %d %s", status, reason)
	}
	if ref.Status != status || ref.Reason != reason || ref.Retry != retry || ref.GRPC != grpc {
		t.Errorf("refusal %d %q retry=%v grpc=%d; want %d %q retry=%v grpc=%d",
			ref.Status, ref.Reason, ref.Retry, ref.GRPC, status, reason, retry, grpc)
	}
	if ref.ContentType != "" {
		t.Errorf("content type %q; want \"\" (problem+json)", ref.ContentType)
	}
	var p problem
	if err := json.Unmarshal(ref.Body, &p); err != nil {
		t.Fatalf("body %q: %v", ref.Body, err)
	}
	want := problem{Type: "about:blank", Title: httpTitle[status], Detail: detail, Reason: reason, Status: status}
	if p != want {
		t.Errorf("body %+v; want %+v", p, want)
	}
	if !strings.HasPrefix(ref.GRPCMessage, reason+": ") {
		t.Errorf("grpc-message %q does not start with %q", ref.GRPCMessage, reason+": ")
	}
}

// httpTitle holds the reason phrases the refusals use.
var httpTitle = map[int]string{400: "Bad Request", 429: "Too Many Requests", 503: "Service Unavailable"}

// waitFor polls cond every millisecond for up to 10 s (for a request
// goroutine to reach the admission queue) and fails t if it never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// queued is the result of an Admit run on its own goroutine.
type queued struct {
	p   *Pass
	ref *Refusal
}

// admitAsync runs c.Admit for v at now on a goroutine; the result arrives
// on the channel returned.
func admitAsync(c *Chain, clk *fakeClock, now float64, v *request.View) <-chan queued {
	ch := make(chan queued, 1)
	go func() {
		p := new(Pass)
		ref := c.Admit(context.Background(), clk, now, v, p)
		ch <- queued{p, ref}
	}()
	return ch
}
