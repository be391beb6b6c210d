package balancer

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// ipKey is the hash of the 16-byte (IPv4-mapped for IPv4) form of an
// address, written out byte by byte.
func ipKey(b ...byte) uint64 {
	var a [16]byte
	if len(b) == 4 {
		a[10], a[11] = 0xff, 0xff
		copy(a[12:], b)
	} else {
		copy(a[:], b)
	}
	return HashBytes(a[:])
}

func TestHashPolicyKey(t *testing.T) {
	v6 := []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}
	cases := []struct {
		name    string
		policy  HashPolicy
		remote  string
		target  string
		headers map[string][]string
		want    uint64
		ok      bool
	}{
		{name: "zero policy", policy: HashPolicy{}, remote: "192.0.2.1:1234", target: "/a"},
		{name: "header", policy: HashPolicy{Header: "X-User"}, headers: map[string][]string{"X-User": {"alice"}},
			want: HashString("alice"), ok: true},
		{name: "header any case", policy: HashPolicy{Header: "x-user"}, headers: map[string][]string{"X-User": {"alice"}},
			want: HashString("alice"), ok: true},
		{name: "header first value", policy: HashPolicy{Header: "X-User"}, headers: map[string][]string{"X-User": {"bob", "alice"}},
			want: HashString("bob"), ok: true},
		{name: "header missing", policy: HashPolicy{Header: "X-User"}},
		{name: "header empty falls through to path", policy: HashPolicy{Header: "X-User", Path: true},
			headers: map[string][]string{"X-User": {""}}, target: "/cart", want: HashString("/cart"), ok: true},
		{name: "header before cookie", policy: HashPolicy{Header: "X-User", Cookie: "sid"},
			headers: map[string][]string{"X-User": {"alice"}, "Cookie": {"sid=s1"}}, want: HashString("alice"), ok: true},
		{name: "cookie", policy: HashPolicy{Header: "X-User", Cookie: "sid"},
			headers: map[string][]string{"Cookie": {"theme=dark; sid=s1; lang=en"}}, want: HashString("s1"), ok: true},
		{name: "cookie quoted", policy: HashPolicy{Cookie: "sid"},
			headers: map[string][]string{"Cookie": {`sid="s 2"`}}, want: HashString("s 2"), ok: true},
		{name: "cookie second line", policy: HashPolicy{Cookie: "sid"},
			headers: map[string][]string{"Cookie": {"a=1", " sid = s3 ;b=2"}}, want: HashString("s3"), ok: true},
		{name: "cookie name is not a prefix match", policy: HashPolicy{Cookie: "sid"},
			headers: map[string][]string{"Cookie": {"sid2=x; xsid=y"}}},
		{name: "cookie first of two", policy: HashPolicy{Cookie: "sid"},
			headers: map[string][]string{"Cookie": {"sid=first; sid=second"}}, want: HashString("first"), ok: true},
		{name: "cookie without value part", policy: HashPolicy{Cookie: "sid"},
			headers: map[string][]string{"Cookie": {"sid; a=1"}}},
		{name: "cookie before client IP", policy: HashPolicy{Cookie: "sid", ClientIP: true}, remote: "192.0.2.1:1234",
			headers: map[string][]string{"Cookie": {"sid=s1"}}, want: HashString("s1"), ok: true},
		{name: "client IP v4", policy: HashPolicy{Cookie: "sid", ClientIP: true}, remote: "192.0.2.1:1234",
			want: ipKey(192, 0, 2, 1), ok: true},
		{name: "client IP port ignored", policy: HashPolicy{ClientIP: true}, remote: "192.0.2.1:9",
			want: ipKey(192, 0, 2, 1), ok: true},
		{name: "client IP v4 no port", policy: HashPolicy{ClientIP: true}, remote: "192.0.2.1",
			want: ipKey(192, 0, 2, 1), ok: true},
		{name: "client IP v4-mapped v6", policy: HashPolicy{ClientIP: true}, remote: "[::ffff:192.0.2.1]:80",
			want: ipKey(192, 0, 2, 1), ok: true},
		{name: "client IP v6", policy: HashPolicy{ClientIP: true}, remote: "[2001:db8::1]:443",
			want: ipKey(v6...), ok: true},
		{name: "client IP v6 no port", policy: HashPolicy{ClientIP: true}, remote: "2001:db8::1",
			want: ipKey(v6...), ok: true},
		{name: "client IP v6 zone ignored", policy: HashPolicy{ClientIP: true}, remote: "[2001:db8::1%eth0]:443",
			want: ipKey(v6...), ok: true},
		{name: "client IP not an address", policy: HashPolicy{ClientIP: true}, remote: "@"},
		{name: "client IP host name", policy: HashPolicy{ClientIP: true}, remote: "example.com:80"},
		{name: "client IP unclosed bracket", policy: HashPolicy{ClientIP: true}, remote: "[2001:db8::1:80"},
		{name: "client IP bad, then path", policy: HashPolicy{ClientIP: true, Path: true}, remote: "pipe",
			target: "/cart?item=1", want: HashString("/cart"), ok: true},
		{name: "client IP before path", policy: HashPolicy{ClientIP: true, Path: true}, remote: "192.0.2.1:1",
			target: "/cart", want: ipKey(192, 0, 2, 1), ok: true},
		{name: "path without query", policy: HashPolicy{Path: true}, target: "/a/b?x=1", want: HashString("/a/b"), ok: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := c.target
			if target == "" {
				target = "/"
			}
			r := httptest.NewRequest(http.MethodGet, target, nil)
			r.RemoteAddr = c.remote
			for k, vs := range c.headers {
				r.Header[k] = vs
			}
			if c.target == "" {
				r.URL.Path = "" // no path to hash unless the case sets one
			}
			got, ok := c.policy.Key(r)
			if got != c.want || ok != c.ok {
				t.Fatalf("Key = %#x, %v; want %#x, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestHashPolicyKeyEqualIPs: the same client on v4 and v4-mapped v6 reaches
// the same key, while different clients get different keys.
func TestHashPolicyKeyEqualIPs(t *testing.T) {
	p := HashPolicy{ClientIP: true}
	key := func(remote string) uint64 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		k, ok := p.Key(r)
		if !ok {
			t.Fatalf("no key for %q", remote)
		}
		return k
	}
	if key("198.51.100.7:1") != key("[::ffff:198.51.100.7]:2") {
		t.Error("IPv4 and its IPv4-mapped form hash differently")
	}
	if key("198.51.100.7:1") == key("198.51.100.8:1") {
		t.Error("two addresses hash alike")
	}
}

func TestHashPolicyKeyNoAllocs(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/cart/items?x=1", nil)
	r.Header.Set("X-User", "alice")
	r.Header.Set("Cookie", "theme=dark; sid=abcdef; lang=en")
	r.RemoteAddr = "[2001:db8::1]:443"
	cases := map[string]HashPolicy{
		"header":    {Header: "X-User"},
		"cookie":    {Header: "X-Missing", Cookie: "sid"},
		"client v6": {ClientIP: true},
		"path":      {Cookie: "missing", Path: true},
	}
	for name, p := range cases {
		var sink uint64
		if n := testing.AllocsPerRun(100, func() {
			k, _ := p.Key(r)
			sink += k
		}); n != 0 {
			t.Errorf("%s: allocs per Key = %v, want 0", name, n)
		}
	}
	r.RemoteAddr = "192.0.2.1:1234"
	if n := testing.AllocsPerRun(100, func() { HashPolicy{ClientIP: true}.Key(r) }); n != 0 {
		t.Errorf("client v4: allocs per Key = %v, want 0", n)
	}
}
