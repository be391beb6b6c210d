// Package demo runs the seeds' overload story over real HTTP, in one
// process, on free loopback ports: the library part of `spillway demo`.
//
// A backend of known capacity (package backend: 10 workers, exponential
// service of mean 100 ms, so about 100 requests a second), the gateway
// (package gateway, from a generated config file) in front of it, and the
// open-loop load generator (package loadgen) run two experiments:
//
//   - Overload: Poisson loads from half to twice the capacity, 30% of the
//     requests critical, client timeout 1 s, for four gateway
//     configurations side by side — no protection, a bounded in-flight
//     limit that fails fast, priority shedding, and an adaptive limit with
//     priority. Each load level starts from an empty system.
//   - Capacity dip: new requests at 70% of capacity while the backend
//     loses half its workers for a while, with clients that retry at once
//     against clients that retry with backoff under a budget, the backend
//     dropping work whose client has gone; the gateway's own retries are
//     off so that one layer retries.
//
// Each measured table is printed beside what the simulator (package sim)
// predicts for the same parameters and the same admission config, and the
// results are drawn as an SVG chart and an HTML page. Times are scaled
// down from the seeds' (each load level and the dip are shorter); the
// output says by how much.
package demo
