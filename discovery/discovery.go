package discovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/balancer"
)

// Source produces the endpoint list of one service.
type Source interface {
	// Run sends the current endpoint list on every change (first send as
	// soon as known) until ctx ends; it returns ctx.Err() or a fatal error
	// (a configuration error, before any send). It never sends an empty list
	// because of a transient failure: on a failed refresh it keeps the last
	// good list and reports the error via OnError. Lists are sorted by Addr
	// and consecutive identical lists are not re-sent. update is called on
	// the goroutine running Run, one call at a time; it must not be nil.
	Run(ctx context.Context, update func([]balancer.Endpoint)) error
}

const (
	// MaxWeight is the largest endpoint weight a static list or a file may
	// give. SRV weights (at most 65,535) are always within it.
	MaxWeight = 1_000_000
	// MaxEndpoints bounds the length of a static list or a file's list. A DNS
	// answer is bounded by the DNS message size (64 KiB) instead.
	MaxEndpoints = 100_000
)

var (
	// ErrConfig is the sentinel every configuration error wraps:
	// errors.Is(err, discovery.ErrConfig) tells a bad configuration from a
	// cancelled context.
	ErrConfig = errors.New("discovery: invalid configuration")
	// ErrNoRecords: a DNS name does not exist (NXDOMAIN) or has no usable
	// record of the type asked for. A DNS source treats it as a failed
	// refresh and keeps its last list.
	ErrNoRecords = errors.New("discovery: no records")
)

// ConfigError reports a bad configuration field. It wraps ErrConfig.
type ConfigError struct {
	Field  string // e.g. "DNS.Port" or "Static[3].Addr"
	Reason string // what is wrong with it
}

// Error returns "discovery: Field: Reason".
func (e *ConfigError) Error() string { return "discovery: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func badConfig(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Static returns a Source that sends eps once, sorted by Addr, and then waits
// for its context to end. The slice is copied; the Meta maps are not. Run
// returns a *ConfigError, sending nothing, when an Addr is empty or repeated,
// a Weight is negative or above MaxWeight, or there are more than
// MaxEndpoints. An empty list is valid and is sent as such: it is
// configuration, not a failure.
func Static(eps ...balancer.Endpoint) Source { return &static{eps: slices.Clone(eps)} }

type static struct{ eps []balancer.Endpoint }

func (s *static) Run(ctx context.Context, update func([]balancer.Endpoint)) error {
	if update == nil {
		return badConfig("update", "must not be nil")
	}
	if len(s.eps) > MaxEndpoints {
		return badConfig("Static", "%d endpoints, more than MaxEndpoints (%d)", len(s.eps), MaxEndpoints)
	}
	seen := make(map[string]int, len(s.eps))
	for i, e := range s.eps {
		switch {
		case e.Addr == "":
			return badConfig(fmt.Sprintf("Static[%d].Addr", i), "must not be empty")
		case e.Weight < 0 || e.Weight > MaxWeight:
			return badConfig(fmt.Sprintf("Static[%d].Weight", i), "must be in [0, %d] (0 means 1), got %d", MaxWeight, e.Weight)
		}
		if j, dup := seen[e.Addr]; dup {
			return badConfig(fmt.Sprintf("Static[%d].Addr", i), "%q repeats Static[%d]", e.Addr, j)
		}
		seen[e.Addr] = i
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	em := emitter{update: update}
	em.send(slices.Clone(s.eps))
	<-ctx.Done()
	return ctx.Err()
}

// emitter sorts lists and passes on those that differ from the last one sent.
type emitter struct {
	update func([]balancer.Endpoint)
	last   []balancer.Endpoint // our own copy of the last list sent
	sent   bool
}

// send sorts list in place (list must be the caller's own slice) and hands a
// copy to update unless it equals the last list sent. It reports whether it
// sent.
func (em *emitter) send(list []balancer.Endpoint) bool {
	sortByAddr(list)
	if em.sent && equalLists(em.last, list) {
		return false
	}
	em.last, em.sent = list, true
	out := slices.Clone(list)
	if out == nil {
		out = []balancer.Endpoint{}
	}
	em.update(out)
	return true
}

func sortByAddr(list []balancer.Endpoint) {
	slices.SortFunc(list, func(a, b balancer.Endpoint) int { return strings.Compare(a.Addr, b.Addr) })
}

// equalLists compares two sorted lists: addresses, weights and metadata.
func equalLists(a, b []balancer.Endpoint) bool {
	return slices.EqualFunc(a, b, func(x, y balancer.Endpoint) bool {
		return x.Addr == y.Addr && x.Weight == y.Weight && maps.Equal(x.Meta, y.Meta)
	})
}

// sleepFunc waits d or until ctx ends, returning ctx.Err() in that case.
// Tests replace it to observe the delays a source asks for and to step it.
type sleepFunc func(ctx context.Context, d time.Duration) error

func realSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
