package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// handshake dials addr with cfg and returns the connection state, or the
// handshake's error.
func handshake(t *testing.T, addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	return c.ConnectionState(), nil
}

// TestTLSCertificateBySNI serves two certificates on one listener, from
// file: references: SNI a.test gets a's, b.test gets b's, a name that fits
// neither gets the first; requests to each host reach the route of that
// host over h2.
func TestTLSCertificateBySNI(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	a, b := newCert(t, dir, "a.test"), newCert(t, dir, "b.test")
	ba, bb := named(t, "site-a"), named(t, "site-b")
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - name: secure
    address: "127.0.0.1:0"
    tls: {certificates: [`+a.yaml()+`, `+b.yaml()+`]}
routes:
  - {match: {host: a.test}, cluster: a}
  - {match: {host: b.test}, cluster: b}
clusters:
  - {name: a, endpoints: ["`+ba+`"]}
  - {name: b, endpoints: ["`+bb+`"]}
`)
	addr := g.Addr("secure")
	for _, tc := range []struct {
		sni  string
		want *testCert
	}{{"a.test", a}, {"b.test", b}, {"other.test", a}} {
		st, err := handshake(t, addr, &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("SNI %s: %v", tc.sni, err)
		}
		if got := st.PeerCertificates[0]; !got.Equal(tc.want.leaf) {
			t.Errorf("SNI %s: certificate for %v, want the one for %s", tc.sni, got.DNSNames, tc.want.host)
		}
	}
	for _, tc := range []struct{ host, want string }{{"a.test", "site-a /x"}, {"b.test", "site-b /x"}} {
		p := new(http.Protocols)
		p.SetHTTP2(true)
		tr := &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{RootCAs: pool(a, b)}, DialContext: dialTo(addr)}
		proto, body := do(t, &http.Client{Transport: tr}, "GET", "https://"+tc.host+"/x", "")
		tr.CloseIdleConnections()
		if proto != "HTTP/2.0" || body != tc.want {
			t.Errorf("https://%s/x (verified against its own certificate): %s %q, want HTTP/2.0 %q", tc.host, proto, body, tc.want)
		}
	}
}

// dialTo returns a DialContext that connects to addr whatever the URL's
// host, so a client can verify a.test's certificate on a loopback port.
func dialTo(addr string) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// TestTLSVersionsAndALPN: TLS 1.1 is refused by default (min_version 1.2),
// TLS 1.2 is accepted there and refused with min_version 1.3; ALPN
// negotiates h2 when http2 is on (the default) and http/1.1 when it is
// off, even for a client that prefers h2.
func TestTLSVersionsAndALPN(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	c := newCert(t, dir, "a.test")
	be := named(t, "app")
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: default, address: "127.0.0.1:0", tls: {certificates: [`+c.yaml()+`]}}
  - {name: tls13, address: "127.0.0.1:0", tls: {certificates: [`+c.yaml()+`], min_version: "1.3"}}
  - {name: h1only, address: "127.0.0.1:0", http2: false, tls: {certificates: [`+c.yaml()+`]}}
routes: [{cluster: app}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`)
	client := func(min, max uint16) *tls.Config {
		return &tls.Config{RootCAs: pool(c), ServerName: "a.test", MinVersion: min, MaxVersion: max,
			NextProtos: []string{"h2", "http/1.1"}}
	}
	_, err := handshake(t, g.Addr("default"), client(tls.VersionTLS10, tls.VersionTLS11))
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.1 client on the default listener: %v, want a protocol version refusal", err)
	}
	st, err := handshake(t, g.Addr("default"), client(tls.VersionTLS12, tls.VersionTLS12))
	if err != nil || st.Version != tls.VersionTLS12 || st.NegotiatedProtocol != "h2" {
		t.Errorf("TLS 1.2 client on the default listener: version %x ALPN %q err %v, want 1.2 (303) and h2", st.Version, st.NegotiatedProtocol, err)
	}
	_, err = handshake(t, g.Addr("tls13"), client(tls.VersionTLS12, tls.VersionTLS12))
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.2 client on the min_version 1.3 listener: %v, want a protocol version refusal", err)
	}
	st, err = handshake(t, g.Addr("tls13"), client(0, 0))
	if err != nil || st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != "h2" {
		t.Errorf("TLS 1.3 client on the min_version 1.3 listener: version %x ALPN %q err %v, want 1.3 (304) and h2", st.Version, st.NegotiatedProtocol, err)
	}
	st, err = handshake(t, g.Addr("h1only"), client(0, 0))
	if err != nil || st.NegotiatedProtocol != "http/1.1" {
		t.Errorf("client preferring h2 on the http2: false listener: ALPN %q err %v, want http/1.1", st.NegotiatedProtocol, err)
	}
	// The http/1.1 listener then serves HTTP/1.1 over TLS end to end.
	p := new(http.Protocols)
	p.SetHTTP1(true)
	tr := &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{RootCAs: pool(c)}, DialContext: dialTo(g.Addr("h1only"))}
	defer tr.CloseIdleConnections()
	if proto, body := do(t, &http.Client{Transport: tr}, "GET", "https://a.test/y", ""); proto != "HTTP/1.1" || body != "app /y" {
		t.Errorf("HTTP/1.1 over TLS: %s %q, want HTTP/1.1 \"app /y\"", proto, body)
	}
}
