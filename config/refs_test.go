package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	lookup := env("HOST", "db.internal", "EMPTY", "")
	for _, tc := range []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"${HOST}:5432", "db.internal:5432", ""},
		{"a${EMPTY}b", "ab", ""},
		{"$${HOST}", "${HOST}", ""},
		{"$$${HOST}", "$${HOST}", ""}, // only the $ right before ${ escapes
		{"cost: $5, $HOST", "cost: $5, $HOST", ""},
		{"${HOST}${HOST}", "db.internaldb.internal", ""},
		{"${NOPE}", "", "environment variable NOPE is not set"},
		{"${HOST", "", "${ without a closing } (write $${ for a literal ${)"},
		{"${1X}", "", "${1X}: not a variable name (letters, digits and _, not starting with a digit)"},
		{"${}", "", "${}: not a variable name (letters, digits and _, not starting with a digit)"},
	} {
		got, err := expand(tc.in, lookup)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("expand(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// ${ENV} works in any string value, and an unquoted reference is then read
// as a plain YAML value (a number, a boolean).
func TestEnvReferences(t *testing.T) {
	in := "version: 1\nlisteners:\n  - address: ${ADDR}\n    http2: ${H2}\n    limits: {max_connections: \"${MAXCONN}\", header_timeout: \"${HT}\"}\n" +
		"    name: \"${MAXCONN}\"\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [\"${BACKEND}\"]}]\n"
	c := mustParse(t, t.TempDir(), in, env("ADDR", "127.0.0.1:8081", "H2", "false", "MAXCONN", "1000", "HT", "2.5", "BACKEND", "10.0.0.1:80"))
	l := c.Listeners[0]
	if l.Address != "127.0.0.1:8081" || l.HTTP2 || l.Limits.MaxConnections != 1000 || l.Limits.HeaderTimeout.Seconds() != 2.5 ||
		l.Name != "1000" || c.Clusters[0].Endpoints[0].Address != "10.0.0.1:80" {
		t.Errorf("got %+v, endpoints %+v", l, c.Clusters[0].Endpoints)
	}
	// A value from the environment is checked like any other.
	got := problems(t, in, env("ADDR", "127.0.0.1", "H2", "maybe", "MAXCONN", "-1", "HT", "0", "BACKEND", "x:1"))
	want := []string{
		`f.yaml:3:14: listeners[0].address: want host:port, got "127.0.0.1" (no port)`,
		`f.yaml:4:12: listeners[0].http2: want true or false, got "maybe"`,
		`f.yaml:5:31: listeners[0].limits.max_connections: must be at least 0, got -1`,
		`f.yaml:5:61: listeners[0].limits.header_timeout: must be at least 1ms, got 0s`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// file: references are read where a field allows them: a missing file is
// an error there; elsewhere file: is an ordinary string.
func TestFileReferences(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "api", "api.example.com")
	write(t, filepath.Join(dir, "token"), "s3cret\n")
	in := "version: 1\nlisteners:\n  - address: 127.0.0.1:8443\n    tls: {certificates: [{cert: file:api.crt, key: \"file:" + dir + "/api.key\"}]}\n" +
		"routes:\n  - cluster: app\n    request_headers: {add: {Authorization: file:token}}\n" +
		"    response_headers: {add: {X-Plain: plain}}\nclusters: [{name: app, endpoints: [127.0.0.1:9001], tls: {server_name: file:token}}]\n"
	c := mustParse(t, dir, in, noEnv)
	key, _ := os.ReadFile(filepath.Join(dir, "api.key"))
	cert := c.Listeners[0].TLS.Certificates[0]
	if cert.Key != strings.TrimSuffix(string(key), "\n") || !strings.HasPrefix(cert.Cert, "-----BEGIN CERTIFICATE-----") {
		t.Errorf("certificate not read: %.40q / %.40q", cert.Cert, cert.Key)
	}
	add := c.Routes[0].RequestHeaders.Add
	if add["Authorization"] != "s3cret" || c.Routes[0].ResponseHeaders.Add["X-Plain"] != "plain" {
		t.Errorf("request headers %q, response headers %q", add, c.Routes[0].ResponseHeaders.Add)
	}
	if sn := c.Clusters[0].TLS.ServerName; sn != "file:token" { // not a field that reads files
		t.Errorf("server name %q", sn)
	}
}

func TestFileReferenceErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "big"), strings.Repeat("x", MaxRefBytes+1))
	in := "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes:\n  - cluster: app\n    request_headers:\n      add:\n" +
		"        A: file:nope\n        B: file:" + dir + "\n        C: file:big\n        D: \"file:\"\nclusters: [{name: app, endpoints: [127.0.0.1:9001]}]\n"
	c, err := parse(filepath.Join(dir, "f.yaml"), []byte(in), noEnv)
	if c != nil || err == nil {
		t.Fatalf("parsed: %+v", c)
	}
	want := strings.Join([]string{
		dir + "/f.yaml:7:12: routes[0].request_headers.add.A: cannot read " + dir + "/nope: no such file or directory",
		dir + "/f.yaml:8:12: routes[0].request_headers.add.B: " + dir + " is not a regular file",
		dir + "/f.yaml:9:12: routes[0].request_headers.add.C: " + dir + "/big is larger than 1048576 bytes",
		dir + "/f.yaml:10:12: routes[0].request_headers.add.D: file: names no file (want file:/path)",
	}, "\n")
	if err.Error() != want {
		t.Errorf("\n got %s\nwant %s", err, want)
	}
}

// Redacted hides secrets in a deep copy and leaves c alone.
func TestRedacted(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "api", "api.example.com")
	in := "version: 1\nlisteners:\n  - address: 127.0.0.1:8443\n    tls: {certificates: [{cert: file:api.crt, key: file:api.key}]}\n" +
		"routes: [{cluster: app, request_headers: {add: {Authorization: Bearer x, X-Empty: \"\"}}}]\nclusters: [{name: app, endpoints: [127.0.0.1:9001]}]\n"
	c := mustParse(t, dir, in, noEnv)
	r := c.Redacted()
	if k := r.Listeners[0].TLS.Certificates[0].Key; k != RedactedValue {
		t.Errorf("key %.30q", k)
	}
	if add := r.Routes[0].RequestHeaders.Add; add["Authorization"] != RedactedValue || add["X-Empty"] != "" {
		t.Errorf("headers %q", add)
	}
	if c.Routes[0].RequestHeaders.Add["Authorization"] != "Bearer x" || strings.Contains(c.Listeners[0].TLS.Certificates[0].Key, RedactedValue) {
		t.Error("Redacted changed the original")
	}
	if r.Listeners[0].TLS.Certificates[0].Cert != c.Listeners[0].TLS.Certificates[0].Cert {
		t.Error("Redacted lost what is not secret")
	}
	if r.Listeners[0].ServerTLS() != nil || c.Listeners[0].ServerTLS() == nil {
		t.Error("the copy keeps the server TLS, which holds the keys")
	}
	r.Clusters[0].Endpoints[0].Address = "changed"
	r.Listeners[0].Limits.MaxConnections = 7
	if c.Clusters[0].Endpoints[0].Address != "127.0.0.1:9001" || c.Listeners[0].Limits.MaxConnections != 0 {
		t.Error("the copy shares memory with the original")
	}
	if _, ok := r.Pos(&r.Listeners[0].Address); ok {
		t.Error("the copy has positions")
	}
	c.Redacted().Routes[0].Name = "x"
	if !reflect.DeepEqual(c.Routes[0].Name, "route-0") {
		t.Error("route name changed")
	}
}

// Errors found when the configuration is used point at the value.
func TestPosAndErrorf(t *testing.T) {
	c := mustParse(t, "", "version: 1\nlisteners:\n  - name: a\n    address: 127.0.0.1:8080\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [127.0.0.1:9001]}]\n", noEnv)
	if p, ok := c.Pos(&c.Listeners[0].Address); !ok || p != (Pos{4, 14}) {
		t.Errorf("Pos(address) = %v, %v", p, ok)
	}
	if p, ok := c.Pos(&c.Listeners[0]); !ok || p != (Pos{3, 5}) {
		t.Errorf("Pos(listener) = %v, %v", p, ok)
	}
	if _, ok := c.Pos(&c.Listeners[0].Protocol); ok {
		t.Error("a default has a position")
	}
	err := c.Errorf(&c.Listeners[0].Address, "listeners[0].address: %s", "address already in use")
	if err.Error() != "f.yaml:4:14: listeners[0].address: address already in use" || c.File() != "f.yaml" {
		t.Errorf("Errorf: %v (file %q)", err, c.File())
	}
}
