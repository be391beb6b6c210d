// Package balancerhttp spreads HTTP requests over a balancer.Set: an
// http.RoundTripper that picks an endpoint for every request, rewrites the
// request's URL to it and sends it through an inner RoundTripper, plus the
// wiring that keeps the Set in step with discovery, active health checks and
// passive outlier detection.
//
// # The request path
//
// For each request, Transport.RoundTrip loads the Set's current snapshot (one
// atomic load, no lock), picks an endpoint — by consistent hashing when the
// request has a key (Config.Hash), otherwise with Config.Picker, by default
// balancer.LeastRequest: the power of two choices over requests in flight —
// counts the request in flight on it (EndpointState.Start), sends a shallow
// copy of the request whose URL scheme and host are the endpoint's (the Host
// header stays the caller's virtual host), and counts the request done when
// the response body is closed or read to its end, so that a slow download
// keeps counting as load. The answer is also fed to the optional
// health.Detector, whose ejections are applied to the Set at once.
//
// One allocation per request (the request copy, its URL and the body
// wrapper share one block), no goroutine, no lock shared between requests
// except when an ejection or an outlier tick is due.
//
// # Composition
//
// Put the Transport under client.Transport (client.Config.Transport): every
// attempt of the client stack — retries and hedges included — calls
// RoundTrip again and so picks afresh. A retry is not told which endpoint
// the failed attempt used; with two endpoints it lands on the same one half
// the time, unless passive outlier detection (Config.Outlier) has already
// ejected it.
//
// # Wiring
//
// Follow runs a discovery.Source and applies every list to the Set, the
// Checker's targets and the Detector's hosts; HealthCallback turns a
// health.Checker's state changes into Set.SetHealthy calls:
//
//	set, _ := balancer.NewSet(balancer.SetConfig{})
//	checker, _ := health.NewChecker(&health.HTTPCheck{Path: "/healthz"}, health.ActiveConfig{},
//		health.CheckerOptions{OnChange: balancerhttp.HealthCallback(set, clk)})
//	go balancerhttp.Follow(ctx, set, discovery.Static(eps...), checker, nil, clk)
//	checker.Start()
//	rt, _ := balancerhttp.New(balancerhttp.Config{Set: set, Clock: clk})
//	httpClient := &http.Client{Transport: rt}
package balancerhttp
