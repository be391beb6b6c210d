package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spillwayhq/spillway/ratelimit"
)

var testTrusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("127.0.0.1/32"),
}

func TestClientIP(t *testing.T) {
	chain := make([]string, 40)
	for i := range chain {
		chain[i] = "10.0.1." + strconv.Itoa(100+i)
	}
	tests := []struct {
		name, peer string
		values     []string
		forwarded  bool
		want       string // "" when ok is false
	}{
		{"untrusted peer ignores header", "203.0.113.5:1234", []string{"1.2.3.4"}, false, "203.0.113.5"},
		{"trusted peer without header", "10.0.0.1:80", nil, false, "10.0.0.1"},
		{"one hop", "10.0.0.1:80", []string{"1.2.3.4"}, false, "1.2.3.4"},
		{"spoofed left part", "10.0.0.1:80", []string{"6.6.6.6, 1.2.3.4"}, false, "1.2.3.4"},
		{"past trusted proxies", "10.0.0.1:80", []string{"6.6.6.6, 1.2.3.4, 10.0.0.2, 10.9.9.9"}, false, "1.2.3.4"},
		{"all trusted: leftmost", "10.0.0.1:80", []string{"10.0.0.3, 10.0.0.2"}, false, "10.0.0.3"},
		{"malformed rightmost", "10.0.0.1:80", []string{"1.2.3.4, garbage"}, false, "10.0.0.1"},
		{"malformed past a proxy", "10.0.0.1:80", []string{"garbage, 10.0.0.2"}, false, "10.0.0.2"},
		{"several lines", "10.0.0.1:80", []string{"5.5.5.5", "1.2.3.4, 10.0.0.2"}, false, "1.2.3.4"},
		{"walk crosses lines", "10.0.0.1:80", []string{"1.2.3.4", "10.0.0.2"}, false, "1.2.3.4"},
		{"port", "10.0.0.1:80", []string{"1.2.3.4:5678"}, false, "1.2.3.4"},
		{"bracketed IPv6 with port", "10.0.0.1:80", []string{"[2001:db9::1]:80"}, false, "2001:db9::1"},
		{"bare IPv6", "10.0.0.1:80", []string{"2001:db9::1"}, false, "2001:db9::1"},
		{"IPv4-mapped", "10.0.0.1:80", []string{"::ffff:1.2.3.4"}, false, "1.2.3.4"},
		{"empty elements", "10.0.0.1:80", []string{" 1.2.3.4 ,, ,"}, false, "1.2.3.4"},
		{"bad port", "10.0.0.1:80", []string{"1.2.3.4:http"}, false, "10.0.0.1"},
		{"IPv6 peer", "[2001:db8::7]:443", []string{"1.2.3.4"}, false, "1.2.3.4"},
		{"mapped trusted peer", "[::ffff:10.0.0.1]:80", []string{"1.2.3.4"}, false, "1.2.3.4"},
		{"zoned untrusted peer", "[fe80::1%eth0]:80", nil, false, "fe80::1"},
		{"bare peer", "10.0.0.1", []string{"1.2.3.4"}, false, "1.2.3.4"},
		{"unix socket", "@", nil, false, ""},
		{"empty peer", "", nil, false, ""},
		{"hop limit", "10.0.0.1:80", []string{"1.2.3.4, " + strings.Join(chain, ", ")}, false, chain[40-MaxForwardedHops]},
		{"forwarded", "10.0.0.1:80", []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, true, "192.0.2.60"},
		{"forwarded quoted IPv6", "10.0.0.1:80", []string{`for="[2001:db9::1]:4711"`}, true, "2001:db9::1"},
		{"forwarded case", "10.0.0.1:80", []string{"proto=https;For=1.2.3.4"}, true, "1.2.3.4"},
		{"forwarded list", "10.0.0.1:80", []string{"for=6.6.6.6, for=1.2.3.4", "for=10.0.0.9"}, true, "1.2.3.4"},
		{"forwarded unknown", "10.0.0.1:80", []string{"for=1.2.3.4, for=unknown"}, true, "10.0.0.1"},
		{"forwarded obfuscated", "10.0.0.1:80", []string{`for="_hidden"`}, true, "10.0.0.1"},
		{"forwarded without for", "10.0.0.1:80", []string{"by=1.1.1.1;proto=http"}, true, "10.0.0.1"},
		{"forwarded unterminated quote", "10.0.0.1:80", []string{`for="1.2.3.4`}, true, "10.0.0.1"},
		{"forwarded header read as XFF", "10.0.0.1:80", []string{"for=1.2.3.4"}, false, "10.0.0.1"},
	}
	for _, tc := range tests {
		got, ok := ClientIP(tc.peer, tc.values, tc.forwarded, testTrusted)
		if tc.want == "" {
			if ok {
				t.Errorf("%s: got %v, want none", tc.name, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(tc.want) {
			t.Errorf("%s: got %v %v, want %s", tc.name, got, ok, tc.want)
		}
	}
}

func TestIPKey(t *testing.T) {
	l, _ := newLimiter(t, "rules: []\n", Config{})
	tests := []struct {
		peer string
		bits int
		want string
	}{
		{"192.0.2.1:80", 64, "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:80", 64, "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:3:4:5:6]:80", 56, "2001:db8:1::/56"},
		{"[2001:db8:1:2:3:4:5:6]:80", 128, "2001:db8:1:2:3:4:5:6"},
		{"[2001:DB8::1]:80", 128, "2001:db8::1"},
		{"[::ffff:192.0.2.1]:80", 64, "192.0.2.1"},
	}
	for _, tc := range tests {
		s := &ruleSet{v6bits: tc.bits}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		var in incoming
		in.fromHTTP(r, &ipCache{})
		if got := l.ipKey(s, &in); got != tc.want {
			t.Errorf("ipKey(%s, /%d) = %q, want %q", tc.peer, tc.bits, got, tc.want)
		}
	}
	s := &ruleSet{v6bits: 64, trusted: testTrusted, fwdHeader: "X-Forwarded-For"}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:80"
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.0.0.2")
	var in incoming
	in.fromHTTP(r, &ipCache{})
	if n := testing.AllocsPerRun(100, func() {
		if l.ipKey(s, &in) != "198.51.100.7" {
			t.Fatal("wrong key")
		}
	}); n != 0 {
		t.Errorf("ipKey through X-Forwarded-For allocates %v times", n)
	}
}

// recorder wraps an in-memory store and records the keys it is asked.
type recorder struct {
	ratelimit.Keyed
	mu   sync.Mutex
	keys []string
}

func (r *recorder) AllowN(ctx context.Context, key string, now float64, cost int) (ratelimit.Decision, error) {
	r.mu.Lock()
	r.keys = append(r.keys, key)
	r.mu.Unlock()
	return r.Keyed.AllowN(ctx, key, now, cost)
}

// A client talking to the server directly cannot change its key with
// X-Forwarded-For or Forwarded; behind a trusted proxy the forwarded
// address is the key.
func TestSpoofedForwardingOverLoopback(t *testing.T) {
	checkGoroutines(t)
	for _, tc := range []struct {
		name    string
		trusted string
		headers [][2]string
		codes   []int
		keys    []string
	}{
		{"untrusted peer", "[10.0.0.0/8]",
			[][2]string{{"X-Forwarded-For", "1.1.1.1"}, {"X-Forwarded-For", "2.2.2.2"}, {"Forwarded", "for=3.3.3.3"}},
			[]int{200, 429, 429}, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}},
		{"trusted peer", "[127.0.0.1]",
			[][2]string{{"X-Forwarded-For", "1.1.1.1"}, {"X-Forwarded-For", "9.9.9.9, 1.1.1.1"}, {"X-Forwarded-For", "1.1.1.1, 2.2.2.2"}},
			[]int{200, 429, 200}, []string{"1.1.1.1", "1.1.1.1", "2.2.2.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, rec := recording(t, "trustedProxies: "+tc.trusted+"\nrules:\n- {id: per-ip, key: [ip], rate: 1, per: 1h}\n", Config{})
			srv := httptest.NewServer(l.Handler(&hello{}))
			defer srv.Close()
			defer srv.Client().CloseIdleConnections()
			for i, h := range tc.headers {
				req, _ := http.NewRequest("GET", srv.URL, nil)
				req.Header.Set(h[0], h[1])
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.codes[i] {
					t.Errorf("request %d (%s: %s): %d, want %d", i, h[0], h[1], resp.StatusCode, tc.codes[i])
				}
			}
			if strings.Join(rec.keys, " ") != strings.Join(tc.keys, " ") {
				t.Errorf("keys %q, want %q", rec.keys, tc.keys)
			}
		})
	}
}

// FuzzClientIP: never panic; an untrusted peer is always the answer; an
// answer other than the peer needs a trusted peer and a header; answers are
// unmapped and without zone.
func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:80", "1.2.3.4, 10.0.0.2", false)
	f.Add("10.0.0.1:80", `for="[2001:db9::1]:4711";proto=https, for=10.0.0.9`, true)
	f.Add("203.0.113.5:1", "1.2.3.4", false)
	f.Add("[::ffff:10.0.0.1]:80", "::ffff:1.2.3.4,,", false)
	f.Add("[fe80::1%eth0]:80", "[fe80::2%25lo]:1", false)
	f.Add("10.0.0.1", `for="_x", for=unknown, For="1.2.3.4`, true)
	f.Fuzz(func(t *testing.T, peer, header string, forwarded bool) {
		values := strings.Split(header, "\n")
		got, ok := ClientIP(peer, values, forwarded, testTrusted)
		p, _, pok := parseHostPort(peer)
		if ok != pok {
			t.Fatalf("ok %v, peer parses %v", ok, pok)
		}
		if !ok {
			return
		}
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("answer %v", got)
		}
		if got != p && (!isTrusted(p, testTrusted) || header == "") {
			t.Fatalf("answer %v differs from untrusted peer %v", got, p)
		}
	})
}
