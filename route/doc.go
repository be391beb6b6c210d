// Package route is the gateway's routing table: it maps a request, as the
// engine-neutral request.View shows it, to the value of the first route
// whose Match holds, in the order the routes were added (file order).
//
// A Match tests the host (exact, "*.example.com" wildcard, or any), the
// path (exact, segment-aware prefix, or an anchored RE2 regular
// expression), the method and header fields. Every condition a Match sets
// must hold; the zero Match matches every request.
//
// # Path semantics
//
// Paths are compared as received: still percent-encoded, without the query,
// with no dot-segment or slash normalisation. An engine that wants
// "/a/../admin" routed as "/admin" must normalise (or refuse) the path before
// it fills the View.
//
// A Prefix matches on segment boundaries: "/api" matches "/api", "/api/" and
// "/api/users", not "/apix"; a prefix that ends in "/" ("/api/") matches every
// path that starts with it ("/api/" and "/api/users", not "/api"). Nginx's
// and Envoy's prefixes are plain string prefixes, so that "/api" also routes
// "/apix" there; the segment-aware rule is the one people expect when they
// write "/api". RewritePrefix replaces a matched prefix with the same rule.
//
// # Speed
//
// Lookup does not allocate. Freeze indexes the routes by host: an exact host
// maps to the list of routes that may match it — its exact routes, the
// wildcards that cover it and the any-host routes, merged in insertion
// order — and a wildcard suffix to its own such list, so a lookup among
// 1,000 host routes costs one map lookup (a few more for a host that only
// wildcards cover: one per label) and then a scan of that short list only.
// The index holds one entry per (host key, route that may match it): at most
// (exact hosts + wildcard suffixes + 1) × routes, in practice a little more
// than the number of hosts written plus, for every host key, the any-host
// routes.
//
// # Concurrency
//
// Build a Table with Add from one goroutine, call Freeze, then share it:
// Lookup on a frozen Table is safe for concurrent use and takes no lock, and
// Add on it fails with ErrFrozen. A Table that is not frozen answers Lookup
// by scanning every route in order (same answers, slower); it must not be
// read while another goroutine adds to it.
package route
