package gateway

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test: a self-signed CA
// certificate (its PEM in certFile) whose key signs leaves.
type testCA struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	certFile string
}

// issued is a leaf certificate signed by a testCA, as PEM files and as a
// tls.Certificate.
type issued struct {
	certFile, keyFile string
	pair              tls.Certificate
}

func newKey(t *testing.T) (*ecdsa.PrivateKey, *big.Int) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	return key, serial
}

// newCA makes a CA named name, valid for an hour around now.
func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, serial := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, certFile: filepath.Join(dir, name+".crt")}
	writePEM(t, ca.certFile, "CERTIFICATE", der)
	return ca
}

// issue signs a leaf for cn (also its DNS name) with the given use:
// x509.ExtKeyUsageServerAuth or x509.ExtKeyUsageClientAuth.
func (ca *testCA) issue(t *testing.T, dir, cn string, use x509.ExtKeyUsage) *issued {
	t.Helper()
	key, serial := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{use},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := &issued{certFile: filepath.Join(dir, cn+".crt"), keyFile: filepath.Join(dir, cn+".key")}
	writePEM(t, out.certFile, "CERTIFICATE", der)
	writePEM(t, out.keyFile, "EC PRIVATE KEY", kder)
	out.pair, err = tls.LoadX509KeyPair(out.certFile, out.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refusedInHandshake completes a TLS 1.3 handshake with addr (the client's
// side of it: a server's verdict on the client's certificate comes after)
// and reads without sending anything; it returns the error the read met,
// which must be the server's alert, or "" when the server kept the
// connection open for 5 s, waiting for a request.
func refusedInHandshake(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		return ""
	}
	return err.Error()
}

// discardLog is an http.Server's ErrorLog for refusals a test provokes.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// mtlsGet sends GET path over a fresh TLS connection with cfg and returns
// the status and body.
func mtlsGet(t *testing.T, addr, path string, cfg *tls.Config) (int, string) {
	t.Helper()
	p := new(http.Protocols)
	p.SetHTTP1(true)
	tr := &http.Transport{Protocols: p, TLSClientConfig: cfg, DialContext: dialTo(addr)}
	defer tr.CloseIdleConnections()
	st, _, body := fetch(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, "GET", "https://a.test"+path, nil)
	return st, body
}

// TestListenerMTLS: client_auth required — a client without a certificate
// is refused with the "certificate required" alert, one with a
// certificate from another CA with "unknown certificate authority", and
// neither reaches the backend; one with a certificate from client_ca gets
// 200. client_auth optional — no certificate: 200; a bad one: refused.
func TestListenerMTLS(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	srv := newCert(t, dir, "a.test")
	ca, other := newCA(t, dir, "client-ca"), newCA(t, dir, "other-ca")
	good := ca.issue(t, dir, "alice", x509.ExtKeyUsageClientAuth)
	bad := other.issue(t, dir, "mallory", x509.ExtKeyUsageClientAuth)
	be := newBackend(t, "app")
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: required, address: "127.0.0.1:0", tls: {certificates: [`+srv.yaml()+`], client_ca: "file:`+ca.certFile+`"}}
  - {name: optional, address: "127.0.0.1:0", tls: {certificates: [`+srv.yaml()+`], client_ca: "file:`+ca.certFile+`", client_auth: optional}}
routes: [{cluster: app}]
clusters: [{name: app, endpoints: ["`+be.addr+`"]}]
`)
	client := func(certs ...tls.Certificate) *tls.Config {
		cfg := &tls.Config{RootCAs: pool(srv), ServerName: "a.test", NextProtos: []string{"http/1.1"}}
		if len(certs) > 0 {
			// Sent whatever CAs the server names (crypto/tls's client would
			// otherwise send nothing rather than a certificate of another CA).
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
		}
		return cfg
	}
	req, opt := g.Addr("required"), g.Addr("optional")
	for _, tc := range []struct {
		name, addr string
		cfg        *tls.Config
		want       string
	}{
		{"required, no certificate", req, client(), "certificate required"},
		{"required, certificate of another CA", req, client(bad.pair), "unknown certificate authority"},
		{"optional, certificate of another CA", opt, client(bad.pair), "unknown certificate authority"},
	} {
		if got := refusedInHandshake(t, tc.addr, tc.cfg); !strings.Contains(got, tc.want) {
			t.Errorf("%s: read after the handshake gave %q, want the alert %q", tc.name, got, tc.want)
		}
	}
	if n := be.requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the backend from refused clients, want 0", n)
	}
	// The refused clients were refused for their certificates: a client
	// without one sending a request on the required listener gets no answer.
	if st, err := rawTLSGet(req, client()); err == nil {
		t.Errorf("required, no certificate, GET sent: status %d, want no response", st)
	}
	for _, tc := range []struct {
		name, addr string
		cfg        *tls.Config
	}{
		{"required, certificate of client_ca", req, client(good.pair)},
		{"optional, certificate of client_ca", opt, client(good.pair)},
		{"optional, no certificate", opt, client()},
	} {
		if st, body := mtlsGet(t, tc.addr, "/m", tc.cfg); st != 200 || body != "app /m" {
			t.Errorf("%s: %d %q, want 200 \"app /m\"", tc.name, st, body)
		}
	}
	if n := be.requests.Load(); n != 3 {
		t.Errorf("backend saw %d requests, want the 3 of the accepted clients", n)
	}
}

// rawTLSGet sends one GET over TLS with cfg and reads the status line.
func rawTLSGet(addr string, cfg *tls.Config) (int, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /m HTTP/1.1\r\nHost: a.test\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// mtlsBackend is an HTTPS backend (TLS up to maxVersion) that requires a
// client certificate chaining to clientCA and presents serverCert; it
// answers the client certificate's common name, and counts the requests
// it reads.
func mtlsBackend(t *testing.T, serverCert *issued, clientCA *testCA, maxVersion uint16) (string, *atomic.Int64) {
	t.Helper()
	cas := x509.NewCertPool()
	cas.AddCert(clientCA.cert)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{serverCert.pair},
		ClientCAs: cas, ClientAuth: tls.RequireAndVerifyClientCert, MaxVersion: maxVersion})
	var n atomic.Int64
	p := new(http.Protocols)
	p.SetHTTP1(true)
	srv := &http.Server{Protocols: p, ErrorLog: discardLog(), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fmt.Fprintf(w, "cn=%s", r.TLS.PeerCertificates[0].Subject.CommonName)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return raw.Addr().String(), &n
}

// upstreamTLS starts a backend requiring a client certificate from CA X
// and presenting one for app.internal from CA Y (TLS up to maxVersion),
// and a gateway with a route /NAME/ per cluster of tlsOf(name, withCert)
// over it. It returns the gateway's HTTP address and the backend's count.
func upstreamTLS(t *testing.T, maxVersion uint16, clusters map[string][2]string) (string, *atomic.Int64) {
	t.Helper()
	dir := t.TempDir()
	x, y := newCA(t, dir, "ca-x"), newCA(t, dir, "ca-y")
	be, seen := mtlsBackend(t, y.issue(t, dir, "app.internal", x509.ExtKeyUsageServerAuth), x, maxVersion)
	cl := x.issue(t, dir, "gateway-client", x509.ExtKeyUsageClientAuth)
	var routes, cls strings.Builder
	for name, c := range clusters {
		serverName, cert := c[0], c[1] == "cert"
		s := `{ca: "file:` + y.certFile + `", server_name: ` + serverName
		if cert {
			s += `, cert: "file:` + cl.certFile + `", key: "file:` + cl.keyFile + `"`
		}
		fmt.Fprintf(&routes, "  - {match: {prefix: /%s}, cluster: %s}\n", name, name)
		fmt.Fprintf(&cls, "  - {name: %s, endpoints: [%q], tls: %s}}\n", name, be, s)
	}
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
`+routes.String()+`clusters:
`+cls.String())
	return "http://" + g.Addr("web"), seen
}

// TestUpstreamTLS: a cluster trusting CA Y, naming app.internal and
// presenting X's client certificate gets 200 and the backend sees its
// common name; with a server_name the certificate does not carry the
// gateway refuses the upstream's certificate (502 upstream-refused); with
// no client certificate a TLS 1.2 upstream refuses the handshake (502
// upstream-refused). No refused request reaches the backend.
func TestUpstreamTLS(t *testing.T) {
	noLeaks(t)
	base, seen := upstreamTLS(t, 0, map[string][2]string{
		"good": {"app.internal", "cert"}, "wrongname": {"other.internal", "cert"}})
	base12, seen12 := upstreamTLS(t, tls.VersionTLS12, map[string][2]string{"nocert": {"app.internal", ""}})
	c := h1Client(t)
	if st, _, body := fetch(t, c, "GET", base+"/good", nil); st != 200 || body != "cn=gateway-client" {
		t.Errorf("/good: %d %q, want 200 \"cn=gateway-client\"", st, body)
	}
	for _, url := range []string{base + "/wrongname", base12 + "/nocert"} {
		st, h, body := fetch(t, c, "GET", url, nil)
		if st != 502 || h.Get("Spillway-Reason") != "upstream-refused" {
			t.Errorf("%s: %d Spillway-Reason %q (%s), want 502 upstream-refused", url, st, h.Get("Spillway-Reason"), body)
		}
	}
	if n, n12 := seen.Load(), seen12.Load(); n != 1 || n12 != 0 {
		t.Errorf("backends read %d and %d requests, want 1 (only /good's) and 0", n, n12)
	}
}

// TestUpstreamTLS13NoClientCert: a TLS 1.3 upstream requiring a client
// certificate the cluster does not have refuses the session as the TLS
// 1.2 one does, but after the gateway's side of the handshake is done:
// its alert ("certificate required") comes with the first read. That is
// still a refused handshake — 502 upstream-refused, no request served —
// not a connection "closed before a complete response".
func TestUpstreamTLS13NoClientCert(t *testing.T) {
	noLeaks(t)
	base, seen := upstreamTLS(t, tls.VersionTLS13, map[string][2]string{"nocert": {"app.internal", ""}})
	st, h, body := fetch(t, h1Client(t), "GET", base+"/nocert", nil)
	if st != 502 || h.Get("Spillway-Reason") != "upstream-refused" {
		t.Errorf("/nocert: %d Spillway-Reason %q (%s), want 502 upstream-refused", st, h.Get("Spillway-Reason"), body)
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("backend read %d requests, want 0", n)
	}
}
