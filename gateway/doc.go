// Package gateway is `spillway serve`: it builds a running gateway from a
// config.Config — listeners, routes, clusters with their endpoint
// sources, health checks and connection pools — and runs it until its
// context ends.
//
// The layers, top to bottom (docs/ARCHITECTURE.md has the whole picture):
//
//	config    the file, validated, mapped onto the library's structs
//	gateway   generations: clusters (balancer.Set, picker, upstream pools,
//	          discovery, health.Checker) and routes (route.Table) built
//	          from one config; sockets, reload, drain, admin, metrics
//	listener  accept, self-protection (overload), PROXY headers, TLS
//	proxy     the engines: HTTP/1.1 (httpwire), HTTP/2 and h2c
//	          (x/net/http2), forwarding through upstream pools
//	l4        tcp listeners: each connection balanced over a cluster
//
// A reload (Reload, ReloadConfig) builds the next generation in full and
// refuses it on any problem; on success sockets are kept by identity
// (protocol and address), each engine while its settings are the same,
// clusters by identity (see carry.go), and the replaced generation serves
// the requests it took until they end. Terminate is SIGTERM's sequence:
// readiness fails, clients are told to go (Connection: close, GOAWAY)
// for drain.delay while the listeners still accept, then Shutdown gives
// requests in flight drain.timeout.
package gateway
