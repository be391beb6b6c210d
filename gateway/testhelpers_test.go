package gateway

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// noLeaks registers the goroutine check first, so that it runs after
// every other cleanup of the test (servers closed, gateway shut down).
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, opt) })
}

// protoBackend starts a net/http backend that speaks only HTTP/1.1
// (h2c false) or only h2c with prior knowledge (h2c true), and answers
// "name proto method path upgrade=<Upgrade field> body=<request body>".
func protoBackend(t *testing.T, name string, h2c bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s %s %s %s upgrade=%q body=%q", name, r.Proto, r.Method, r.URL.Path, r.Header.Get("Upgrade"), body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// testCert is a self-signed ECDSA certificate for one DNS name, written
// as PEM files into a test's temporary directory.
type testCert struct {
	host     string
	certFile string
	keyFile  string
	leaf     *x509.Certificate
}

// newCert makes a self-signed P-256 certificate for host, valid for an
// hour around now, its files in dir.
func newCert(t *testing.T, dir, host string) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCert{host: host, leaf: leaf,
		certFile: filepath.Join(dir, host+".crt"), keyFile: filepath.Join(dir, host+".key")}
	writePEM(t, c.certFile, "CERTIFICATE", der)
	writePEM(t, c.keyFile, "EC PRIVATE KEY", kder)
	return c
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// yaml returns the certificate as an entry of listeners[].tls.certificates.
func (c *testCert) yaml() string {
	return fmt.Sprintf(`{cert: "file:%s", key: "file:%s"}`, c.certFile, c.keyFile)
}

// pool returns a cert pool trusting the given certificates.
func pool(certs ...*testCert) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c.leaf)
	}
	return p
}

// dialRaw opens a plain TCP connection with a 10 s deadline on everything.
func dialRaw(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// crlf turns a request written with "\n" line ends into wire form.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// rawServer accepts TCP connections on loopback and serves each with
// serve on its own goroutine. stop (also run at cleanup; idempotent)
// closes the listener and every open connection and waits for the
// goroutines, so the address refuses from then on.
func rawServer(t *testing.T, serve func(net.Conn)) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { serve(c) })
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = ln.Close()
			mu.Lock()
			for c := range conns {
				_ = c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// sockOf returns the named listener's socket.
func sockOf(t *testing.T, g *Gateway, name string) *sock {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.socks {
		if s.cfg.Name == name {
			return s
		}
	}
	t.Fatalf("no listener %q", name)
	return nil
}
