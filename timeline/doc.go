// Package timeline keeps the gateway's recent past for the dashboard: one
// point a second, per route, cluster and endpoint, for the last 15
// minutes, in fixed-size rings.
//
// The sampler's logic is pure: Sample(now, snapshot) takes the time and
// the cumulative counters and current gauges the gateway already keeps
// (package metrics' series, the policy chain's counts, the guards' and the
// balancer's state) and turns counters into rates over the time since the
// previous sample. The gateway calls it from a ticker; tests call it with
// made-up instants.
//
// Bounds: Points samples (900: 15 minutes at 1 s) shared by every series;
// at most MaxRoutes routes, MaxClusters clusters, MaxEndpoints endpoints
// per cluster and MaxRejectKeys reject series (reason and class) per route
// — names past a bound are not tracked (Data.Untracked counts them; a
// route's further reject keys share the key "other"). A route costs
// 7 series + up to 8 reject series of 900 float32 (3.6 KB each): at most
// 54 KB; a cluster 6 series: 21.6 KB; an endpoint 900 bytes. All of it
// at most 3.3 MB; 5 routes and 2 clusters of 10 endpoints about 330 KB.
// A name absent from Points samples in a row (a route removed by a
// reload) is forgotten.
package timeline
