package gateway

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// TestH2ResponseHeaderTimeout: timeouts.response_header (200ms) bounds the
// wait for an h2c upstream's head, as it does for HTTP/1.1 pools: 504
// after about 200ms, not after the 5 s request timeout (x/net's transport
// has no such bound; the gateway's headerTimer is it).
func TestH2ResponseHeaderTimeout(t *testing.T) {
	noLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: plain, address: "127.0.0.1:0"}]
routes: [{cluster: mute, timeouts: {response_header: 200ms, request: 5s}}]
clusters: [{name: mute, protocol: h2c, endpoints: ["`+ln.Addr().String()+`"]}]
`)
	for _, h2 := range []bool{false, true} {
		pr := new(http.Protocols)
		if h2 {
			pr.SetUnencryptedHTTP2(true)
		} else {
			pr.SetHTTP1(true)
		}
		tr := &http.Transport{Protocols: pr}
		began := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get("http://" + g.Addr("plain") + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if took := time.Since(began); resp.StatusCode != 504 || took > 2*time.Second {
			t.Errorf("%s: %d after %v, want 504 after about 200ms", resp.Proto, resp.StatusCode, took)
		}
	}
}
