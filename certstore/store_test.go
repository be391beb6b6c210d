package certstore_test

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/certstore"
)

const (
	msgReloaded = "certstore: certificate reloaded"
	msgFailed   = "certstore: certificate not reloaded; the old one keeps serving"
)

// fromFiles makes a Store over one pair read from f, logging to a buffer.
func fromFiles(t *testing.T, f files) (*certstore.Store, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	s, err := certstore.New([]certstore.Pair{{CertFile: f.cert, KeyFile: f.key}}, base,
		slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

func TestRotationServedToNewHandshakes(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t)
	c1, k1 := ca.leaf(t, 1, "a.test")
	f := newFiles(t, c1, k1)
	s, logs := fromFiles(t, f)
	addr := serve(t, s.TLSConfig())

	old, serial := dial(t, addr, "a.test", ca.pool)
	if serial != 1 {
		t.Fatalf("first handshake: serial %d, want 1", serial)
	}
	if p := old.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2 (the base's NextProtos)", p)
	}
	c2, k2 := ca.leaf(t, 2, "a.test")
	writeFile(t, f.key, k2)
	writeFile(t, f.cert, c2)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, serial := dial(t, addr, "a.test", ca.pool); serial != 2 {
		t.Fatalf("handshake after Reload: serial %d, want 2", serial)
	}
	echo(t, old, "still here") // the old connection keeps working
	if serial := old.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); serial != 1 {
		t.Fatalf("old connection: serial %d, want 1", serial)
	}

	if err := s.Reload(); err != nil { // nothing changed: nothing logged
		t.Fatal(err)
	}
	recs := logs.lines(t, msgReloaded)
	if len(recs) != 1 {
		t.Fatalf("%d reload log lines, want 1: %v", len(recs), recs)
	}
	r := recs[0]
	if r["subject"] != "CN=a.test" || r["serial"] != "2" || r["not_after"] != "2099-01-02T03:04:05Z" || r["certificate"] != f.cert {
		t.Fatalf("reload logged %v", r)
	}
}

func TestBrokenRotationKeepsOld(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t)
	c1, k1 := ca.leaf(t, 1, "a.test")
	f := newFiles(t, c1, k1)
	s, logs := fromFiles(t, f)
	addr := serve(t, s.TLSConfig())

	c2, k2 := ca.leaf(t, 2, "a.test")
	writeFile(t, f.cert, c2) // the key is still the old one
	for range 2 {
		err := s.Reload()
		if err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
			t.Fatalf("Reload with a mismatched key: %v", err)
		}
		if _, serial := dial(t, addr, "a.test", ca.pool); serial != 1 {
			t.Fatalf("after a failed Reload: serial %d, want 1", serial)
		}
	}
	if n := len(logs.lines(t, msgFailed)); n != 1 {
		t.Fatalf("the same failure logged %d times, want 1", n)
	}

	if err := os.Remove(f.key); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); !isNotExist(err) {
		t.Fatalf("Reload without a key file: %v, want not exist", err)
	}
	if _, serial := dial(t, addr, "a.test", ca.pool); serial != 1 {
		t.Fatalf("after a failed Reload: serial %d, want 1", serial)
	}
	if n := len(logs.lines(t, msgFailed)); n != 2 {
		t.Fatalf("%d failure log lines, want 2 (a new failure is logged)", n)
	}

	writeFile(t, f.key, k2) // the rotation completes
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, serial := dial(t, addr, "a.test", ca.pool); serial != 2 {
		t.Fatalf("after the rotation completed: serial %d, want 2", serial)
	}
}

func TestSNI(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t)
	ca1, ka1 := ca.leaf(t, 10, "a.test")
	cb1, kb1 := ca.leaf(t, 20, "b.test", "*.b.test")
	s, err := certstore.New([]certstore.Pair{{CertPEM: ca1, KeyPEM: ka1}, {CertPEM: cb1, KeyPEM: kb1}}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.TLSConfig())
	for _, c := range []struct {
		name string
		want int64
	}{{"a.test", 10}, {"b.test", 20}, {"x.b.test", 20}} {
		if _, serial := dial(t, addr, c.name, ca.pool); serial != c.want {
			t.Errorf("SNI %s: serial %d, want %d", c.name, serial, c.want)
		}
	}
	// A name no certificate fits gets the first (unverified: it does not fit).
	if _, serial := dial(t, addr, "other.test", nil); serial != 10 {
		t.Errorf("SNI other.test: serial %d, want 10 (the first)", serial)
	}
	if got := s.Files(); got != nil {
		t.Errorf("Files of inline pairs: %q, want none", got)
	}
}

func TestSwap(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t)
	c1, k1 := ca.leaf(t, 1, "a.test")
	f := newFiles(t, c1, k1)
	s, _ := fromFiles(t, f)
	if got := s.Files(); !slices.Equal(got, []string{f.cert, f.key}) {
		t.Fatalf("Files %q, want %q", got, []string{f.cert, f.key})
	}
	addr := serve(t, s.TLSConfig())

	cb, kb := ca.leaf(t, 5, "b.test")
	if err := s.Swap([]certstore.Pair{{CertPEM: cb, KeyPEM: kb}}); err != nil {
		t.Fatal(err)
	}
	if _, serial := dial(t, addr, "b.test", ca.pool); serial != 5 {
		t.Fatalf("after Swap: serial %d, want 5", serial)
	}
	if got := s.Files(); got != nil {
		t.Fatalf("Files after swapping to an inline pair: %q", got)
	}
	_, kx := ca.leaf(t, 6, "b.test")
	if err := s.Swap([]certstore.Pair{{CertPEM: cb, KeyPEM: kx}}); err == nil {
		t.Fatal("Swap to a mismatched pair: no error")
	}
	if err := s.Swap(nil); !errors.Is(err, certstore.ErrNoCertificates) {
		t.Fatalf("Swap(nil): %v, want ErrNoCertificates", err)
	}
	if _, serial := dial(t, addr, "b.test", ca.pool); serial != 5 {
		t.Fatalf("after failed Swaps: serial %d, want 5", serial)
	}
}

func TestNewRefuses(t *testing.T) {
	ca := newCA(t)
	c1, _ := ca.leaf(t, 1, "a.test")
	_, k2 := ca.leaf(t, 2, "a.test")
	if _, err := certstore.New(nil, nil, nil); !errors.Is(err, certstore.ErrNoCertificates) {
		t.Errorf("no pairs: %v, want ErrNoCertificates", err)
	}
	if _, err := certstore.New([]certstore.Pair{{CertPEM: c1, KeyPEM: k2}}, nil, nil); err == nil {
		t.Error("mismatched pair: no error")
	}
	missing := t.TempDir() + "/none.pem"
	if _, err := certstore.New([]certstore.Pair{{CertFile: missing, KeyPEM: k2}}, nil, nil); !isNotExist(err) {
		t.Errorf("missing file: %v, want not exist", err)
	}
}

// TestHandshakeLookupAllocatesNothing: choosing the config for a handshake
// is an atomic load.
func TestHandshakeLookupAllocatesNothing(t *testing.T) {
	ca := newCA(t)
	c1, k1 := ca.leaf(t, 1, "a.test")
	s, err := certstore.New([]certstore.Pair{{CertPEM: c1, KeyPEM: k1}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	get := s.TLSConfig().GetConfigForClient
	hello := &tls.ClientHelloInfo{ServerName: "a.test"}
	var cfg *tls.Config
	if n := testing.AllocsPerRun(100, func() { cfg, _ = get(hello) }); n != 0 {
		t.Errorf("%v allocations per lookup, want 0", n)
	}
	if len(cfg.Certificates) != 1 {
		t.Errorf("the config for a handshake holds %d certificates, want 1", len(cfg.Certificates))
	}
}

// TestReloadPerPair: a pair that fails keeps its old certificate while
// the others are replaced.
func TestReloadPerPair(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t)
	ca1, ka1 := ca.leaf(t, 1, "a.test")
	cb1, kb1 := ca.leaf(t, 2, "b.test")
	fa, fb := newFiles(t, ca1, ka1), newFiles(t, cb1, kb1)
	s, err := certstore.New([]certstore.Pair{{CertFile: fa.cert, KeyFile: fa.key}, {CertFile: fb.cert, KeyFile: fb.key}},
		nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.TLSConfig())
	ca2, ka2 := ca.leaf(t, 3, "a.test")
	cb2, _ := ca.leaf(t, 4, "b.test")
	writeFile(t, fa.cert, ca2)
	writeFile(t, fa.key, ka2)
	writeFile(t, fb.cert, cb2) // b's key stays the old one
	err = s.Reload()
	if err == nil || !strings.Contains(err.Error(), fb.cert) || strings.Contains(err.Error(), fa.cert) {
		t.Fatalf("Reload: %v, want an error naming %s only", err, fb.cert)
	}
	if _, serial := dial(t, addr, "a.test", ca.pool); serial != 3 {
		t.Errorf("a.test: serial %d, want 3 (reloaded)", serial)
	}
	if _, serial := dial(t, addr, "b.test", ca.pool); serial != 2 {
		t.Errorf("b.test: serial %d, want 2 (kept)", serial)
	}
}

// TestSessionResumesAcrossRotation: tickets are sealed with the outer
// config's keys, so a client resumes after a rotation.
func TestSessionResumesAcrossRotation(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t)
	c1, k1 := ca.leaf(t, 1, "a.test")
	f := newFiles(t, c1, k1)
	s, _ := fromFiles(t, f)
	addr := serve(t, s.TLSConfig())
	cache := tls.NewLRUClientSessionCache(4)
	connect := func() *tls.Conn {
		cfg := &tls.Config{ServerName: "a.test", RootCAs: ca.pool, ClientSessionCache: cache}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: guard}, "tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		echo(t, c, "ticket") // TLS 1.3 tickets come after the handshake
		return c
	}
	connect()
	c2, k2 := ca.leaf(t, 2, "a.test")
	writeFile(t, f.key, k2)
	writeFile(t, f.cert, c2)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if c := connect(); !c.ConnectionState().DidResume {
		t.Fatal("the session did not resume after the rotation")
	}
}
