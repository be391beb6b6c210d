package config

import (
	"strings"
	"testing"
)

// The files below are the minimal example with one thing wrong; head and
// tail are its lines around the part each case changes.
const (
	head = "version: 1\nlisteners:\n  - address: 127.0.0.1:8080\n"
	tail = "routes: [{cluster: app}]\nclusters: [{name: app, endpoints: [127.0.0.1:9001]}]\n"
	clus = "clusters: [{name: app, endpoints: [127.0.0.1:9001]}]\n"
)

// Every kind of problem, with the exact message and position (written by
// hand: line and column of the value at fault).
func TestBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"unknown field", head + "    adress: x\n" + tail,
			[]string{`f.yaml:4:5: listeners[0]: unknown field "adress" (want name, address, protocol, cluster, routes, tls, http2, http2_engine, trusted_proxies, limits, proxy_protocol, reason_header)`}},
		{"unknown top-level field", "version: 1\nlistener: []\n",
			[]string{`f.yaml:1:1: missing listeners (Where the gateway accepts connections; at least one)`,
				`f.yaml:2:1: unknown field "listener" (want version, admin, listeners, routes, clusters, drain, reload, overload, ratelimit)`}},
		{"wrong type: bool", head + "    http2: yes\n" + tail,
			[]string{`f.yaml:4:12: listeners[0].http2: want true or false, got "yes"`}},
		{"wrong type: version quoted", "version: \"1\"\nlisteners: [{address: \"127.0.0.1:8080\"}]\n",
			[]string{`f.yaml:1:10: version: want a number, got "1"`}},
		{"wrong type: list", "version: 1\nlisteners: {address: \"127.0.0.1:8080\"}\n",
			[]string{`f.yaml:2:12: listeners: want a list, got a mapping`}},
		{"bad duration", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes:\n  - cluster: app\n    timeouts: {connect: 10x}\n" + clus,
			[]string{`f.yaml:5:25: routes[0].timeouts.connect: want a duration such as 250ms, 10s or 1m30s, got "10x"`}},
		{"negative duration", head + "    limits: {idle_timeout: -5s}\n" + tail,
			[]string{`f.yaml:4:28: listeners[0].limits.idle_timeout: must not be negative, got "-5s"`}},
		{"duration below its minimum", head + "    limits: {idle_timeout: 0}\n" + tail,
			[]string{`f.yaml:4:28: listeners[0].limits.idle_timeout: must be at least 1ms, got 0s`}},
		{"bad size", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app, max_body_bytes: 10MB}]\n" + clus,
			[]string{`f.yaml:3:41: routes[0].max_body_bytes: want a size such as 65536, "64KiB", "1MiB" or "1GiB", got "10MB"`}},
		{"address without port", "version: 1\nlisteners:\n  - address: 127.0.0.1\n" + tail,
			[]string{`f.yaml:3:14: listeners[0].address: want host:port, got "127.0.0.1" (no port)`}},
		{"port out of range", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [\"host:99999\"]}]\n",
			[]string{`f.yaml:4:36: clusters[0].endpoints[0].address: "host:99999": port 99999 is out of range (1 to 65535)`}},
		{"bad enum", head + "    protocol: htp\n" + tail,
			[]string{`f.yaml:4:15: listeners[0].protocol: want one of http, tcp, got "htp"`}},
		{"duplicate cluster", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters:\n  - {name: app, endpoints: [127.0.0.1:9001]}\n  - {name: app, endpoints: [127.0.0.1:9002]}\n",
			[]string{`f.yaml:6:12: clusters[1].name: "app" is already the name of clusters[0]`}},
		{"dangling cluster", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes:\n  - cluster: nope\n" + clus,
			[]string{`f.yaml:4:14: routes[0].cluster: no cluster is named "nope" (clusters: app)`}},
		{"dangling route", head + "    routes: [api]\n" + tail,
			[]string{`f.yaml:4:14: listeners[0].routes[0]: no route is named "api" (routes: route-0)`}},
		{"regex that does not compile", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app, match: {regex: \"(\"}}]\n" + clus,
			[]string{"f.yaml:3:40: routes[0].match.regex: \"(\" does not compile: missing closing ): `(`"}},
		{"tcp listener without cluster", "version: 1\nlisteners:\n  - {address: \"127.0.0.1:5432\", protocol: tcp}\n" + clus,
			[]string{`f.yaml:3:5: listeners[0]: a tcp listener needs a cluster: to send its connections to`}},
		{"http listener with cluster", "version: 1\nlisteners:\n  - {address: \"127.0.0.1:8080\", cluster: app}\n" + tail,
			[]string{`f.yaml:3:42: listeners[0].cluster: only a tcp listener names a cluster (an http listener's routes do); set protocol: tcp or remove it`}},
		{"TLS files that do not exist", head + "    tls:\n      certificates: [{cert: file:/nonexistent/a.crt, key: file:/nonexistent/a.key}]\n" + tail,
			[]string{`f.yaml:5:29: listeners[0].tls.certificates[0].cert: cannot read /nonexistent/a.crt: no such file or directory`,
				`f.yaml:5:59: listeners[0].tls.certificates[0].key: cannot read /nonexistent/a.key: no such file or directory`}},
		{"version missing", "listeners: [{address: \"127.0.0.1:8080\"}]\n",
			[]string{`f.yaml:1:1: missing version (Format version of the file; must be 1)`}},
		{"version 2", "version: 2\nlisteners: [{address: \"127.0.0.1:8080\"}]\n",
			[]string{`f.yaml:1:10: version: want 1 (the only version there is), got 2`}},
		{"no listeners", "version: 1\nlisteners: []\n",
			[]string{`f.yaml:2:12: listeners: want at least 1 entry, got 0`}},
		{"path and prefix", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app, match: {path: /a, prefix: /b}}]\n" + clus,
			[]string{`f.yaml:3:51: routes[0].match: give only one of path, prefix and regex`}},
		{"endpoints and discovery", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [127.0.0.1:9001], discovery: {dns: app.internal, port: 80}}]\n",
			[]string{`f.yaml:4:64: clusters[0].discovery: give endpoints or discovery, not both`}},
		{"neither endpoints nor discovery", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app}]\n",
			[]string{`f.yaml:4:12: clusters[0]: give endpoints (a list of host:port) or discovery`}},
		{"maglev without hash key", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [127.0.0.1:9001], picker: maglev}]\n",
			[]string{`f.yaml:4:61: clusters[0]: picker maglev needs a hash_key (header, cookie, client_ip or path)`}},
		{"unset environment variable", head + "    name: ${LISTENER_NAME}\n" + tail,
			[]string{`f.yaml:4:11: listeners[0].name: environment variable LISTENER_NAME is not set`}},
		{"unclosed reference", head + "    name: \"${LISTENER\"\n" + tail,
			[]string{`f.yaml:4:11: listeners[0].name: ${ without a closing } (write $${ for a literal ${)`}},
		{"admin beyond loopback without token", "version: 1\nadmin: {address: \"0.0.0.0:9901\"}\nlisteners: [{address: \"127.0.0.1:8080\"}]\n",
			[]string{`f.yaml:2:18: admin.address: 0.0.0.0:9901 is reachable beyond this machine; set admin.token (a bearer token, usually ${ENV}) or listen on 127.0.0.1`}},
		{"heap_soft above heap_hard", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\noverload: {heap_soft: 2GiB, heap_hard: 1GiB}\n",
			[]string{`f.yaml:3:23: overload.heap_soft: 2GiB is above heap_hard (1GiB); keep-alive goes off before connections are refused`}},
		{"client_auth without client_ca", head + "    tls: {certificates: [{cert: a, key: b}], client_auth: optional}\n" + tail,
			[]string{`f.yaml:4:33: listeners[0].tls.certificates[0]: failed to find any PEM data in certificate input`,
				`f.yaml:4:59: listeners[0].tls.client_auth: needs client_ca (the CAs client certificates must chain to)`}},
		{"cluster cert without key", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [127.0.0.1:9001], tls: {cert: x}}]\n",
			[]string{`f.yaml:4:65: clusters[0].tls: give cert and key together (the client certificate and its private key)`}},
		{"proxy_protocol on an HTTP cluster", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [127.0.0.1:9001], proxy_protocol: v2}]\n",
			[]string{`f.yaml:4:69: clusters[0].proxy_protocol: sent only by tcp listeners, but routes[0] ("route-0") sends HTTP requests to this cluster`}},
		{"access_log not a mode", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app, access_log: true}]\n" + clus,
			[]string{`f.yaml:3:37: routes[0].access_log: want one of off, full, sampled, got "true"`}},
		{"not a mapping", "- version: 1\n",
			[]string{`f.yaml:1:1: want a mapping with version: 1, listeners, routes and clusters, got a list`}},
		{"syntax error", "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}\n",
			[]string{`f.yaml:2:12: sequence end token ']' not found`}}, // yamlfile's message, at the "["
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, tc.in, noEnv)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}
