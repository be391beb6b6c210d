// Package gateway is `spillway serve`: it builds a running gateway from a
// config.Config — listeners, routes, clusters with their endpoint
// sources, health checks and connection pools — and runs it until its
// context ends.
//
// The layers, top to bottom (docs/ARCHITECTURE.md has the whole picture):
//
//	config    the file, validated, mapped onto the library's structs
//	gateway   Build: clusters (balancer.Set, picker, upstream pools,
//	          discovery, health.Checker) and routes (route.Table); Run:
//	          listeners, the admin endpoint, shutdown
//	proxy     the engines: HTTP/1.1 (httpwire), HTTP/2 and h2c
//	          (x/net/http2), forwarding through upstream pools
//	l4        tcp listeners: each connection balanced over a cluster
//
// A Gateway is built once per configuration. Part 2 of the gateway (hot
// reload, drain) swaps generations; today a new configuration means a new
// process.
package gateway
