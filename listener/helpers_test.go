package listener

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/overload"
)

// checkLeaks fails t if goroutines started after this call outlive the
// test's cleanups; call it first, so that its check runs last.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

// echoEngine writes "name remote local\n" on every connection, then
// echoes until EOF. It counts its connections and waits for them at the
// test's end.
type echoEngine struct {
	name  string
	conns atomic.Int64
	wg    sync.WaitGroup
}

func (e *echoEngine) ServeConn(c net.Conn) {
	e.wg.Add(1)
	defer e.wg.Done()
	defer c.Close()
	e.conns.Add(1)
	if tc, ok := c.(*tls.Conn); ok {
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		_ = tc.SetDeadline(time.Time{})
	}
	if _, err := fmt.Fprintf(c, "%s %s %s\n", e.name, c.RemoteAddr(), c.LocalAddr()); err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.Copy(c, c)
}

// running is a Listener serving on 127.0.0.1:0.
type running struct {
	*Listener
	guard *overload.Guard
	gate  *overload.Gate
	addr  string
}

// start serves engine behind a new Guard of gcfg on a Gate named "l"
// (per-listener limit maxConns); the test's end closes the Listener and
// requires Serve to have returned nil.
func start(t *testing.T, gcfg overload.Config, maxConns int, cfg Config, engine Engine) *running {
	t.Helper()
	if gcfg.Logger == nil {
		gcfg.Logger = quiet
	}
	g, err := overload.New(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := g.Gate("l")
	gate.SetLimits(maxConns, 0)
	l := New(ln, gate, cfg, engine)
	served := make(chan error, 1)
	go func() { served <- l.Serve() }()
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Close")
		}
		if e, ok := engine.(*echoEngine); ok {
			e.wg.Wait()
		}
	})
	return &running{Listener: l, guard: g, gate: gate, addr: ln.Addr().String()}
}

// dial connects to addr from 127.0.0.1; closed at the test's end.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// send writes prefix on a new connection and returns the engine's line
// (without its newline), or "" and the error when the connection ended
// without one. A connection refused at once may fail its dial already
// (reset before the connect was seen): that is an error too.
func send(t *testing.T, addr, prefix string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, prefix); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return line[:len(line)-1], nil
}

// waitFor polls cond until it holds, failing t after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// selfSigned returns a TLS server configuration with a fresh P-256
// certificate for 127.0.0.1, and a client configuration trusting it.
func selfSigned(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
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
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}
	return server, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

// slogTo is a text logger writing into w.
func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// failing is a net.Listener whose first errs Accepts fail with a
// temporary error; later ones wait for Close.
type failing struct {
	errs   int
	n      atomic.Int64
	closed chan struct{}
	once   sync.Once
}

type tempErr struct{}

func (tempErr) Error() string   { return "accept: too many open files" }
func (tempErr) Timeout() bool   { return false }
func (tempErr) Temporary() bool { return true }

func (f *failing) Accept() (net.Conn, error) {
	if f.n.Add(1) <= int64(f.errs) {
		return nil, tempErr{}
	}
	<-f.closed
	return nil, net.ErrClosed
}

func (f *failing) Close() error   { f.once.Do(func() { close(f.closed) }); return nil }
func (f *failing) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (f *failing) calls() int64   { return f.n.Load() }
