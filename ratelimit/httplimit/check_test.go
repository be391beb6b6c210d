package httplimit

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/request"
)

// fieldList is request.Header over name/value pairs in the order received,
// as an engine's parsed head gives them.
type fieldList [][2]string

func (f *fieldList) Get(name string) (string, bool) {
	for _, kv := range *f {
		if strings.EqualFold(kv[0], name) {
			return kv[1], true
		}
	}
	return "", false
}

func (f *fieldList) Values(name string, fn func(string) bool) {
	for _, kv := range *f {
		if strings.EqualFold(kv[0], name) && !fn(kv[1]) {
			return
		}
	}
}

// view returns a View of method and target (path as sent, with any
// query) from peer, with header pairs (name, value, name, value...).
func view(method, target, peer string, trusted bool, proxies []netip.Prefix, headers ...string) *request.View {
	path, query, _ := strings.Cut(target, "?")
	f := fieldList{}
	for i := 0; i+1 < len(headers); i += 2 {
		f = append(f, [2]string{headers[i], headers[i+1]})
	}
	return &request.View{Method: method, Host: "example.com", Path: path, Query: query, Major: 1, Minor: 1,
		Client: netip.MustParseAddrPort(peer), Trusted: trusted, Proxies: proxies, Header: &f}
}

// step is one request sent to both paths, with the status expected (by
// hand) and, when not empty, the RateLimit field.
type step struct {
	advance float64 // seconds the clocks move first
	method  string
	target  string
	peer    string
	headers []string
	status  int
	limit   string
}

// agreeRules: a GCRA rule per user (2/s, burst 3: expected values as in
// TestHeadersAndBodyOverLoopback), a login rule per ip behind 10/8, a
// fail-closed OTP rule whose store is down, a shadow rule per ip, a rule
// per route pattern, a rule whose store answers "never" (400), and a rule
// keyed by two parts.
const agreeRules = `trustedProxies: [10.0.0.0/8]
rules:
- {id: per-user, key: [user], rate: 2, per: 1s, burst: 3}
- {id: login, key: [ip], rate: 1, per: 1m, match: {methods: [POST], paths: [/login]}}
- {id: otp, key: [phone], rate: 3, per: 10m, failMode: closed, match: {paths: [/otp]}}
- {id: shadow-ip, key: [ip], rate: 1, per: 1h, shadow: true}
- {id: by-route, key: [route], rate: 1, per: 1h, match: {paths: ["/items/{id}"]}}
- {id: never, key: [user], rate: 5, per: 1s, match: {paths: [/big]}}
- {id: pair, key: [tenant, ip], rate: 1, per: 1h, match: {paths: [/pair]}}
`

var agreeSteps = []step{
	{0, "GET", "/a", "192.0.2.1:1", []string{"X-User-Id", "alice"}, 200, `"per-user";r=2;t=1`},
	{0, "GET", "/a?x=1", "192.0.2.1:1", []string{"X-User-Id", "alice"}, 200, `"per-user";r=1;t=1`},
	{0, "GET", "/b", "192.0.2.1:1", []string{"X-User-Id", "alice"}, 200, `"per-user";r=0;t=2`},
	{0, "GET", "/b", "192.0.2.1:1", []string{"X-User-Id", "alice"}, 429, `"per-user";r=0;t=1`},
	{0, "GET", "/b", "192.0.2.1:1", []string{"x-user-id", "bob"}, 200, `"per-user";r=2;t=1`},
	{0, "POST", "/login", "192.0.2.1:1", nil, 200, `"login";r=0;t=60`},
	{0, "POST", "/l%6Fgin", "192.0.2.1:1", nil, 429, `"login";r=0;t=60`},
	// a spoofed X-Forwarded-For from an untrusted peer changes nothing
	{0, "POST", "/login", "192.0.2.1:1", []string{"X-Forwarded-For", "203.0.113.9"}, 429, `"login";r=0;t=60`},
	// behind a trusted proxy the forwarded client is the key
	{0, "POST", "/login", "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.7, 10.0.0.2"}, 200, `"login";r=0;t=60`},
	{0, "POST", "/login", "10.0.0.3:1", []string{"X-Forwarded-For", "198.51.100.7"}, 429, ""},
	{0, "GET", "/otp", "192.0.2.2:1", []string{"X-Phone", "555"}, 503, ""},
	{0, "GET", "/big", "192.0.2.2:1", []string{"X-User-Id", "carol"}, 400, ""},
	{0, "GET", "/items/7", "192.0.2.3:1", nil, 200, `"by-route";r=0;t=3600`},
	{0, "GET", "/items/8", "192.0.2.4:1", nil, 429, `"by-route";r=0;t=3600`},
	{0, "GET", "/pair", "[2001:db8::1]:1", []string{"X-Tenant-Id", "a|b"}, 200, `"pair";r=0;t=3600`},
	{0, "GET", "/pair", "[2001:db8::2]:1", []string{"X-Tenant-Id", "a|b"}, 429, ""}, // same /64
	{0.5, "GET", "/b", "192.0.2.1:1", []string{"X-User-Id", "alice"}, 200, `"per-user";r=0;t=2`},
	{0, "GET", "/", "192.0.2.9:1", nil, 200, ""}, // only the shadow rule
}

// agreeLimiter builds a Limiter over agreeRules with its own stores, clock
// and log.
func agreeLimiter(t *testing.T, log *bytes.Buffer) (*Limiter, *clock.Manual) {
	never := constStore{ratelimit.Decision{RetryAfter: math.Inf(1)}}
	down := &fakeStore{decide: func(string, float64, int) (ratelimit.Decision, error) { return ratelimit.Decision{}, errDown }}
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	return newLimiter(t, agreeRules, Config{Store: fakes(map[string]ratelimit.Keyed{"never": never, "otp": down}),
		Logger: logger, LogsPerSecond: 100})
}

// Handler and Check, on two Limiters with the same rules and clocks, give
// the same answers (status, fields, body), counts and logs to the same
// requests; the statuses and RateLimit fields are also those worked out
// by hand.
func TestCheckAgreesWithHandler(t *testing.T) {
	var logH, logC bytes.Buffer
	lh, clkH := agreeLimiter(t, &logH)
	lc, clkC := agreeLimiter(t, &logC)
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	h := lh.Handler(&hello{})
	var v Verdict
	for i, s := range agreeSteps {
		clkH.Advance(s.advance)
		clkC.Advance(s.advance)
		r := httptest.NewRequest(s.method, s.target, nil)
		r.RemoteAddr = s.peer
		for j := 0; j+1 < len(s.headers); j += 2 {
			r.Header.Add(s.headers[j], s.headers[j+1])
		}
		w := serve(h, r)
		peer := netip.MustParseAddrPort(s.peer).Addr()
		vw := view(s.method, s.target, s.peer, trusted[0].Contains(peer), trusted, s.headers...)
		lc.Check(context.Background(), clkC.Now(), vw, "", &v)

		if w.Code != s.status {
			t.Errorf("step %d: Handler %d, want %d", i, w.Code, s.status)
		}
		if s.limit != "" && w.Header().Get("RateLimit") != s.limit {
			t.Errorf("step %d: Handler RateLimit %q, want %q", i, w.Header().Get("RateLimit"), s.limit)
		}
		compareVerdict(t, i, w, &v)
	}
	for _, id := range []string{"per-user", "login", "otp", "shadow-ip", "by-route", "never", "pair"} {
		for _, o := range []string{OutcomeAllowed, OutcomeDenied, OutcomeShadowDenied, OutcomeStoreError} {
			if a, b := count(lh, id, o), count(lc, id, o); a != b {
				t.Errorf("%s %s: Handler counted %v, Check %v", id, o, a, b)
			}
		}
	}
	// The shadow rule sees the requests no earlier rule refused: 6 from
	// 192.0.2.1 (5 over its limit) and 2 from 2001:db8::/64 (1 over).
	if got := count(lc, "shadow-ip", OutcomeShadowDenied); got != 6 {
		t.Errorf("shadow_denied %v, want 6", got)
	}
	if logH.String() != logC.String() || !strings.Contains(logC.String(), "shadow rule would refuse") {
		t.Errorf("logs differ:\nHandler:\n%s\nCheck:\n%s", &logH, &logC)
	}
}

// compareVerdict fails the test when Handler's response w and Check's
// verdict v differ.
func compareVerdict(t *testing.T, i int, w *httptest.ResponseRecorder, v *Verdict) {
	t.Helper()
	status := v.Status
	if v.Allowed {
		status = 200
	}
	retry := ""
	if v.RetryAfter >= 0 {
		retry = strconv.FormatInt(v.RetryAfter, 10)
	}
	got := []string{strconv.Itoa(status), retry, string(v.Policy), string(v.Limit)}
	want := []string{strconv.Itoa(w.Code), w.Header().Get("Retry-After"), w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit")}
	for k, name := range []string{"status", "Retry-After", "RateLimit-Policy", "RateLimit"} {
		if got[k] != want[k] {
			t.Errorf("step %d: Check %s %q, Handler %q", i, name, got[k], want[k])
		}
	}
	if v.Allowed {
		if v.Body != nil || v.Reason != "" {
			t.Errorf("step %d: allowed with body %q, reason %q", i, v.Body, v.Reason)
		}
		return
	}
	if string(v.Body) != w.Body.String() {
		t.Errorf("step %d: Check body\n%s\nHandler body\n%s", i, v.Body, w.Body)
	}
	if !strings.Contains(w.Body.String(), `"rule":"`+v.Rule+`"`) {
		t.Errorf("step %d: Rule %q, body %s", i, v.Rule, w.Body)
	}
	wantReason := "ratelimit:" + v.Rule
	if v.Status == 503 {
		wantReason = "ratelimit-unavailable:" + v.Rule
	}
	if v.Reason != wantReason {
		t.Errorf("step %d: Reason %q, want %q", i, v.Reason, wantReason)
	}
}

// A View's route name is the "route" part of rules that name no pattern;
// IdentityView resolves identity parts, falling back to the header.
func TestCheckRouteAndIdentity(t *testing.T) {
	id := func(v *request.View, name string) (string, bool) {
		if tok, ok := v.Get("Authorization"); ok {
			return name + ":" + strings.TrimPrefix(tok, "Bearer "), true
		}
		return "", false
	}
	l, rec := recording(t, "rules:\n- {id: r, key: [route, user], rate: 100, per: 1s}\n", Config{IdentityView: id})
	var v Verdict
	for _, tc := range []struct{ route, auth string }{{"api", "t1"}, {"static", ""}, {"", "t2"}} {
		vw := view("GET", "/x", "192.0.2.1:1", false, nil, "X-User-Id", "hdr")
		if tc.auth != "" {
			vw = view("GET", "/x", "192.0.2.1:1", false, nil, "X-User-Id", "hdr", "Authorization", "Bearer "+tc.auth)
		}
		l.Check(context.Background(), 1000, vw, tc.route, &v)
	}
	if got, want := strings.Join(rec.keys, " "), `api|user:t1 static|hdr`; got != want {
		t.Errorf("keys %q, want %q (no route name: rule skipped)", got, want)
	}
}

// A leaky queue's delays come back in the verdict (Check never sleeps):
// 20 per second with 5 waiting, at a fixed instant, the k-th request
// waits 50·k ms and the seventh is refused. Abandon turns a delayed
// verdict into Handler's 503 and counts it.
func TestCheckQueueAndAbandon(t *testing.T) {
	l, _ := newLimiter(t, "rules:\n- {id: q, key: [ip], rate: 20, per: 1s, burst: 5, algorithm: leaky-queue}\n", Config{})
	var v Verdict
	vw := view("GET", "/", "192.0.2.1:1", false, nil)
	for k := range 6 {
		l.Check(context.Background(), 1000, vw, "", &v)
		if !v.Allowed || math.Abs(v.Delay-0.05*float64(k)) > 1e-9 {
			t.Fatalf("request %d: allowed %v, delay %v; want %v", k, v.Allowed, v.Delay, 0.05*float64(k))
		}
	}
	l.Abandon(&v)
	want := `{"type":"about:blank","title":"Service Unavailable","status":503,` +
		`"detail":"The request ended while it waited in the queue of rule \"q\".","rule":"q"}` + "\n"
	if v.Allowed || v.Status != 503 || v.RetryAfter != -1 || v.Reason != "ratelimit-abandoned:q" || string(v.Body) != want {
		t.Errorf("abandoned: %+v\n%s", v, v.Body)
	}
	if got := count(l, "q", OutcomeQueueAbandoned); got != 1 {
		t.Errorf("queue_abandoned %v, want 1", got)
	}
	l.Check(context.Background(), 1000, vw, "", &v)
	if v.Allowed || v.Status != 429 || v.Delay != 0 {
		t.Errorf("seventh: %+v", v)
	}
	l.Abandon(&v) // a refusal: nothing to abandon
	if v.Status != 429 || count(l, "q", OutcomeQueueAbandoned) != 1 {
		t.Errorf("Abandon changed a refusal: %+v", v)
	}
}
