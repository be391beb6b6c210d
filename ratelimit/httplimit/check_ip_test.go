package httplimit

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// recording returns a Limiter over src with cfg whose one rule's store
// records the keys it is asked.
func recording(t *testing.T, src string, cfg Config) (*Limiter, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg.Store = func(r rules.Rule) (ratelimit.Keyed, error) {
		m, err := ratelimit.NewMemory(r.Spec, ratelimit.MemoryConfig{MaxKeys: 64})
		rec.Keyed = m
		return rec, err
	}
	l, _ := newLimiter(t, src, cfg)
	return l, rec
}

// A View from a peer the listener does not trust keeps the peer's key
// whatever forwarding headers it sends — even when the rules file's
// trustedProxies lists the peer: for a View the listener decides.
func TestCheckSpoofedForwarding(t *testing.T) {
	l, rec := recording(t, "trustedProxies: [192.0.2.0/24]\nrules:\n- {id: per-ip, key: [ip], rate: 1, per: 1h}\n", Config{})
	var v Verdict
	var codes []int
	for _, h := range [][2]string{{"X-Forwarded-For", "1.1.1.1"}, {"X-Forwarded-For", "2.2.2.2"}, {"Forwarded", "for=3.3.3.3"}} {
		l.Check(context.Background(), 1000, view("GET", "/", "192.0.2.1:5", false, nil, h[0], h[1]), "", &v)
		codes = append(codes, v.Status)
	}
	if got := strings.Join(rec.keys, " "); got != "192.0.2.1 192.0.2.1 192.0.2.1" {
		t.Errorf("keys %q, want the peer's three times", got)
	}
	if codes[0] != 0 || codes[1] != 429 || codes[2] != 429 {
		t.Errorf("statuses %v, want [0 429 429]", codes)
	}
}

// Behind a trusted peer the forwarding header is walked from the right
// while its hops are in the View's Proxies.
func TestCheckTrustedChain(t *testing.T) {
	tenNet := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	const xff, fwd = "X-Forwarded-For", "Forwarded"
	for _, tc := range []struct {
		name      string
		forwarded bool // the set reads Forwarded
		peer      string
		trusted   bool
		proxies   []netip.Prefix
		headers   []string
		want      string
	}{
		{"chain", false, "10.0.0.1:80", true, tenNet, []string{xff, "6.6.6.6, 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"two lines", false, "10.0.0.1:80", true, tenNet, []string{xff, "6.6.6.6, 198.51.100.7", xff, "10.0.0.2"}, "198.51.100.7"},
		{"all trusted", false, "10.0.0.1:80", true, tenNet, []string{xff, "10.0.0.5, 10.0.0.2"}, "10.0.0.5"},
		{"garbage ends the walk", false, "10.0.0.1:80", true, tenNet, []string{xff, "198.51.100.7, junk, 10.0.0.2"}, "10.0.0.2"},
		{"no proxies: one hop", false, "10.0.0.1:80", true, nil, []string{xff, "198.51.100.7, 10.0.0.2"}, "10.0.0.2"},
		{"no header", false, "10.0.0.1:80", true, tenNet, nil, "10.0.0.1"},
		{"mapped peer", false, "[::ffff:10.0.0.1]:80", true, tenNet, []string{xff, "198.51.100.7"}, "198.51.100.7"},
		{"v6 client", false, "10.0.0.1:80", true, tenNet, []string{xff, "2001:db8:1:2::9"}, "2001:db8:1:2::/64"},
		{"untrusted v6 peer", false, "[2001:db8::5]:1", false, tenNet, []string{xff, "6.6.6.6"}, "2001:db8::/64"},
		{"untrusted mapped peer", false, "[::ffff:192.0.2.7]:1", false, nil, nil, "192.0.2.7"},
		{"forwarded", true, "10.0.0.1:80", true, tenNet,
			[]string{xff, "9.9.9.9", fwd, `for=6.6.6.6, for="198.51.100.8:4711";proto=https`}, "198.51.100.8"},
		{"forwarded, xff ignored", true, "10.0.0.1:80", true, tenNet, []string{xff, "9.9.9.9"}, "10.0.0.1"},
	} {
		src := "rules:\n- {id: per-ip, key: [ip], rate: 100, per: 1s}\n"
		if tc.forwarded {
			src = "forwardedHeader: Forwarded\n" + src
		}
		l, rec := recording(t, src, Config{})
		var v Verdict
		l.Check(context.Background(), 1000, view("GET", "/", tc.peer, tc.trusted, tc.proxies, tc.headers...), "", &v)
		if len(rec.keys) != 1 || rec.keys[0] != tc.want || !v.Allowed {
			t.Errorf("%s: keys %q (allowed %v), want [%s]", tc.name, rec.keys, v.Allowed, tc.want)
		}
	}
}
