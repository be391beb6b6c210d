package config

import (
	"crypto/tls"
	"path/filepath"
	"slices"
	"testing"
)

// Mutual TLS on a listener, a client certificate towards a cluster, and
// the files a listener's certificates came from (for reloading them).
func TestTLSExtras(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "srv", "gw.example.com")
	writeCert(t, dir, "ca", "clients.example.com")
	writeCert(t, dir, "cli", "gateway.internal")
	c := mustParse(t, dir, `version: 1
listeners:
  - address: 127.0.0.1:8443
    tls:
      certificates: [{cert: file:srv.crt, key: file:srv.key}]
      client_ca: file:ca.crt
  - address: 127.0.0.1:8444
    tls:
      certificates: [{cert: file:srv.crt, key: file:srv.key}]
      client_ca: file:ca.crt
      client_auth: optional
routes: [{cluster: app}]
clusters: [{name: app, endpoints: [127.0.0.1:9001], tls: {cert: file:cli.crt, key: file:cli.key, server_name: app.internal}}]
`, noEnv)
	req, opt := c.Listeners[0].ServerTLS(), c.Listeners[1].ServerTLS()
	if req.ClientAuth != tls.RequireAndVerifyClientCert || req.ClientCAs == nil {
		t.Errorf("client_ca alone: auth %v, CAs %v; want required", req.ClientAuth, req.ClientCAs != nil)
	}
	if opt.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Errorf("client_auth optional: %v", opt.ClientAuth)
	}
	want := []CertFiles{{Cert: filepath.Join(dir, "srv.crt"), Key: filepath.Join(dir, "srv.key")}}
	if got := c.Listeners[0].CertificateFiles(); !slices.Equal(got, want) {
		t.Errorf("certificate files %v, want %v", got, want)
	}
	ct := c.Clusters[0].ClientTLS()
	if len(ct.Certificates) != 1 || ct.ServerName != "app.internal" {
		t.Errorf("client TLS: %d certificates, server name %q", len(ct.Certificates), ct.ServerName)
	}
}

// A certificate given inline has no file to reload from.
func TestCertificateFilesInline(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "srv", "gw.example.com")
	c := mustParse(t, dir, `version: 1
listeners:
  - address: 127.0.0.1:8443
    tls: {certificates: [{cert: file:srv.crt, key: "${KEY}"}]}
`, env("KEY", readFile(t, filepath.Join(dir, "srv.key"))))
	want := []CertFiles{{Cert: filepath.Join(dir, "srv.crt")}}
	if got := c.Listeners[0].CertificateFiles(); !slices.Equal(got, want) {
		t.Errorf("certificate files %v, want %v", got, want)
	}
}
