package certstore_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"github.com/spillwayhq/spillway/internal/syncbuf"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// guard bounds every wait for something that should happen at once; it
// only fires when the code under test hangs.
const guard = 10 * time.Second

// notAfter is every test certificate's expiry, as logs must show it.
var notAfter = time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)

func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, ignore) })
}

// authority is a test CA that signs leaf certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T) *authority {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(9999), Subject: pkix.Name{CommonName: "certstore test CA"},
		NotBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &authority{cert: cert, key: key, pool: pool}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// leaf returns a certificate for names (the first is the subject's CN)
// with serial, and its key, in PEM.
func (a *authority) leaf(t *testing.T, serial int64, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// writeFile replaces path's content by renaming a temporary file over it.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// echoServer serves TLS on 127.0.0.1 with cfg and echoes lines back.
type echoServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return ln.Addr().String()
}

func (s *echoServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			_, _ = io.Copy(c, c) // the handshake happens on the first read
		}()
	}
}

// dial opens a TLS connection asking for name and verifying against
// roots (nil: no verification), closed when t ends, and returns it with
// the serial of the certificate the server sent.
func dial(t *testing.T, addr, name string, roots *x509.CertPool) (*tls.Conn, int64) {
	t.Helper()
	cfg := &tls.Config{ServerName: name, RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}}
	if roots == nil {
		cfg.InsecureSkipVerify = true
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: guard}, Config: cfg}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s as %s: %v", addr, name, err)
	}
	c := nc.(*tls.Conn)
	t.Cleanup(func() { c.Close() })
	return c, c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// echo checks that c still carries data both ways.
func echo(t *testing.T, c *tls.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(guard))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatalf("write on an open connection: %v", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != msg+"\n" {
		t.Fatalf("echo on an open connection: %q, %v", line, err)
	}
}

// logBuf collects JSON log lines.
type logBuf struct{ syncbuf.Buffer }

// lines returns the records whose msg is msg.
func (b *logBuf) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// files is a certificate and key on disk.
type files struct{ cert, key string }

func newFiles(t *testing.T, certPEM, keyPEM []byte) files {
	dir := t.TempDir()
	f := files{cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key")}
	writeFile(t, f.cert, certPEM)
	writeFile(t, f.key, keyPEM)
	return f
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
