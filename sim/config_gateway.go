package sim

import (
	"context"
	"maps"
	"slices"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/chain"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/retry"
)

// A request's way through the simulated gateway, in package chain's
// order: rate limit, bulkhead, admission, then per attempt the breaker
// and the balancer's pick, and after a failed attempt the route's retry.

// gateway takes client attempt r at now: its route's rate-limit rules.
func (s *configSim) gateway(r *cfgReq, now float64) {
	rt := r.call.route
	if rt.lim == nil {
		s.afterRateLimit(r, now)
		return
	}
	v := request.View{Method: "GET", Host: firstHost(rt.r.Match.HostList()), Path: pathOf(rt.r.Match.Path, rt.r.Match.Prefix),
		Major: 1, Minor: 1, Client: r.call.client}
	rt.lim.Check(context.Background(), now, &v, rt.r.Name, &r.rl)
	switch {
	case !r.rl.Allowed:
		s.refuse(r, now, r.rl.Reason, r.rl.Status)
	case r.rl.Delay > 0:
		r.rlWait = true
		s.ev.push(now+r.rl.Delay, cfgResume, &r.g)
	default:
		s.afterRateLimit(r, now)
	}
}

func firstHost(h []string) string {
	if len(h) == 0 {
		return ""
	}
	return h[0]
}

func pathOf(path, prefix string) string {
	switch {
	case path != "":
		return path
	case prefix != "":
		return prefix
	}
	return "/"
}

// afterRateLimit runs the bulkhead and the cluster's admission.
func (s *configSim) afterRateLimit(r *cfgReq, now float64) {
	rt := r.call.route
	if rt.bulk > 0 {
		if rt.inFlight >= rt.bulk {
			s.refuse(r, now, chain.ReasonBulkhead, 503)
			return
		}
		rt.inFlight++
		r.bulk = true
	}
	g := rt.cl.gate
	if g == nil || rt.r.Streaming {
		s.admitted(r, now)
		return
	}
	switch goOn, why := g.enter(&r.g, now); {
	case goOn:
		s.admitted(r, now)
	case why != limit.Admitted:
		s.refuseAdmit(r, now, why)
	}
}

// admitRefusals are the gateway's answers to admission refusals, by
// reason (chain.AdmitRefusal), built once.
var admitRefusals = func() (t [limit.NumReasons]*chain.Refusal) {
	for r := limit.Reason(1); int(r) < limit.NumReasons; r++ {
		t[r] = chain.AdmitRefusal(r)
	}
	return t
}()

// refuseAdmit ends r with the gateway's answer to an admission refusal.
func (s *configSim) refuseAdmit(r *cfgReq, now float64, why limit.Reason) {
	ref := admitRefusals[why]
	s.refuse(r, now, ref.Reason, ref.Status)
}

// admitted: the request earns retries, and its first attempt goes.
func (s *configSim) admitted(r *cfgReq, now float64) {
	if p := r.call.route.retry; p != nil {
		p.RecordRequest(now)
	}
	s.attempt(r, now)
}

// attempt asks the breaker, picks an endpoint and sends to it.
func (s *configSim) attempt(r *cfgReq, now float64) {
	cl := r.call.route.cl
	r.attempts++
	if cl.brk != nil {
		t, err := cl.brk.Allow(now)
		switch {
		case err == nil:
			r.brk, r.brkOn = t, true
		case cl.brkShadow:
		case cl.fallback != "":
			s.refuse(r, now, cl.fallback, cl.fbStatus)
			return
		default:
			s.refuse(r, now, chain.ReasonBreakerOpen, 503)
			return
		}
	}
	es, err := s.pickFor(r, now)
	if err != nil {
		s.refuse(r, now, "no-healthy-endpoint", 503)
		return
	}
	ep := cl.eps[es.Addr()]
	j := &predJob{sent: now, req: r, ep: ep}
	r.cur, r.es = j, es
	if !ep.srv.arrive(j, now) {
		s.upstreamDone(r, now, 503)
		return
	}
	if d := r.call.route.perTry; d > 0 {
		s.ev.push(now+d, cfgTryTimeout, j)
	}
}

// pickFor picks as the proxy does: a retry avoids the endpoints tried
// already (three more draws, then the least loaded untried one).
func (s *configSim) pickFor(r *cfgReq, now float64) (*balancer.EndpointState, error) {
	set := r.call.route.cl.set
	e, err := set.Pick(now, r.call.route.cl.picker)
	if err != nil {
		return nil, err
	}
	for k := 0; k < 3 && len(r.tried) > 0 && slices.Contains(r.tried, e.Addr()); k++ {
		other, err := set.Pick(now, r.call.route.cl.picker)
		if err != nil {
			break
		}
		e.Done(now, -1, false)
		e = other
	}
	if len(r.tried) > 0 && slices.Contains(r.tried, e.Addr()) {
		snap, best := set.Current(now), -1
		for i := 0; i < snap.Len(); i++ {
			if !slices.Contains(r.tried, snap.Endpoint(i).Addr()) && (best < 0 || snap.Load(i) < snap.Load(best)) {
				best = i
			}
		}
		if best >= 0 {
			e.Done(now, -1, false)
			e = snap.Endpoint(best)
			e.Start()
		}
	}
	if len(r.tried) < 8 {
		r.tried = append(r.tried, e.Addr())
	}
	return e, nil
}

// finish is a backend's answer: 500 with the spec's error share, else 200.
func (s *configSim) finish(e predEvent) {
	j := e.job
	if !j.ep.srv.finished(e) {
		return
	}
	r := j.req
	if r.cur != j || r.answered {
		return // an attempt the gateway gave up on: wasted work
	}
	status := 200
	if b := s.m.Backend.Errors; b > 0 && s.misc.Float64() < b {
		status = 500
	}
	s.upstreamDone(r, e.at, status)
}

// upstreamDone ends r's attempt at now with the upstream's status (0:
// the attempt's timeout), then retries it or answers the client.
func (s *configSim) upstreamDone(r *cfgReq, now float64, status int) {
	failed := status == 0 || status >= 500
	if status == 0 {
		r.cur.ep.srv.cancel(r.cur, now)
	}
	r.es.Done(now, now-r.cur.sent, !failed)
	if r.brkOn {
		r.brk.Done(now, !failed)
		r.brkOn = false
	}
	r.cur, r.es = nil, nil
	rt := r.call.route
	if failed && rt.retry != nil && retryable(rt, status) {
		delay, v := rt.retry.Next(retry.Attempt{N: r.attempts, Now: now, Prev: r.prev, After: -1}, s.misc)
		if v == retry.Retry {
			r.prev = delay
			s.series.count(now).gwRetries++
			s.ev.push(now+delay, cfgRetry, &r.g)
			return
		}
	}
	switch status {
	case 0:
		s.answer(r, now, 504, "upstream-timeout", false)
	default:
		s.answer(r, now, status, "", true)
	}
}

// retryable is the route's retry.on for an idempotent request (the
// simulated requests are GETs).
func retryable(rt *cfgRoute, status int) bool {
	if status == 0 {
		return rt.r.Policies.Retry.RetryKind("timeout")
	}
	return rt.r.Policies.Retry.RetryStatus(status)
}

// refuse answers r with the gateway's own refusal.
func (s *configSim) refuse(r *cfgReq, now float64, reason string, status int) {
	s.series.count(now).reject(reason)
	s.answer(r, now, status, reason, false)
}

// answer ends r at the gateway with status (fromUp: the upstream's own
// answer), releasing what it holds, and hands the result to its client.
func (s *configSim) answer(r *cfgReq, now float64, status int, reason string, fromUp bool) {
	if r.answered {
		return
	}
	r.answered = true
	o := limit.Success
	if r.gone || (!fromUp && status >= 500) || (fromUp && (status == 503 || status == 504 || status == 429)) {
		o = limit.Dropped
	}
	s.release(r, now, o)
	if !r.gone {
		s.clientAnswer(r, now, status, reason)
	}
}

// release frees r's admission place, bulkhead place and breaker trial.
func (s *configSim) release(r *cfgReq, now float64, o limit.Outcome) {
	if g := r.call.route.cl.gate; g != nil {
		g.done(&r.g, now, o)
	}
	if r.bulk {
		r.call.route.inFlight--
		r.bulk = false
	}
	if r.brkOn {
		r.brk.Cancel()
		r.brkOn = false
	}
}

// clientTimeout: r's client gives up; the gateway sees it gone and lets
// go of whatever r holds or waits for.
func (s *configSim) clientTimeout(r *cfgReq, now float64) {
	if r.answered {
		return
	}
	r.gone = true
	rt := r.call.route
	switch {
	case r.g.w != nil:
		rt.cl.gate.giveUp(r.g.w, now, limit.ReasonCancelled)
	case r.rlWait:
		rt.lim.Abandon(&r.rl)
	case r.cur != nil:
		r.cur.ep.srv.cancel(r.cur, now)
		r.es.Done(now, -1, false)
		r.cur, r.es = nil, nil
	}
	s.answer(r, now, 0, "", false)
	s.clientAnswer(r, now, 0, "")
}

func sortedClusterNames(m map[string]*cfgCluster) []string { return slices.Sorted(maps.Keys(m)) }
