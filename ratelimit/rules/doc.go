// Package rules reads rate-limit rules files: which requests are limited,
// how they are grouped into keys, and how much each key may do (seed 002,
// "rules as configuration, not code"). Package ratelimit/httplimit enforces
// them on net/http servers; the gateway's configuration embeds the same
// structs.
//
// # The file
//
// YAML or JSON (JSON is read as YAML). The seed's schema loads as written:
//
//	{ "rules": [
//	  { "id": "user-default", "key": ["user"],       "rate": 100, "per": "1m", "burst": 20 },
//	  { "id": "login",        "key": ["user", "ip"], "rate": 10,  "per": "15m" },
//	  { "id": "otp-sms",      "key": ["phone"],      "rate": 3,   "per": "10m", "failMode": "closed" },
//	  { "id": "tenant",       "key": ["tenant"],     "rate": 500, "per": "1s",  "burst": 1000 } ] }
//
// A rule's fields:
//
//	id         required; letters, digits, . _ : - (at most 64 bytes); unique
//	key        list of key parts (or one part as a string); omitted: one key for all
//	rate       required; units per period, > 0 (whole for window algorithms)
//	per        required; "1s", "1m", "15m", "1h", "1d", any Go duration, or seconds as a number
//	burst      bucket size in units (0 or omitted: ⌈rate⌉); leaky-queue: the queue size;
//	           must be omitted for window algorithms
//	algorithm  gcra (default), token-bucket, leaky-meter, leaky-queue,
//	           fixed-window, sliding-log, sliding-window (see ratelimit.ParseAlgorithm)
//	cost       units one request takes (default 1); at most the bucket or window size
//	shadow     true: count and log who would be refused, refuse no one
//	failMode   "open" (default: serve when the store is down) or "closed" (503)
//	onMissing  "skip" (default: a request lacking a key part is not limited by
//	           the rule) or "fallback" (all such requests share one key, FallbackKey)
//	match      {methods: [POST], paths: ["/login", "/api/*", "/users/{id}"]}; see Match
//
// Key parts: "ip" (the client IP, see below), "method", "path" (cleaned),
// "route" (the matched pattern of match.paths), "header:Name" (the first
// value of a header), or a named identity. The names user, tenant, phone and
// apikey are predefined (DefaultIdentities: X-User-Id, X-Tenant-Id, X-Phone,
// X-Api-Key); a top-level identities: section adds names or redefines them:
//
//	identities:
//	  user:   {header: X-Authenticated-User}
//	  device: {header: X-Device-Id}
//
// The parts' values are joined into one key per rule (a single part's value
// is the key itself). Every distinct key has its own budget, so a key part a
// client controls (a header) limits only honest clients unless something in
// front of the limiter sets or checks it.
//
// Top-level fields besides rules and identities:
//
//	trustedProxies   CIDR prefixes or addresses of proxies whose forwarding
//	                 header is believed: ["10.0.0.0/8", "192.0.2.7"]
//	forwardedHeader  "X-Forwarded-For" (default) or "Forwarded" (RFC 7239);
//	                 only this one header is read
//	ipv6Prefix       bits of an IPv6 client address that form its "ip" key
//	                 (default 64: one household or host; 128: each address)
//	x-anything       ignored: a place for YAML anchors shared by rules
//	                 (x-strict: &strict {failMode: closed}, then <<: *strict)
//
// The client IP is the connection's peer address unless that peer is a
// trusted proxy; then the forwarding header is walked from the right,
// skipping trusted proxies, and the first untrusted address is the client
// (the rightmost-untrusted rule: addresses left of it were written by the
// client and could be forged). Package httplimit implements it.
//
// # Errors
//
// Syntax errors, unknown fields, wrong types, bad values, duplicate fields
// and duplicate ids are errors. Parse and Load report them all (up to
// MaxErrors; a syntax error stops the reading) as a *FileError of *Error
// values, each "file:line:column: reason", and refuse the whole file when
// any rule is invalid, so a caller reloading rules keeps its old ones.
// Every problem is placed where it is, syntax errors too (package
// yamlfile):
//
//	rules.yaml:3:13: missing "," or "]" after "ip" (in the "[" opened at line 3, column 10)
//	rules.yaml:4:1: tab character: YAML indents with spaces only
//	rules.yaml:5:5: rule "a": rate is set twice (first at line 3)
//
// Files are bounded: MaxFileBytes, MaxRules, MaxKeyParts, MaxMatchEntries.
//
// The result is plain structs (Set, Rule, KeyPart, Match) with Validate
// methods, for programs that build rules in code.
package rules
