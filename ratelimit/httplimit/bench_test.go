package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/request"
)

// discardWriter is a ResponseWriter that keeps only the header map
// (cleared between requests, so its buckets are reused) and the status:
// what is measured is the middleware, not a recorder.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) reset()                      { clear(w.h); w.code, w.n = 200, 0 }

// constStore answers every request with one decision, without allocating.
type constStore struct{ d ratelimit.Decision }

func (s constStore) AllowN(context.Context, string, float64, int) (ratelimit.Decision, error) {
	return s.d, nil
}

var nop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

func benchRequest() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api/items", nil)
	r.RemoteAddr = "192.0.2.1:4321"
	r.Header.Set("X-User-ID", "u42")
	r.Header.Set("X-Tenant-ID", "acme")
	return r
}

// The middleware's own allocations: one for the rate-limit headers of an
// allowed response, one for all the headers of a 429 (the body comes from
// a pool). The counts are not checked under the race detector, whose
// sync.Pool drops items at random.
func TestAllocations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      ratelimit.Decision
		code   int
		allocs float64
	}{
		{"allowed", ratelimit.Decision{Allowed: true, Remaining: 5, Reset: 1}, 200, 1},
		{"denied", ratelimit.Decision{RetryAfter: 20, Reset: 20}, 429, 1},
	} {
		store := func(rules.Rule) (ratelimit.Keyed, error) { return constStore{tc.d}, nil }
		l, _ := newLimiter(t, "rules:\n- {id: user-default, key: [user], rate: 100, per: 1m, burst: 20}\n", Config{Store: store})
		h, r := l.Handler(nop), benchRequest()
		w := &discardWriter{h: http.Header{}}
		got := testing.AllocsPerRun(1000, func() {
			w.reset()
			h.ServeHTTP(w, r)
		})
		if w.code != tc.code || (got != tc.allocs && !raceEnabled) {
			t.Errorf("%s: status %d, %v allocations per request; want %d, %v", tc.name, w.code, got, tc.code, tc.allocs)
		}
	}
}

func benchServe(b *testing.B, src string, want int) {
	set, err := rules.Parse("bench.yaml", []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(set, Config{Clock: clock.NewReal()})
	if err != nil {
		b.Fatal(err)
	}
	h, r := l.Handler(nop), benchRequest()
	w := &discardWriter{h: http.Header{}}
	w.reset()
	h.ServeHTTP(w, r) // the key exists from here on
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, r)
	}
	if w.code != want {
		b.Fatalf("status %d, want %d", w.code, want)
	}
}

// An allowed request under one GCRA rule keyed by user, in-memory store.
func BenchmarkAllowed(b *testing.B) {
	benchServe(b, "rules:\n- {id: user-default, key: [user], rate: 1e9, per: 1s, burst: 1000000000}\n", 200)
}

// A refused request (429 with headers and body) under the same rule.
func BenchmarkDenied(b *testing.B) {
	benchServe(b, "rules:\n- {id: user-default, key: [user], rate: 1, per: 1h, burst: 1}\n", 429)
}

// An allowed GET under the seed's four rules (login limited to POST
// /login): user-default and tenant decide, login does not match, otp-sms
// has no phone and is skipped.
func BenchmarkAllowedSeedRules(b *testing.B) {
	benchServe(b, `rules:
- {id: user-default, key: [user], rate: 1e9, per: 1m, burst: 1000000000}
- {id: login, key: [user, ip], rate: 10, per: 15m, match: {methods: [POST], paths: [/login]}}
- {id: otp-sms, key: [phone], rate: 3, per: 10m, failMode: closed}
- {id: tenant, key: [tenant], rate: 1e9, per: 1s, burst: 1000000000}
`, 200)
}

// A refused request whose key has two parts (user and ip): one more
// allocation, for the joined key.
func BenchmarkDeniedTwoPartKey(b *testing.B) {
	benchServe(b, "rules:\n- {id: login, key: [user, ip], rate: 1, per: 15m, burst: 1}\n", 429)
}

// checkRules are three rules that all match a request: by user, by ip and
// by tenant, each with one key part.
const checkRules = `rules:
- {id: user-default, key: [user], rate: 1e9, per: 1s, burst: 1000000000}
- {id: per-ip, key: [ip], rate: 1e9, per: 1s, burst: 1000000000}
- {id: tenant, key: [tenant], rate: 1e9, per: 1s, burst: 1000000000}
`

// checkCases are Check's allocation cases: 1 to 3 matching rules, an IPv6
// client, a client behind a trusted proxy, and a refusal (body and fields
// formatted in the Verdict).
var checkCases = []struct {
	name, src, peer string
	trusted         bool
	status          int
}{
	{"one rule", "rules:\n- {id: per-ip, key: [ip], rate: 1e9, per: 1s, burst: 1000000000}\n", "192.0.2.1:4321", false, 0},
	{"three rules", checkRules, "192.0.2.1:4321", false, 0},
	{"three rules, IPv6 client", checkRules, "[2001:db8::1]:4321", false, 0},
	{"three rules, behind a proxy", checkRules, "10.0.0.1:4321", true, 0},
	{"refused", "rules:\n- {id: per-ip, key: [ip], rate: 1, per: 1h, burst: 1}\n", "192.0.2.1:4321", false, 429},
	{"refused, second rule", "rules:\n- {id: user-default, key: [user], rate: 1e9, per: 1s, burst: 1000000000}\n" +
		"- {id: tenant, key: [tenant], rate: 1, per: 1h, burst: 1}\n", "192.0.2.1:4321", false, 429},
}

func checkView(peer string, trusted bool) *request.View {
	return view("GET", "/api/items", peer, trusted, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		"X-User-Id", "u42", "X-Tenant-Id", "acme", "X-Forwarded-For", "198.51.100.7, 10.0.0.2")
}

// Check allocates nothing on the in-memory store with a reused Verdict,
// allowed or refused (the first Check, which adds the keys and formats the
// address, is AllocsPerRun's warm-up).
func TestCheckAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	for _, tc := range checkCases {
		l, clk := newLimiter(t, tc.src, Config{})
		v, out := checkView(tc.peer, tc.trusted), &Verdict{}
		ctx := context.Background()
		got := testing.AllocsPerRun(1000, func() { l.Check(ctx, clk.Now(), v, "api", out) })
		if out.Status != tc.status || out.Allowed != (tc.status == 0) || got != 0 {
			t.Errorf("%s: status %d, allowed %v, %v allocations per Check; want %d, 0", tc.name, out.Status, out.Allowed, got, tc.status)
		}
		if tc.status == 0 && len(out.Limit) == 0 || tc.status != 0 && len(out.Body) == 0 {
			t.Errorf("%s: no fields or body: %+v", tc.name, out)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	for _, tc := range checkCases {
		b.Run(tc.name, func(b *testing.B) {
			set, err := rules.Parse("bench.yaml", []byte(tc.src))
			if err != nil {
				b.Fatal(err)
			}
			clk := clock.NewReal()
			l, err := New(set, Config{Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			v, out := checkView(tc.peer, tc.trusted), &Verdict{}
			ctx := context.Background()
			l.Check(ctx, clk.Now(), v, "api", out) // the keys exist from here on
			b.ReportAllocs()
			for b.Loop() {
				l.Check(ctx, clk.Now(), v, "api", out)
			}
			if out.Status != tc.status {
				b.Fatalf("status %d, want %d", out.Status, tc.status)
			}
		})
	}
}
