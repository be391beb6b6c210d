package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// Checks across fields and the library's own Validate, each at the value to
// fix (positions counted by hand).
func TestCrossFieldChecks(t *testing.T) {
	const l = "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\n"
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"dns without port", l + "clusters: [{name: app, discovery: {dns: app.internal}}]\n",
			[]string{`f.yaml:4:35: clusters[0].discovery: dns needs a port (A and AAAA records carry none), or srv: true`}},
		{"srv with port", l + "clusters: [{name: app, discovery: {dns: _http._tcp.app.internal, srv: true, port: 80}}]\n",
			[]string{`f.yaml:4:83: clusters[0].discovery.port: must be absent with srv (the records carry the ports)`}},
		{"dns and file", l + "clusters: [{name: app, discovery: {dns: a.internal, port: 80, file: eps.yaml}}]\n",
			[]string{`f.yaml:4:69: clusters[0].discovery.file: give dns or file, not both`}},
		{"empty file", l + "clusters: [{name: app, discovery: {file: \"\"}}]\n",
			[]string{`f.yaml:4:42: clusters[0].discovery.file: want a file path, got ""`}},
		{"file with a dns field", l + "clusters: [{name: app, discovery: {file: eps.yaml, min_ttl: 1s}}]\n",
			[]string{`f.yaml:4:61: clusters[0].discovery.min_ttl: only with dns`}},
		{"max_ttl below min_ttl", l + "clusters: [{name: app, discovery: {dns: a.internal, port: 80, max_ttl: 1s}}]\n",
			[]string{`f.yaml:4:72: clusters[0].discovery.max_ttl: must not be below min_ttl (5s), got 1s`}},
		{"options of another picker", l + "clusters: [{name: app, endpoints: [a:1], ring_hash: {min_size: 10}}]\n",
			[]string{`f.yaml:4:53: clusters[0].ring_hash: options of picker ring_hash, but the picker is least_request`}},
		{"hash key without a hashing picker", l + "clusters: [{name: app, endpoints: [a:1], hash_key: {path: true}}]\n",
			[]string{`f.yaml:4:52: clusters[0].hash_key: only with picker ring_hash or maglev, but the picker is least_request`}},
		{"empty hash key", l + "clusters: [{name: app, endpoints: [a:1], picker: ring_hash, hash_key: {}}]\n",
			[]string{`f.yaml:4:71: clusters[0].hash_key: give at least one of header, cookie, client_ip and path`}},
		{"ring min above max", l + "clusters: [{name: app, endpoints: [a:1], picker: ring_hash, hash_key: {path: true}, ring_hash: {min_size: 2048, max_size: 1024}}]\n",
			[]string{`f.yaml:4:107: clusters[0].ring_hash.min_size: must not exceed max_size (1024), got 2048`}},
		{"maglev size not prime", l + "clusters: [{name: app, endpoints: [a:1], picker: maglev, hash_key: {path: true}, maglev: {table_size: 1000}}]\n",
			[]string{`f.yaml:4:103: clusters[0].maglev.table_size: must be a prime (65537, 131071, 262147, ...), got 1000`}},
		{"http2 without tls", l + "clusters: [{name: app, endpoints: [a:1], protocol: http2}]\n",
			[]string{`f.yaml:4:52: clusters[0].protocol: http2 is h2 over TLS and needs tls: (use h2c for HTTP/2 without TLS)`}},
		{"h2c with tls", l + "clusters: [{name: app, endpoints: [a:1], protocol: h2c, tls: {}}]\n",
			[]string{`f.yaml:4:62: clusters[0].tls: h2c is HTTP/2 without TLS (use http2 for h2 over TLS)`}},
		{"duplicate endpoint", l + "clusters: [{name: app, endpoints: [a:1, {address: a:1}]}]\n",
			[]string{`f.yaml:4:51: clusters[0].endpoints[1]: "a:1" is already endpoints[0]`}},
		{"library Validate: outlier", l + "clusters: [{name: app, endpoints: [a:1], health: {outlier: {max_ejection_time: 10s}}}]\n",
			[]string{`f.yaml:4:80: clusters[0].health.outlier: health: MaxEjectionTime: must be at least BaseEjectionTime (30), got 10`}},
		{"check field of another type", l + "clusters: [{name: app, endpoints: [a:1], health: {active: {type: tcp, path: /h}}}]\n",
			[]string{`f.yaml:4:77: clusters[0].health.active.path: only with type http`}},
		{"bad status", l + "clusters: [{name: app, endpoints: [a:1], health: {active: {expected: [700]}}}]\n",
			[]string{`f.yaml:4:71: clusters[0].health.active.expected[0]: want a status (204) or a range ("200-399") within 100-599, got "700"`}},
		{"host and hosts", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app, match: {host: a.com, hosts: [b.com]}}]\n" + clus,
			[]string{`f.yaml:3:53: routes[0].match.hosts: give host or hosts, not both`}},
		{"bad host", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app, match: {host: \"a.com:80\"}}]\n" + clus,
			[]string{`f.yaml:3:39: routes[0].match.host: want a host name (api.example.com) or a wildcard (*.example.com), without port, got "a.com:80"`}},
		{"header match with two conditions", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app, match: {headers: [{name: X, value: a, present: true}]}}]\n" + clus,
			[]string{`f.yaml:3:43: routes[0].match.headers[0]: give exactly one of value, regex and present`}},
		{"rewrite without prefix", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app, rewrite: {prefix: /}}]\n" + clus,
			[]string{`f.yaml:3:43: routes[0].rewrite.prefix: needs match.prefix (the part it replaces)`}},
		{"tcp listener with routes", "version: 1\nlisteners: [{address: \"127.0.0.1:5432\", protocol: tcp, cluster: app, routes: [route-0]}]\n" + tail,
			[]string{`f.yaml:2:78: listeners[0].routes: a tcp listener has no routes (it sends every connection to its cluster)`}},
		{"duplicate default name", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}, {cluster: app, name: route-0}]\n" + clus,
			[]string{`f.yaml:3:47: routes[1].name: "route-0" is already the name of routes[0]`}},
		{"bad name", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: \"my app\"}]\n" + clus,
			[]string{`f.yaml:3:20: routes[0].cluster: want a name of 1 to 64 letters, digits, '.', '_' or '-', got "my app"`}},
		{"bad trusted proxy", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\", trusted_proxies: [10.0.0.1/8]}]\n" + tail,
			[]string{`f.yaml:2:59: listeners[0].trusted_proxies[0]: "10.0.0.1/8" has bits set past the prefix length (did you mean 10.0.0.0/8?)`}},
		{"two listeners on one address", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}, {address: \"127.0.0.1:8080\"}, {address: \"127.0.0.1:9901\"}]\n" + tail,
			[]string{`f.yaml:2:52: listeners[1].address: 127.0.0.1:8080 is already listeners[0]'s address`,
				`f.yaml:2:81: listeners[2].address: 127.0.0.1:9901 is already the admin address`}},
		{"weight out of range", l + "clusters: [{name: app, endpoints: [{address: a:1, weight: 0}]}]\n",
			[]string{`f.yaml:4:59: clusters[0].endpoints[0].weight: must be at least 1, got 0`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, tc.in, noEnv)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}

// Certificates that do not parse, or a key of another certificate, are
// errors at the certificate; h2 in alpn needs http2.
func TestListenerTLSChecks(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "a", "a.example.com")
	writeCert(t, dir, "b", "b.example.com")
	write(t, filepath.Join(dir, "junk"), "not a certificate")
	in := "version: 1\nlisteners:\n  - address: 127.0.0.1:8443\n    http2: false\n    tls:\n      alpn: [h2]\n      certificates:\n" +
		"        - {cert: file:a.crt, key: file:b.key}\n        - {cert: file:junk, key: file:a.key}\n        - {cert: /etc/a.crt, key: file:a.key}\n" + tail
	c, err := parse(filepath.Join(dir, "f.yaml"), []byte(in), noEnv)
	if c != nil || err == nil {
		t.Fatal("parsed")
	}
	want := strings.Join([]string{
		dir + "/f.yaml:6:13: listeners[0].tls.alpn: offers h2, but http2 is false",
		dir + "/f.yaml:8:18: listeners[0].tls.certificates[0]: private key does not match public key",
		dir + "/f.yaml:9:18: listeners[0].tls.certificates[1]: failed to find any PEM data in certificate input",
		dir + "/f.yaml:10:18: listeners[0].tls.certificates[2]: failed to find any PEM data in certificate input (a path? write file:/etc/a.crt)",
	}, "\n")
	if err.Error() != want {
		t.Errorf("\n got %s\nwant %s", err, want)
	}
	// Without h2: the default ALPN leaves it out.
	in = "version: 1\nlisteners:\n  - address: 127.0.0.1:8443\n    http2: false\n    tls: {certificates: [{cert: file:a.crt, key: file:a.key}]}\n" + tail
	c = mustParse(t, dir, in, noEnv)
	if got := c.Listeners[0].ServerTLS().NextProtos; len(got) != 1 || got[0] != "http/1.1" {
		t.Errorf("ALPN %v, want [http/1.1]", got)
	}
}
