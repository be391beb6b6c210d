package certstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxFileBytes bounds a certificate or key file (a chain of a few
// certificates is a few KiB).
const MaxFileBytes = 1 << 20

// loadAll loads every pair, reading the files of those without PEM.
func loadAll(pairs []Pair) ([]loaded, error) {
	if len(pairs) == 0 {
		return nil, ErrNoCertificates
	}
	out := make([]loaded, len(pairs))
	for i, p := range pairs {
		var err error
		if len(p.CertPEM) == 0 && p.CertFile != "" {
			p.CertPEM, err = readFile(p.CertFile)
		}
		if err == nil && len(p.KeyPEM) == 0 && p.KeyFile != "" {
			p.KeyPEM, err = readFile(p.KeyFile)
		}
		if err == nil {
			err = out[i].load(p)
		}
		if err != nil {
			return nil, fmt.Errorf("certstore: %s: %w", p.name(i), err)
		}
	}
	return out, nil
}

// reread reads p's files again (its inline halves stay): nil when they
// hold the same PEM, else the new pair loaded.
func reread(p Pair) (*loaded, error) {
	next := p
	var err error
	if p.CertFile != "" {
		if next.CertPEM, err = readFile(p.CertFile); err != nil {
			return nil, err
		}
	}
	if p.KeyFile != "" {
		if next.KeyPEM, err = readFile(p.KeyFile); err != nil {
			return nil, err
		}
	}
	if samePEM(&p, &next) {
		return nil, nil
	}
	l := new(loaded)
	if err := l.load(next); err != nil {
		return nil, err
	}
	return l, nil
}

// load parses p into l; the leaf is parsed too (for logs).
func (l *loaded) load(p Pair) error {
	cert, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "tls: "))
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return err
		}
	}
	l.pair, l.cert = p, cert
	return nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxFileBytes)
	}
	return data, nil
}
