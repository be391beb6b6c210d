package httplimit

import (
	"context"
	"net/http"
	"time"

	"github.com/spillwayhq/spillway/clock"
)

// Handler returns next wrapped by the limiter: every rule matching a
// request is checked in order; a refusal answers at once and next is not
// called. The rules whose stores share a ratelimit.Joint (the Redis stores
// of one redisstore.Stores) are decided together, when the walk reaches
// the first of them: one round trip and one store timeout for all, and a
// refusal by one spends none of the others' units.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { l.serve(w, r, next) })
}

// serve decides r as Check decides a View, answers a refusal from the
// verdict, waits out a leaky queue's delay, and runs next.
func (l *Limiter) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	s := l.state.Load()
	now := l.clock.Now()
	ctx := r.Context()
	ds := l.decisions.get()
	defer l.decisions.put(ds)
	v := &ds.verdict
	v.reset()
	ds.in.fromHTTP(r, &v.ip)
	l.run(ctx, now, s, ds, v)
	if !v.Allowed {
		writeRefusal(w, v)
		return
	}
	if v.Limit != nil {
		setLimitHeaders(w.Header(), v)
	}
	if v.Delay > 0 && !l.wait(ctx, v.Delay) {
		l.Abandon(v)
		writeRefusal(w, v)
		return
	}
	next.ServeHTTP(w, r)
}

// writeRefusal answers the refusal v: a 429 with its rule's RateLimit
// fields, a 503 or 400 without them.
func writeRefusal(w http.ResponseWriter, v *Verdict) {
	if v.Status == http.StatusTooManyRequests {
		setLimitHeaders(w.Header(), v)
	} else {
		setErrorHeaders(w.Header(), v.RetryAfter)
	}
	w.WriteHeader(v.Status)
	_, _ = w.Write(v.Body)
}

// wait sleeps delay seconds, or until ctx ends; it reports whether the
// whole delay passed.
func (l *Limiter) wait(ctx context.Context, delay float64) bool {
	t := time.NewTimer(clock.Duration(delay))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
