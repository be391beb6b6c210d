package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/yamlfile"
)

// writeCert writes a self-signed certificate for name and its key as
// dir/base.crt and dir/base.key.
func writeCert(t testing.TB, dir, base, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, base+".crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	write(t, filepath.Join(dir, base+".key"), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})))
}

func write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// noEnv is an environment with nothing set.
func noEnv(string) (string, bool) { return "", false }

// env is an environment of the given pairs.
func env(kv ...string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == name {
				return kv[i+1], true
			}
		}
		return "", false
	}
}

// mustParse parses in (named dir/f.yaml) or fails the test.
func mustParse(t *testing.T, dir, in string, lookup func(string) (string, bool)) *Config {
	t.Helper()
	c, err := parse(filepath.Join(dir, "f.yaml"), []byte(in), lookup)
	if err != nil {
		t.Fatalf("parse:\n%v", err)
	}
	return c
}

// problems parses in (named f.yaml) and returns its problems as strings.
func problems(t *testing.T, in string, lookup func(string) (string, bool)) []string {
	t.Helper()
	c, err := parse("f.yaml", []byte(in), lookup)
	if err == nil {
		t.Fatalf("parsed without error: %+v", c)
	}
	var fe *yamlfile.FileError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) || c != nil {
		t.Fatalf("error %T %v (config %v), want a *yamlfile.FileError wrapping ErrInvalid and no config", err, err, c)
	}
	out := make([]string, len(fe.Errors))
	for i, e := range fe.Errors {
		out[i] = e.Error()
	}
	return out
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
