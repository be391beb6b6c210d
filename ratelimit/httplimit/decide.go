package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sync"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// decisions is one request's matching rules and their answers, in rule
// order: items[i] is rules[i]'s store, key, cost and answer. Pooled.
type decisions struct {
	in      incoming // the request being decided
	verdict Verdict  // Handler's verdict (Check fills the caller's)
	rules   []*rule
	items   []ratelimit.JointItem
	decided []bool
	group   []int                 // scratch: the items of one Joint
	joint   []ratelimit.JointItem // scratch: their copies, contiguous
}

// decisionsPool recycles decisions; one that grew past 64 rules is dropped.
type decisionsPool struct{ p sync.Pool }

func (p *decisionsPool) get() *decisions {
	if d, ok := p.p.Get().(*decisions); ok {
		return d
	}
	d := &decisions{}
	d.in.collect = d.in.addLine // bound once: Header.Values takes it without allocating
	return d
}

func (p *decisionsPool) put(d *decisions) {
	if cap(d.items) > 64 || cap(d.in.lines) > 64 {
		return
	}
	d.in.reset()
	d.verdict.reset()
	clear(d.rules)
	clear(d.items)
	clear(d.joint)
	d.rules, d.items, d.decided, d.group, d.joint = d.rules[:0], d.items[:0], d.decided[:0], d.group[:0], d.joint[:0]
	p.p.Put(d)
}

// add appends rule ru's part of the request.
func (d *decisions) add(ru *rule, key string, cost int) {
	d.rules = append(d.rules, ru)
	d.items = append(d.items, ratelimit.JointItem{Store: ru.store, Key: key, Cost: cost, Shadow: ru.Shadow})
	d.decided = append(d.decided, false)
}

// decide decides item i unless it is decided already. An item whose store
// belongs to a ratelimit.Joint is decided together with every later
// undecided item of the same Joint, in one AllowJoint (for Redis rules: one
// round trip and one timeout for all of them, and a refusal spends none of
// the others' units); any other item by its store's AllowN.
func (d *decisions) decide(ctx context.Context, now float64, i int) {
	if d.decided[i] {
		return
	}
	it := &d.items[i]
	j := d.rules[i].joint // resolved when the rule was compiled
	d.group = d.group[:0]
	if j != nil {
		for k := i; k < len(d.items); k++ {
			if !d.decided[k] && d.rules[k].joint == j {
				d.group = append(d.group, k)
			}
		}
	}
	if len(d.group) < 2 {
		it.Decision, it.Err = it.Store.AllowN(ctx, it.Key, now, it.Cost)
		d.decided[i] = true
		return
	}
	d.joint = d.joint[:0]
	for _, k := range d.group {
		d.joint = append(d.joint, d.items[k])
	}
	j.AllowJoint(ctx, now, d.joint)
	for n, k := range d.group {
		d.items[k] = d.joint[n]
		d.decided[k] = true
	}
}

// run decides the request in ds.in at now under every rule of s that
// matches it, counting and logging each rule's outcome, and records the
// verdict in out (reset by the caller): the decision core of Handler and
// Check.
func (l *Limiter) run(ctx context.Context, now float64, s *ruleSet, ds *decisions, out *Verdict) {
	l.matching(s, &ds.in, ds)
	var best *rule // the enforcing rule with the least remaining
	var bestD ratelimit.Decision
	var queued *rule // the queue rule with the longest delay
	var delay float64
	for i, ru := range ds.rules {
		it := &ds.items[i]
		if ru.hot != nil {
			ru.hot.Observe(it.Key, it.Cost, now)
		}
		ds.decide(ctx, now, i)
		d, err := it.Decision, it.Err
		switch {
		case errors.Is(err, ratelimit.ErrSkipped):
			// not decided: a later rule of its Joint refused at once
		case err != nil:
			ru.c.storeError.Inc()
			l.logStoreError(ru, now, it.Key, err)
			if ru.FailMode == ratelimit.FailClosed && !ru.Shadow {
				l.unavailable(out, ru, d)
				return
			}
		case !d.Allowed && ru.Shadow:
			ru.c.shadowDenied.Inc()
			l.logShadow(ctx, ru, now, it.Key, &ds.in, d)
		case !d.Allowed:
			ru.c.denied.Inc()
			l.deny(out, ru, d)
			return
		default:
			ru.c.allowed.Inc()
			if ru.Shadow {
				continue
			}
			if ru.queue && d.Delay > delay {
				queued, delay = ru, d.Delay
			}
			if best == nil || d.Remaining < bestD.Remaining {
				best, bestD = ru, d
			}
		}
	}
	out.Allowed, out.Delay, out.queued = true, delay, queued
	if best != nil {
		out.fields(best, bestD.Remaining, ceilSeconds(bestD.Reset))
	}
}

// matching adds to ds the rules of s that match the request, with their
// keys and costs, in rule order.
func (l *Limiter) matching(s *ruleSet, in *incoming, ds *decisions) {
	for _, ru := range s.rules {
		path := "" // Matches reads it only when the rule names paths
		if len(ru.Match.Paths) > 0 {
			path = in.cleanPath()
		}
		route, ok := ru.Match.Matches(in.method, path)
		if !ok {
			continue
		}
		key, ok := l.key(s, ru, in, route)
		if !ok {
			if ru.OnMissing == rules.MissingSkip {
				continue
			}
			key = rules.FallbackKey
		}
		cost := ru.RequestCost()
		if l.cfg.Cost != nil && in.hr != nil {
			if c := l.cfg.Cost(in.hr, &ru.Rule); c > 0 {
				cost = c
			}
		}
		ds.add(ru, key, cost)
	}
}

// retryAfter is the Retry-After seconds for a wait of ra seconds: ⌈ra +
// jitter⌉, at least 1.
func (l *Limiter) retryAfter(ra float64) int64 {
	if l.cfg.Jitter > 0 {
		ra += l.rand.Float64() * l.cfg.Jitter
	}
	return max(1, ceilSeconds(ra))
}

// deny makes out rule ru's 429 (or 400 when the request can never pass
// the rule).
func (l *Limiter) deny(out *Verdict, ru *rule, d ratelimit.Decision) {
	if math.IsInf(d.RetryAfter, 1) {
		out.refuse(ru, http.StatusBadRequest, ru.reasonLimited, -1)
		out.Body = ru.tooBig.fixed
		return
	}
	secs := l.retryAfter(d.RetryAfter)
	b := out.fields(ru, d.Remaining, secs)
	out.refuse(ru, http.StatusTooManyRequests, ru.reasonLimited, secs)
	out.body(b, &ru.limited, secs)
}

// unavailable makes out the 503 of a fail-closed rule whose store failed.
func (l *Limiter) unavailable(out *Verdict, ru *rule, d ratelimit.Decision) {
	ra := d.RetryAfter
	if !(ra > 0) || math.IsInf(ra, 1) {
		ra = l.cfg.UnavailableRetryAfter
	}
	secs := l.retryAfter(ra)
	out.refuse(ru, http.StatusServiceUnavailable, ru.reasonUnavail, secs)
	out.body(out.buf[:0], &ru.unavail, secs)
}

func (l *Limiter) logShadow(ctx context.Context, ru *rule, now float64, key string, in *incoming, d ratelimit.Decision) {
	ok, dropped := ru.gate.Allow(now)
	if !ok {
		return
	}
	l.log.LogAttrs(ctx, slog.LevelInfo, "ratelimit: shadow rule would refuse",
		slog.String("rule", ru.ID), slog.String("key", key), slog.String("method", in.method),
		slog.String("path", in.cleanPath()), slog.Float64("retry_after", d.RetryAfter), slog.Uint64("suppressed", dropped))
}

func (l *Limiter) logStoreError(ru *rule, now float64, key string, err error) {
	ok, dropped := ru.gate.Allow(now)
	if !ok {
		return
	}
	l.log.LogAttrs(context.Background(), slog.LevelWarn, "ratelimit: store cannot decide; applying fail mode",
		slog.String("rule", ru.ID), slog.String("fail_mode", ru.FailMode.String()), slog.String("key", key),
		slog.String("error", err.Error()), slog.Uint64("suppressed", dropped))
}
