package proxy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/upstream"
)

// selfSigned returns a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxy test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// startTLSProxy serves r on a TLS listener offering h2 and http/1.1.
func startTLSProxy(t *testing.T, r Router) (string, *Server, *x509.CertPool) {
	cert, pool := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	s := NewServer(Config{HTTP2: true}, r)
	done := make(chan struct{})
	go func() { _ = s.Serve(tl); close(done) }()
	t.Cleanup(func() {
		_ = tl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String(), s, pool
}

// TestTLS: HTTP/1.1 over TLS keeps its connection alive across requests
// (the idle wait reads through the TLS connection), HTTP/2 is chosen by
// ALPN, and a drain closes the first and sends GOAWAY on the second.
func TestTLS(t *testing.T) {
	noLeaks(t)
	_, be := newGated(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, s, pool := startTLSProxy(t, one(rt))
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: a\r\n\r\n", i)
		if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "ok" || resp.Close {
			t.Fatalf("HTTP/1.1 over TLS, request %d: %d %q close %v", i, resp.StatusCode, body, resp.Close)
		}
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.ProtoMajor != 2 || string(b) != "ok" {
		t.Fatalf("over ALPN: %s %q, want HTTP/2 ok", resp.Proto, b)
	}
	waitFor(t, "one h2 and one idle connection", func() bool { st := s.Stats(); return st.H2 == 1 && st.Idle == 1 })
	s.Drain()
	fmt.Fprint(c, "GET /last HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, _ := readResponse(t, br, "GET"); !resp.Close {
		t.Fatal("HTTP/1.1 over TLS during the drain: no Connection: close")
	}
	waitFor(t, "the h2 connection gone after its GOAWAY", func() bool { return s.Stats().H2 == 0 })
}
