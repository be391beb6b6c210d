// Package discovery tells a balancer which endpoints exist: it produces
// []balancer.Endpoint lists for an endpoint set (issue 6, item 5). It decides
// nothing about health or load; a set that receives a new list keeps the
// counters and health of the endpoints that remain.
//
// # Sources
//
//   - Static: a fixed list, sent once.
//   - DNS: A/AAAA records (every address with one configured port) or SRV
//     records (target and port from each record, weight from the SRV weight,
//     only the lowest priority value in use), re-resolved when the answer's
//     TTL expires, clamped to [MinTTL, MaxTTL]. The default Resolver is Client,
//     a small stub resolver over UDP (TCP when the answer is truncated) that
//     reads TTLs, which net.Resolver does not expose.
//   - File: a JSON or YAML list of {addr, weight, meta}, polled (size, mtime
//     and a content hash; no inotify) and re-read when it changes.
//
// # What every source promises
//
// Run calls update with the current list as soon as it is known and again on
// every change, until its context ends; it then returns ctx.Err(). Lists are
// sorted by Addr, hold each Addr once, and a list equal to the previous one
// (same addresses, weights and metadata) is not sent again, so a consumer may
// diff consecutive lists cheaply. Each list handed to update is a fresh slice
// the consumer may keep; the Meta maps inside are shared and must not be
// modified.
//
// A failed refresh (a DNS timeout, a server failure, an empty answer, an
// unreadable, removed or invalid file) never produces an empty list: the
// source keeps its last good list, reports the error to OnError and tries
// again later. Run returns early only for a configuration error (a
// *ConfigError wrapping ErrConfig), before sending anything.
//
// update and OnError are called on the goroutine that called Run, one call at
// a time; Run does not start goroutines of its own that outlive it. A slow
// update delays the next refresh, nothing more.
package discovery
