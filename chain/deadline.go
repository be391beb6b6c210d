package chain

import (
	"strconv"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/deadline"
	"github.com/spillwayhq/spillway/request"
)

// Deadline is a route's request budget, in seconds.
type Deadline struct {
	// Default is the budget of a request that names none; 0: none.
	Default float64
	// Max caps every budget; 0: no cap.
	Max float64
	// Headers reads the budget a trusted peer sends: Spillway-Timeout,
	// else grpc-timeout, else Envoy's x-envoy-expected-rq-timeout-ms.
	Headers bool
	// Forward sends the remaining budget upstream.
	Forward bool
}

// EnvoyHeader is the budget Envoy's router sends, in milliseconds.
const EnvoyHeader = "x-envoy-expected-rq-timeout-ms"

// budget returns the request's budget in seconds; ok false when it has
// none. A malformed header from a trusted peer is an error (answered
// 400): the peer is ours, and guessing would hide its bug.
func (d *Deadline) budget(v *request.View) (secs float64, ok bool, err error) {
	if d.Headers && v.Trusted {
		secs, ok, err = headerBudget(v)
		if err != nil {
			return 0, false, err
		}
	}
	if !ok && d.Default > 0 {
		secs, ok = d.Default, true
	}
	if d.Max > 0 && (!ok || secs > d.Max) {
		secs, ok = d.Max, true
	}
	return secs, ok, nil
}

// headerBudget reads the first budget header present.
func headerBudget(v *request.View) (float64, bool, error) {
	if s, ok := v.Get(deadline.HTTPHeader); ok {
		t, err := deadline.ParseTimeout(s)
		return t.Seconds(), err == nil, err
	}
	if s, ok := v.Get(deadline.GRPCKey); ok {
		t, err := deadline.ParseTimeout(s)
		return t.Seconds(), err == nil, err
	}
	if s, ok := v.Get(EnvoyHeader); ok {
		ms, err := strconv.ParseUint(strings.TrimSpace(s), 10, 40)
		if err != nil {
			return 0, false, err
		}
		return (time.Duration(ms) * time.Millisecond).Seconds(), true, nil
	}
	return 0, false, nil
}
