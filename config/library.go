package config

import (
	"crypto/tls"
	"net/netip"
	"net/textproto"
	"slices"
	"strings"

	"google.golang.org/grpc/credentials"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/discovery"
	"github.com/spillwayhq/spillway/health"
	"github.com/spillwayhq/spillway/httpserver"
)

// The methods below turn a loaded configuration into the library's own
// config structs, so that the gateway never interprets a field itself.
// They are meant for a Config returned by Load or Parse.

// Cluster returns the cluster named name, or nil.
func (c *Config) Cluster(name string) *Cluster {
	for i := range c.Clusters {
		if c.Clusters[i].Name == name {
			return &c.Clusters[i]
		}
	}
	return nil
}

// ListenerRoutes returns the routes listener l serves, in file order: those
// its routes list names, or every route when it has none.
func (c *Config) ListenerRoutes(l *Listener) []*Route {
	out := make([]*Route, 0, len(c.Routes))
	for i := range c.Routes {
		r := &c.Routes[i]
		if l.Routes == nil || containsString(l.Routes, r.Name) {
			out = append(out, r)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// HTTPServer returns the listener's address and limits as an
// httpserver.Config (Handler left nil): body_inactivity bounds both body
// reads and response writes.
func (l *Listener) HTTPServer() httpserver.Config {
	return httpserver.Config{
		Addr:              l.Address,
		ReadHeaderTimeout: l.Limits.HeaderTimeout.D(),
		IdleTimeout:       l.Limits.IdleTimeout.D(),
		BodyTimeout:       l.Limits.BodyInactivity.D(),
		SendTimeout:       l.Limits.BodyInactivity.D(),
		MaxHeaderBytes:    l.Limits.MaxHeaderBytes.Int(),
	}
}

// ServerTLS returns the listener's TLS configuration (certificates, minimum
// version, ALPN protocols), or nil for plaintext. Each call returns a copy
// the caller may change.
func (l *Listener) ServerTLS() *tls.Config {
	if l.tls == nil {
		return nil
	}
	return l.tls.Clone()
}

// CertificateFiles returns, per certificate of the listener's TLS (in
// order), the files its chain and key were read from ("" for a value given
// inline): the gateway reloads them when they change.
func (l *Listener) CertificateFiles() []CertFiles { return slices.Clone(l.certFiles) }

// ProxyPrefixes returns proxy_protocol.from as prefixes; nil without.
func (l *Listener) ProxyPrefixes() []netip.Prefix {
	if l.ProxyProtocol == nil {
		return nil
	}
	return prefixes(l.ProxyProtocol.From)
}

// TrustedPrefixes returns trusted_proxies as prefixes (an address as a
// prefix of its full length).
func (l *Listener) TrustedPrefixes() []netip.Prefix { return prefixes(l.TrustedProxies) }

func prefixes(list []string) []netip.Prefix {
	out := make([]netip.Prefix, len(list))
	for i, s := range list {
		out[i] = prefixOf(s)
	}
	return out
}

// HostList returns the hosts a match accepts (host or hosts), nil for any.
func (m *Match) HostList() []string {
	if m.Host != "" {
		return []string{m.Host}
	}
	return m.Hosts
}

// StaticEndpoints returns the cluster's endpoints as balancer endpoints (a
// zone as Meta["zone"]), in address order; nil with discovery.
func (c *Cluster) StaticEndpoints() []balancer.Endpoint {
	if c.Endpoints == nil {
		return nil
	}
	out := make([]balancer.Endpoint, len(c.Endpoints))
	for i, e := range c.Endpoints {
		out[i] = balancer.Endpoint{Addr: e.Address, Weight: e.Weight}
		if e.Zone != "" {
			out[i].Meta = map[string]string{"zone": e.Zone}
		}
	}
	// In address order, as every discovery source emits them: the list
	// applied at start and the source's first one then agree, so an
	// order-sensitive picker (round robin) does not change its rotation
	// when the source's list arrives.
	slices.SortStableFunc(out, func(a, b balancer.Endpoint) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}

// Source returns the cluster's endpoint source: discovery.Static of its
// endpoints, a *discovery.DNS or a *discovery.File (OnError left nil).
// Nothing runs until the caller runs it.
func (c *Cluster) Source() discovery.Source {
	d := c.Discovery
	switch {
	case d == nil:
		return discovery.Static(c.StaticEndpoints()...)
	case d.File != "":
		return &discovery.File{Path: d.File, Poll: d.Poll.D()}
	}
	network := d.Network
	if d.SRV {
		network = ""
	}
	return &discovery.DNS{Name: d.DNS, Port: d.Port, SRV: d.SRV, Network: network, MinTTL: d.MinTTL.D(), MaxTTL: d.MaxTTL.D()}
}

// SetConfig returns the cluster's balancer.SetConfig: slow start, panic
// threshold, latency decay; endpoints join unhealthy when active checks
// decide (unless initially_healthy); the ring or Maglev table builder is
// listed so that tables are built when a snapshot is published.
func (c *Cluster) SetConfig() balancer.SetConfig {
	cfg := balancer.SetConfig{
		SlowStart:      c.SlowStart.Seconds(),
		SlowStartMin:   c.SlowStartMin,
		PanicThreshold: c.PanicThreshold,
		LatencyDecay:   c.LatencyDecay.Seconds(),
		NewUnhealthy:   c.Health.Active != nil && !c.Health.Active.InitiallyHealthy,
	}
	if cfg.PanicThreshold == 0 {
		cfg.PanicThreshold = -1 // 0 in the file: never panic (the library reads 0 as its default)
	}
	if c.table != nil {
		cfg.Tables = []balancer.TableBuilder{c.table}
	}
	return cfg
}

// NewPicker returns a new picker of the cluster's kind (stateful pickers,
// such as smooth_weighted, must not be shared between sets). For ring_hash
// and maglev it is the picker for requests without a key: weighted random.
func (c *Cluster) NewPicker() balancer.SetPicker {
	switch c.Picker {
	case "round_robin":
		return balancer.Loaded{Picker: &balancer.RoundRobin{}}
	case "random":
		return balancer.Loaded{Picker: &balancer.Random{}}
	case "least_outstanding":
		return balancer.Loaded{Picker: &balancer.LeastOutstanding{}}
	case "smooth_weighted":
		return &balancer.SmoothWeighted{}
	case "peak_ewma":
		return &balancer.PeakEWMA{}
	case "least_request":
		p := &balancer.LeastRequest{}
		if o := c.LeastRequest; o != nil {
			p.Choices, p.Bias = o.Choices, o.Bias
		}
		return p
	}
	return &balancer.WeightedRandom{}
}

// TableBuilder returns the ring hash or Maglev builder of the cluster (the
// same pointer SetConfig lists, so Snapshot.Table finds its table), or nil
// for the other pickers.
func (c *Cluster) TableBuilder() balancer.TableBuilder { return c.table }

// HashPolicy returns the request key of ring_hash and maglev; ok is false
// without a hash_key.
func (c *Cluster) HashPolicy() (p balancer.HashPolicy, ok bool) {
	k := c.HashKey
	if k == nil {
		return p, false
	}
	p = balancer.HashPolicy{Cookie: k.Cookie, ClientIP: k.ClientIP, Path: k.Path}
	if k.Header != "" {
		p.Header = textproto.CanonicalMIMEHeaderKey(k.Header)
	}
	return p, true
}

// ClientTLS returns the TLS configuration for connections to the
// cluster's endpoints (roots, server name, ALPN for the protocol), or nil
// for plaintext. Each call returns a copy the caller may change.
func (c *Cluster) ClientTLS() *tls.Config {
	if c.tls == nil {
		return nil
	}
	return c.tls.Clone()
}

// ActiveConfig returns the active check's timing; ok is false without one.
func (c *Cluster) ActiveConfig() (cfg health.ActiveConfig, ok bool) {
	a := c.Health.Active
	if a == nil {
		return cfg, false
	}
	return health.ActiveConfig{
		Interval: a.Interval.Seconds(), Jitter: noneIfZero(a.Jitter), Timeout: a.Timeout.Seconds(),
		Fall: a.Fall, Rise: a.Rise, InitiallyHealthy: a.InitiallyHealthy,
	}, true
}

// HealthCheck returns the active check (an *health.HTTPCheck,
// health.TCPCheck or health.GRPCCheck) speaking the cluster's TLS, or nil
// without one.
func (c *Cluster) HealthCheck() health.Check {
	a := c.Health.Active
	if a == nil {
		return nil
	}
	switch a.Type {
	case "tcp":
		return health.TCPCheck{}
	case "grpc":
		g := health.GRPCCheck{Service: a.Service}
		if t := c.ClientTLS(); t != nil {
			t.NextProtos = []string{"h2"}
			g.Creds = credentials.NewTLS(t)
		}
		return g
	}
	h := &health.HTTPCheck{Method: a.Method, Path: a.Path, Host: a.Host, TLS: c.ClientTLS()}
	for _, s := range a.Expected {
		lo, hi, _ := parseStatus(s)
		h.Expected = append(h.Expected, health.StatusRange{Min: lo, Max: hi})
	}
	return h
}

// OutlierConfig returns the outlier detection setting; ok is false
// without one.
func (c *Cluster) OutlierConfig() (cfg health.OutlierConfig, ok bool) {
	o := c.Health.Outlier
	if o == nil {
		return cfg, false
	}
	return health.OutlierConfig{
		Consecutive5xx:            disabledIfZero(o.Consecutive5xx),
		ConsecutiveGatewayFailure: disabledIfZero(o.ConsecutiveGatewayFailure),
		BaseEjectionTime:          o.BaseEjectionTime.Seconds(),
		MaxEjectionTime:           o.MaxEjectionTime.Seconds(),
		MaxEjectionPercent:        o.MaxEjectionPercent,
		Interval:                  o.Interval.Seconds(),
	}, true
}

// noneIfZero maps a jitter of 0 (none, in the file) to the library's
// "none", which is negative (its 0 means the default).
func noneIfZero(f float64) float64 {
	if f == 0 {
		return -1
	}
	return f
}

// disabledIfZero maps a threshold of 0 (never, in the file) to the
// library's "disabled", which is negative (its 0 means the default).
func disabledIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
