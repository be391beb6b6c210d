// Package config reads the gateway's configuration file (spillway serve,
// spillway validate): one YAML file, or JSON, with a version, listeners,
// routes and clusters. Load and Parse expand ${ENV} references, read file:
// references, apply the defaults and check everything, and return a typed
// Config, or an error listing every problem as "file:line:column: reason"
// (a *yamlfile.FileError whose problems unwrap to ErrInvalid). The package
// is pure: it opens no socket, starts no goroutine and reads no clock; it
// reads only the file and the files that file: references name.
//
// The smallest useful file:
//
//	version: 1
//	listeners: [{address: "127.0.0.1:8080"}]
//	routes: [{cluster: app}]
//	clusters: [{name: app, endpoints: ["127.0.0.1:9001"]}]
//
// # One source
//
// The structs of types.go are the format. A reflective walker decodes the
// file into them by their tags; the same tags give the defaults, the
// reference (Reference, docs/CONFIG.md) and the JSON Schema (Schema,
// docs/config.schema.json), and a test fails when the committed files
// differ from what the structs generate (regenerate with go run
// ./config/gen) or when a field has no doc. The tags:
//
//	yaml:"name"      the key in the file
//	doc:"..."        the reference's text (required on every field)
//	default:"..."    the value of an absent field, in the file's syntax; a list as a,b;
//	                 "<index>" is the item's index in its list
//	required:"true"  the field must be given
//	min, max         bounds (numbers, durations, sizes); min on a list: fewest items
//	enum:"a,b"       the values a string may take
//	kind:"..."       the syntax of a string: listen, endpoint (host:port), name,
//	                 token, method, host, path, regex, cidr, dnsname, status, filepath
//	secret:"true"    may be file:, and Redacted hides it
//	file:"true"      may be file: (not hidden)
//	shorthand:"true" a plain string given for the struct sets this field
//	                 (endpoints: ["10.0.0.1:80"])
//
// Every value keeps the position it was written at (Config.Pos), so that
// checks across fields — dangling references, duplicate names, fields that
// exclude each other — and errors found later by the gateway
// (Config.Errorf) point at the line to fix.
//
// # References
//
// ${NAME} in any string value is replaced by the environment variable NAME
// (an unset variable is an error at that value; $${ writes a literal ${).
// In a field that is not a string (a number, a boolean, a duration) the
// result is then read as YAML reads a plain value, quoted or not, so
// max_connections: ${MAXCONN} is a number. A value
// file:/path in a field that allows it (TLS certificates and keys, CA
// bundles, the values of headers added) is replaced by that regular
// file's content (at most MaxRefBytes, one trailing newline removed); a
// relative path is taken from the configuration file's directory, and a
// missing file is an error at that value.
//
// # Into the library
//
// Every part that the library configures is turned into the library's own
// struct by a method, so the gateway never interprets a field:
// Cluster.SetConfig (balancer.SetConfig), NewPicker, TableBuilder,
// HashPolicy, Source (discovery.Static, DNS or File), ActiveConfig and
// HealthCheck (health), OutlierConfig, ClientTLS; Listener.HTTPServer
// (httpserver.Config), ServerTLS, TrustedPrefixes. Load checks them with
// the library's own Validate methods where there is one.
package config
