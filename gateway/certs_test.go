package gateway

import (
	"crypto/tls"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestCertificateRotatedWithoutReload: a TLS listener's certificate and
// key files are rewritten with a new certificate (new key, new serial);
// within a few seconds a new handshake presents it — the watch reloads
// the certificates only: the configuration file, in the same directory,
// is not reloaded (Generation stays 1).
func TestCertificateRotatedWithoutReload(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	old := newCert(t, dir, "a.test")
	file := filepath.Join(dir, "gateway.yaml")
	writeFile(t, file, `version: 1
admin: {address: off}
reload: {watch: true, debounce: 50ms}
listeners: [{name: secure, address: "127.0.0.1:0", tls: {certificates: [`+old.yaml()+`]}}]
routes: [{cluster: app}]
clusters: [{name: app, endpoints: ["`+named(t, "app")+`"]}]
`)
	g := startFile(t, file)
	addr := g.Addr("secure")
	served := func() string {
		t.Helper()
		st, err := handshake(t, addr, &tls.Config{ServerName: "a.test", InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		return st.PeerCertificates[0].SerialNumber.String()
	}
	if got := served(); got != old.leaf.SerialNumber.String() {
		t.Fatalf("before the rotation: serial %s, want %s", got, old.leaf.SerialNumber)
	}

	rotated := newCert(t, dir, "a.test") // the same two files, rewritten
	if rotated.leaf.SerialNumber.Cmp(old.leaf.SerialNumber) == 0 {
		t.Fatal("the new certificate drew the old serial")
	}
	eventually(t, 10*time.Second, "a handshake presenting the rotated certificate", func() bool {
		return served() == rotated.leaf.SerialNumber.String()
	})
	if st := g.LastReload(); g.Generation() != 1 || st.Generation != 1 || !st.OK {
		t.Fatalf("the rotation reloaded the configuration: generation %d, last reload %+v", g.Generation(), g.LastReload())
	}
	// The rotated certificate verifies end to end.
	p := new(http.Protocols)
	p.SetHTTP2(true)
	tr := &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{RootCAs: pool(rotated)}, DialContext: dialTo(addr)}
	defer tr.CloseIdleConnections()
	if proto, body := do(t, &http.Client{Transport: tr}, "GET", "https://a.test/r", ""); proto != "HTTP/2.0" || body != "app /r" {
		t.Fatalf("https://a.test/r verified against the rotated certificate: %s %q", proto, body)
	}
}
