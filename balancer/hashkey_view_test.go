package balancer

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"testing"

	"github.com/spillwayhq/spillway/request"
)

type testHeader http.Header

func (h testHeader) Get(n string) (string, bool) {
	v := http.Header(h)[textproto.CanonicalMIMEHeaderKey(n)]
	if len(v) == 0 {
		return "", false
	}
	return v[0], true
}

func (h testHeader) Values(n string, fn func(string) bool) {
	for _, v := range http.Header(h)[textproto.CanonicalMIMEHeaderKey(n)] {
		if !fn(v) {
			return
		}
	}
}

// TestViewKeyAgreesWithKey: the gateway's view and an *http.Request of
// the same request hash to the same key, source by source.
func TestViewKeyAgreesWithKey(t *testing.T) {
	h := http.Header{"X-User": {"alice"}, "Cookie": {"a=1; sid=\"s42\"", "sid=later"}}
	r, _ := http.NewRequest("GET", "http://x/p/q", nil)
	r.Header, r.RemoteAddr = h, "192.0.2.7:5555"
	v := &request.View{Path: "/p/q", Client: netip.MustParseAddrPort("192.0.2.7:5555"), Header: testHeader(h)}
	for _, p := range []HashPolicy{{Header: "X-User"}, {Cookie: "sid"}, {ClientIP: true}, {Path: true}, {Header: "X-None", Path: true}} {
		want, wok := p.Key(r)
		got, gok := p.ViewKey(v)
		if got != want || gok != wok || !gok {
			t.Errorf("%+v: ViewKey %x %v, Key %x %v", p, got, gok, want, wok)
		}
	}
	if k, _ := (HashPolicy{Cookie: "sid"}).ViewKey(v); k != HashString("s42") {
		t.Errorf("cookie key is not the first sid, unquoted")
	}
	if _, ok := (HashPolicy{Header: "X-None"}).ViewKey(v); ok {
		t.Error("a missing header yields a key")
	}
}
