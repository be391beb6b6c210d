package gateway

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/proxy"
	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/route"
)

// Options are a Gateway's collaborators; every field is optional.
type Options struct {
	Logger *slog.Logger // [slog.Default()]
	Clock  clock.Clock  // [clock.NewReal()]
	// AccessLog receives the routes' access log lines [Logger]; spillway
	// serve gives a JSON handler on stdout.
	AccessLog *slog.Logger
}

// router is proxy.Router over a frozen route table.
type router struct {
	t      *route.Table[*proxy.Route]
	routes []*proxy.Route // in table order
}

func (r router) Route(v *request.View) (*proxy.Route, bool) {
	rt, _, ok := r.t.Lookup(v)
	return rt, ok
}

// compileRoute turns a configured route into the proxy's.
func compileRoute(r *config.Route, cl *cluster) *proxy.Route {
	out := &proxy.Route{
		Name: r.Name, Cluster: cl.px,
		ResponseHeaderTimeout: r.Timeouts.ResponseHeader.D(),
		RequestTimeout:        r.Timeouts.Request.D(),
		IdleTimeout:           r.Timeouts.Idle.D(),
		Streaming:             r.Streaming,
		AccessLog:             logMode(r.AccessLog), AccessSample: r.AccessSample,
		RequestRemove:  lower(r.RequestHeaders.Remove),
		ResponseRemove: lower(r.ResponseHeaders.Remove),
		MaxBodyBytes:   int64(r.MaxBodyBytes),
		Upgrades:       lower(r.Upgrades),
	}
	out.RequestAdd, out.RequestRemove = adds(r.RequestHeaders.Add, out.RequestRemove)
	out.ResponseAdd, out.ResponseRemove = adds(r.ResponseHeaders.Add, out.ResponseRemove)
	if r.Match.Prefix != "" && r.Rewrite.Prefix != "" {
		out.Prefix, out.RewritePrefix = r.Match.Prefix, r.Rewrite.Prefix
	}
	return out
}

// adds lists header additions in name order; an added header replaces any
// of the same name, so its name joins the removals.
func adds(m map[string]string, remove []string) ([]proxy.Field, []string) {
	var out []proxy.Field
	for _, k := range sortedKeys(m) {
		out = append(out, proxy.Field{Name: k, Value: m[k]})
		remove = append(remove, strings.ToLower(k))
	}
	return out, remove
}

// matchOf maps a configured match onto the route package's.
func matchOf(m *config.Match) route.Match {
	out := route.Match{Hosts: m.HostList(), Path: m.Path, Prefix: m.Prefix, Regex: m.Regex, Methods: m.Methods}
	for _, h := range m.Headers {
		hm := route.HeaderMatch{Name: h.Name, Value: h.Value, Regex: h.Regex}
		if h.HasPresent {
			hm.Present, hm.Invert = true, !h.Present
		}
		out.Headers = append(out.Headers, hm)
	}
	return out
}

// routerFor builds the frozen table of a listener's routes; live counts
// their requests in flight (the generation's).
func routerFor(cfg *config.Config, l *config.Listener, clusters map[string]*cluster, live *atomic.Int64, pol *policyState) (router, error) {
	out := router{t: new(route.Table[*proxy.Route])}
	for _, r := range cfg.ListenerRoutes(l) {
		rt := compileRoute(r, clusters[r.Cluster])
		rt.Live = live
		ch, fallback, err := pol.chainFor(cfg, r, clusters)
		if err != nil {
			return router{}, err
		}
		rt.Policy, rt.Fallback, rt.GRPC = ch, fallback, r.GRPC
		if r.Policies.Retry.Attempts > 1 {
			rt.ReplayBytes = int64(r.Policies.Retry.BufferBytes)
		}
		if err := out.t.Add(matchOf(&r.Match), rt); err != nil {
			return router{}, fmt.Errorf("route %q: %w", r.Name, err)
		}
		out.routes = append(out.routes, rt)
	}
	out.t.Freeze()
	return out, nil
}

// connectTimeouts returns, per cluster, the longest connect timeout of the
// routes that use it (5 s for a cluster only tcp listeners use).
func connectTimeouts(cfg *config.Config) map[string]time.Duration {
	out := map[string]time.Duration{}
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		out[r.Cluster] = max(out[r.Cluster], r.Timeouts.Connect.D())
	}
	return out
}

// logMode maps access_log onto the proxy's modes.
func logMode(s string) proxy.LogMode {
	switch s {
	case "full":
		return proxy.LogFull
	case "sampled":
		return proxy.LogSampled
	}
	return proxy.LogOff
}
