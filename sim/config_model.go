package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/loadgen"
)

// ConfigModel is `spillway sim config`: a gateway config file's routes,
// their real policy objects built from it, driven under virtual time by
// simulated clients against a simulated backend per endpoint.
type ConfigModel struct {
	// Config is the gateway's config as config.Load returns it.
	Config *config.Config
	// Route names the one route the load goes to; "": every route, in
	// equal shares.
	Route string
	// Backend is every endpoint's model (one per endpoint of each cluster).
	Backend BackendSpec
	// Schedule changes endpoints' workers over time.
	Schedule []CapacityChange
	// Steps are the load's steps, one after the other on one timeline
	// (loadgen.ParseRate); arrivals are Poisson.
	Steps []loadgen.Step
	// Classes is the class mix (loadgen.ParseClasses); it sets a request's
	// class only on routes whose class_header is on (the simulated clients
	// are trusted peers); elsewhere, and for the rest of the mix, the
	// route's class.
	Classes []loadgen.Class
	// Clients is the size of the client population (distinct addresses,
	// drawn uniformly per call): the key of rate-limit rules on ip.
	Clients int
	// Timeout is the client's timeout per attempt, > 0.
	Timeout time.Duration
	// Client is the client's retry policy (loadgen's meaning: Retries
	// extra attempts, backoff 50 ms to 1 s by default, a budget of 10%).
	Client loadgen.ClientPolicy
	// Seed makes runs deterministic.
	Seed uint32
}

// BackendSpec is one endpoint's backend: package backend's model.
type BackendSpec struct {
	Workers int           // requests worked on at once, ≥ 1
	Service time.Duration // mean service time, > 0
	Dist    string        // "exp" (exponential) or "const"
	Errors  float64       // share of the finished requests answered 500, in [0, 1]
	Queue   int           // requests that may wait for a worker (then 503)
	Honor   bool          // a request whose client left frees its place (HonorCancel)
}

// DefaultBackend is --backend's default: 10 workers × 100 ms exponential
// (100 requests a second per endpoint), a queue of 1000, no errors.
var DefaultBackend = BackendSpec{Workers: 10, Service: 100 * time.Millisecond, Dist: "exp", Queue: 1000}

// CapacityChange sets Workers on the endpoint Endpoint (-1: every
// endpoint) from From to To (seconds of the run).
type CapacityChange struct {
	Endpoint int
	From, To time.Duration
	Workers  int
}

// configMaxArrivals bounds a run's calls.
const configMaxArrivals = 5_000_000

// ParseBackend reads "workers=10,service=100ms,dist=exp,errors=0.01,queue=1000,cancel=true"
// over DefaultBackend (any key may be left out).
func ParseBackend(spec string) (BackendSpec, error) {
	b := DefaultBackend
	if strings.TrimSpace(spec) == "" {
		return b, nil
	}
	for _, f := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return b, usageErr("backend %q: %q, want key=value", spec, f)
		}
		if err := b.set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return b, usageErr("backend %q: %s: %v", spec, k, err)
		}
	}
	return b, b.check()
}

func (b *BackendSpec) set(k, v string) error {
	var err error
	switch k {
	case "workers":
		b.Workers, err = strconv.Atoi(v)
	case "service":
		b.Service, err = time.ParseDuration(v)
	case "dist":
		b.Dist = v
	case "errors":
		b.Errors, err = strconv.ParseFloat(v, 64)
	case "queue":
		b.Queue, err = strconv.Atoi(v)
	case "cancel":
		b.Honor, err = strconv.ParseBool(v)
	default:
		return fmt.Errorf("unknown key (want workers, service, dist, errors, queue or cancel)")
	}
	return err
}

func (b *BackendSpec) check() error {
	switch {
	case b.Workers < 1 || b.Workers > 100000:
		return usageErr("backend: workers %d, want 1 to 100000", b.Workers)
	case b.Service <= 0:
		return usageErr("backend: service %v, want more than 0", b.Service)
	case b.Dist != "exp" && b.Dist != "const":
		return usageErr("backend: dist %q, want exp or const", b.Dist)
	case !(b.Errors >= 0 && b.Errors <= 1):
		return usageErr("backend: errors %v, want a share in [0, 1]", b.Errors)
	case b.Queue < 0 || b.Queue > 1_000_000:
		return usageErr("backend: queue %d, want 0 to 1000000", b.Queue)
	}
	return nil
}

// ParseSchedule reads capacity changes as "30s-60s:5" (every endpoint
// has 5 workers from 30 s to 60 s) or "1@30s-60s:0" (endpoint 1, counted
// from 0 in the cluster's endpoint order), several separated by commas.
func ParseSchedule(spec string) ([]CapacityChange, error) {
	var out []CapacityChange
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(spec, ",") {
		c, err := parseChange(strings.TrimSpace(f))
		if err != nil {
			return nil, usageErr("schedule %q: %q: %v (want [ENDPOINT@]FROM-TO:WORKERS, as 30s-60s:5)", spec, f, err)
		}
		out = append(out, c)
	}
	if len(out) > 100 {
		return nil, usageErr("schedule %q: %d changes, want at most 100", spec, len(out))
	}
	return out, nil
}

func parseChange(f string) (CapacityChange, error) {
	c := CapacityChange{Endpoint: -1}
	if ep, rest, ok := strings.Cut(f, "@"); ok {
		n, err := strconv.Atoi(ep)
		if err != nil || n < 0 {
			return c, fmt.Errorf("endpoint %q is not an index", ep)
		}
		c.Endpoint, f = n, rest
	}
	span, w, ok := strings.Cut(f, ":")
	from, to, ok2 := strings.Cut(span, "-")
	if !ok || !ok2 {
		return c, fmt.Errorf("no FROM-TO:WORKERS")
	}
	var err error
	if c.From, err = time.ParseDuration(from); err != nil {
		return c, err
	}
	if c.To, err = time.ParseDuration(to); err != nil {
		return c, err
	}
	if c.Workers, err = strconv.Atoi(w); err != nil || c.Workers < 0 {
		return c, fmt.Errorf("workers %q, want 0 or more", w)
	}
	if c.From < 0 || c.To <= c.From {
		return c, fmt.Errorf("span %v to %v is empty", c.From, c.To)
	}
	return c, nil
}

func (m *ConfigModel) check() error {
	if m.Config == nil {
		return usageErr("sim config: no config")
	}
	if m.Route != "" && routeNamed(m.Config, m.Route) == nil {
		return usageErr("sim config: --route %q: no such route", m.Route)
	}
	if len(m.Config.Routes) == 0 {
		return usageErr("sim config: the config has no routes")
	}
	if err := m.Backend.check(); err != nil {
		return err
	}
	total := 0.0
	for _, s := range m.Steps {
		total += s.Rate * s.Duration.Seconds()
	}
	switch {
	case len(m.Steps) == 0:
		return usageErr("sim config: no load steps")
	case total > configMaxArrivals:
		return usageErr("sim config: the load sends about %.0f requests, want at most %d", total, configMaxArrivals)
	case m.Timeout <= 0:
		return usageErr("sim config: timeout %v, want more than 0", m.Timeout)
	case m.Clients < 1 || m.Clients > 1<<24:
		return usageErr("sim config: clients %d, want 1 to %d", m.Clients, 1<<24)
	case m.Client.Retries < 0 || m.Client.Retries > 10:
		return usageErr("sim config: client retries %d, want 0 to 10", m.Client.Retries)
	}
	return nil
}

func usageErr(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// routeNamed returns cfg's route called name, or nil.
func routeNamed(cfg *config.Config, name string) *config.Route {
	for i := range cfg.Routes {
		if cfg.Routes[i].Name == name {
			return &cfg.Routes[i]
		}
	}
	return nil
}
