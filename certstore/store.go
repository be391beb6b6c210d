package certstore

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrNoCertificates is returned by New and Swap given no pair.
var ErrNoCertificates = errors.New("certstore: no certificate")

// Pair is one certificate chain and its private key, in PEM, and the files
// they come from ("" for a value given inline, which Reload keeps). A file
// whose PEM is empty is read by New and Swap.
type Pair struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
}

func (p *Pair) hasFile() bool { return p.CertFile != "" || p.KeyFile != "" }

// name is how logs and errors name the pair: its certificate file, else
// its index.
func (p *Pair) name(i int) string {
	if p.CertFile != "" {
		return p.CertFile
	}
	return fmt.Sprintf("certificate %d", i)
}

// loaded is a pair as last loaded successfully, and its certificate.
type loaded struct {
	pair Pair
	cert tls.Certificate
}

// snapshot is one published certificate set; immutable.
type snapshot struct {
	pairs []loaded
	cfg   *tls.Config // base clone with the set as Certificates
}

// Store serves the current certificates of one TLS listener. Its methods
// are safe for concurrent use; handshakes never wait for Reload or Swap.
type Store struct {
	base  *tls.Config // immutable: the caller's base, certificates cleared
	outer *tls.Config // what TLSConfig returns
	log   *slog.Logger

	mu     sync.Mutex // serialises Reload and Swap; guards failed
	failed []string   // per pair of cur: the last Reload error, logged once
	cur    atomic.Pointer[snapshot]
}

// New loads certs (every pair must load) over base (nil: TLS 1.2 and up,
// nothing else). base is cloned; its Certificates, GetCertificate and
// GetConfigForClient are not used. log receives reloads and their
// failures; nil: slog.Default().
func New(certs []Pair, base *tls.Config, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	if base == nil {
		base = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	b := base.Clone()
	b.Certificates, b.GetCertificate, b.GetConfigForClient = nil, nil, nil
	s := &Store{base: b, log: log}
	set, err := loadAll(certs)
	if err != nil {
		return nil, err
	}
	s.publishLocked(set)
	s.outer = b.Clone()
	s.outer.GetConfigForClient = s.configFor
	return s, nil
}

// TLSConfig returns the config to serve with (tls.NewListener,
// tls.Server), the same one on every call. Each handshake gets the
// certificates current when it starts; see the package doc for what
// changing its fields does not do.
func (s *Store) TLSConfig() *tls.Config { return s.outer }

func (s *Store) configFor(*tls.ClientHelloInfo) (*tls.Config, error) {
	return s.cur.Load().cfg, nil
}

// Files returns the files the current certificates come from, each once,
// in order.
func (s *Store) Files() []string {
	var out []string
	for _, l := range s.cur.Load().pairs {
		for _, f := range []string{l.pair.CertFile, l.pair.KeyFile} {
			if f != "" && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// Reload re-reads the files of every pair that has any. A pair whose files
// changed and load is replaced, and logged once with the new certificate's
// subject, serial and expiry; one that cannot be read or does not form a
// pair keeps its old certificate serving and is in the error (logged once
// until it changes). Unchanged files change nothing. The other pairs are
// replaced either way.
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.cur.Load()
	next := slices.Clone(cur.pairs)
	changed := false
	var errs []error
	for i := range next {
		old := next[i].pair
		if !old.hasFile() {
			continue
		}
		l, err := reread(old)
		if err != nil {
			errs = append(errs, s.failLocked(i, &old, err))
			continue
		}
		s.failed[i] = ""
		if l == nil {
			continue // the same PEM
		}
		next[i] = *l
		changed = true
		s.logLoaded("certstore: certificate reloaded", i, l)
	}
	if changed {
		failed := s.failed
		s.publishLocked(next)
		s.failed = failed // same pairs, same indices
	}
	return errors.Join(errs...)
}

// failLocked records and logs (once per distinct error) pair i's failure.
func (s *Store) failLocked(i int, p *Pair, err error) error {
	err = fmt.Errorf("certstore: %s: %w", p.name(i), err)
	if msg := err.Error(); s.failed[i] != msg {
		s.failed[i] = msg
		s.log.Error("certstore: certificate not reloaded; the old one keeps serving", "certificate", p.name(i), "err", err)
	}
	return err
}

// Swap replaces the whole set (a configuration reload) with pairs, all of
// which must load; on an error the current set keeps serving. Pairs that
// differ from the one at the same place before are logged.
func (s *Store) Swap(pairs []Pair) error {
	set, err := loadAll(pairs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.cur.Load()
	for i := range set {
		if i >= len(cur.pairs) || !samePEM(&cur.pairs[i].pair, &set[i].pair) {
			s.logLoaded("certstore: certificate replaced", i, &set[i])
		}
	}
	s.publishLocked(set)
	return nil
}

// publishLocked makes set current. s.mu is held (or s is being built).
func (s *Store) publishLocked(set []loaded) {
	cfg := s.base.Clone()
	cfg.Certificates = make([]tls.Certificate, len(set))
	for i := range set {
		cfg.Certificates[i] = set[i].cert
	}
	s.failed = make([]string, len(set))
	s.cur.Store(&snapshot{pairs: set, cfg: cfg})
}

func (s *Store) logLoaded(msg string, i int, l *loaded) {
	leaf := l.cert.Leaf
	s.log.Info(msg, "certificate", l.pair.name(i), "subject", leaf.Subject.String(),
		"serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
}

func samePEM(a, b *Pair) bool {
	return bytes.Equal(a.CertPEM, b.CertPEM) && bytes.Equal(a.KeyPEM, b.KeyPEM)
}
