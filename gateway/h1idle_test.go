package gateway

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestH1ClientStreamingIdleToH2Upstream: on a streaming route to an h2c
// cluster, timeouts.idle (300ms) cuts a stalled stream for an HTTP/1.1
// client too, as it does on the HTTP/2 engine's path (without it the
// client's read blocked until its own 10 s timeout).
func TestH1ClientStreamingIdleToH2Upstream(t *testing.T) {
	noLeaks(t)
	be, cancelled := stallBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: plain, address: "127.0.0.1:0"}]
routes: [{cluster: stall, streaming: true, timeouts: {idle: 300ms}}]
clusters: [{name: stall, protocol: h2c, endpoints: ["`+be+`"]}]
`)
	h1 := new(http.Protocols)
	h1.SetHTTP1(true)
	tr := &http.Transport{Protocols: h1}
	defer tr.CloseIdleConnections()
	began := time.Now()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + g.Addr("plain") + "/events")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if took := time.Since(began); string(b) != "part" || err == nil || took > 5*time.Second {
		t.Fatalf("stalled stream: %q, read error %v after %v; want \"part\" then a cut after about 300ms", b, err, took)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend's request was not cancelled within 5s of the cut")
	}
}
