package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/balancer"
)

// Default TTL clamps of a DNS source.
const (
	DefaultMinTTL = 5 * time.Second // re-resolve at most this often
	DefaultMaxTTL = 5 * time.Minute // re-resolve at least this often
)

// IPRecord is one A or AAAA record.
type IPRecord struct {
	IP  netip.Addr
	TTL time.Duration // as the server gave it; 0 is allowed
}

// SRVRecord is one SRV record (RFC 2782).
type SRVRecord struct {
	Target   string // host name, with or without the final dot; "." means "no service here"
	Port     uint16
	Priority uint16 // lower is preferred
	Weight   uint16 // share within a priority group; 0 is the smallest share
	TTL      time.Duration
}

// Resolver answers DNS questions with TTLs. Client is the default; tests and
// callers with their own resolver implement it. A Resolver must be safe for
// use by one goroutine at a time (a DNS source never calls it concurrently),
// must honour ctx, and may report a name without records either as an empty
// answer or as an error (wrapping ErrNoRecords, by convention).
type Resolver interface {
	// LookupIP returns the A records (network "ip4"), AAAA records ("ip6")
	// or both ("ip") of host.
	LookupIP(ctx context.Context, network, host string) ([]IPRecord, error)
	// LookupSRV returns the SRV records of name, e.g. "_http._tcp.example.com".
	LookupSRV(ctx context.Context, name string) ([]SRVRecord, error)
}

// DNS is a Source that resolves a name and re-resolves it when the answer
// expires. Configure it with a struct literal; the zero values of the
// optional fields are the defaults. A DNS value must not be changed while
// Run is running; one value may run several times, one Run at a time or
// concurrently (Run keeps its state on its own stack).
//
// Without SRV, every address of Name becomes an endpoint "ip:Port" of weight
// 1 (Meta nil). With SRV, Name is "_service._proto.name"; every record of the
// lowest priority value present becomes an endpoint "target:port" (the target
// host name without its final dot, resolved later by whoever dials it) with
// the record's weight, 0 counting as 1 (RFC 2782 gives weight 0 "a very small
// chance"; Endpoint weights cannot go lower than 1). Records of higher
// priority values, the backups, are ignored: failing over to them is left to
// health checking and panic mode in the endpoint set, which see real health
// rather than DNS's static preference. A target listed twice (same host and
// port) gets the sum of its weights; a target "." is skipped.
//
// The next resolution is scheduled when the answer expires: its smallest TTL
// (CNAMEs included, with Client), clamped to [MinTTL, MaxTTL]. A failed
// resolution — an error, NXDOMAIN, or no usable record — is reported to
// OnError and the last good list stays; the retry comes MinTTL later,
// doubling with each consecutive failure but never later than the last
// good answer's clamped TTL (before any good answer: every MinTTL). Keeping
// the list even when DNS says the name has gone is deliberate: DNS cannot tell
// a service deliberately emptied from a broken zone, and sending a balancer
// nothing turns a DNS incident into an outage.
type DNS struct {
	// Name is the name to resolve, taken as fully qualified: no search
	// domains, no /etc/hosts. Required.
	Name string
	// Port is the port of every endpoint for A/AAAA, in [1, 65535]. It must
	// be 0 with SRV, whose records carry ports.
	Port int
	// SRV selects SRV records instead of A/AAAA.
	SRV bool
	// Network picks the address families without SRV: "ip" or "" for A and
	// AAAA, "ip4" for A only, "ip6" for AAAA only. Must be "" with SRV.
	Network string
	// MinTTL and MaxTTL clamp the TTL of answers; zero means DefaultMinTTL
	// (5s) and DefaultMaxTTL (5m). MinTTL must be positive and not above
	// MaxTTL.
	MinTTL, MaxTTL time.Duration
	// Resolver answers the queries; nil means a zero Client (nameservers
	// from /etc/resolv.conf).
	Resolver Resolver
	// OnError, when not nil, receives every failed resolution (the list is
	// kept). It is called on the goroutine running Run.
	OnError func(error)

	sleep sleepFunc // nil: a real timer
}

// dnsConfig is a validated DNS with defaults applied.
type dnsConfig struct {
	name, network  string
	port           int
	srv            bool
	minTTL, maxTTL time.Duration
	resolver       Resolver
}

func (d *DNS) config() (dnsConfig, error) {
	c := dnsConfig{name: d.Name, network: d.Network, port: d.Port, srv: d.SRV,
		minTTL: d.MinTTL, maxTTL: d.MaxTTL, resolver: d.Resolver}
	if c.minTTL == 0 {
		c.minTTL = DefaultMinTTL
	}
	if c.maxTTL == 0 {
		c.maxTTL = DefaultMaxTTL
	}
	if c.resolver == nil {
		c.resolver = &Client{}
	}
	if _, err := fqdn(c.name); err != nil {
		return c, badConfig("DNS.Name", "%v", err)
	}
	switch {
	case c.srv && c.port != 0:
		return c, badConfig("DNS.Port", "must be 0 with SRV (the records carry the ports), got %d", c.port)
	case !c.srv && (c.port < 1 || c.port > 65535):
		return c, badConfig("DNS.Port", "must be in [1, 65535], got %d", c.port)
	case c.srv && c.network != "":
		return c, badConfig("DNS.Network", "must be empty with SRV, got %q", c.network)
	case c.minTTL < 0:
		return c, badConfig("DNS.MinTTL", "must be positive, got %v", c.minTTL)
	case c.maxTTL < c.minTTL:
		return c, badConfig("DNS.MaxTTL", "must not be below MinTTL (%v), got %v", c.minTTL, c.maxTTL)
	}
	switch c.network {
	case "":
		c.network = "ip"
	case "ip", "ip4", "ip6":
	default:
		return c, badConfig("DNS.Network", `must be "", "ip", "ip4" or "ip6", got %q`, c.network)
	}
	return c, nil
}

// Run resolves Name now and again whenever the answer expires, sending the
// list whenever it changes, until ctx ends; it returns ctx.Err(), or a
// *ConfigError before doing anything. See DNS for what happens on failures.
func (d *DNS) Run(ctx context.Context, update func([]balancer.Endpoint)) error {
	if update == nil {
		return badConfig("update", "must not be nil")
	}
	c, err := d.config()
	if err != nil {
		return err
	}
	sleep := d.sleep
	if sleep == nil {
		sleep = realSleep
	}
	em := emitter{update: update}
	var good time.Duration // clamped TTL of the last good answer; 0 before one
	failures := 0
	for {
		list, ttl, err := c.resolve(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var wait time.Duration
		if err != nil {
			failures++
			if d.OnError != nil {
				d.OnError(err)
			}
			wait = retryDelay(c.minTTL, good, failures)
		} else {
			failures = 0
			wait = min(max(ttl, c.minTTL), c.maxTTL)
			good = wait
			em.send(list)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// retryDelay is the wait after the n-th consecutive failure (n ≥ 1):
// minTTL·2^(n−1), at most good (the last good answer's clamped TTL) or, before
// any good answer, exactly minTTL.
func retryDelay(minTTL, good time.Duration, n int) time.Duration {
	if good < minTTL {
		return minTTL
	}
	d := minTTL
	for i := 1; i < n; i++ {
		if d >= good/2 { // the next doubling reaches good (and cannot overflow)
			return good
		}
		d *= 2
	}
	return min(d, good)
}

// resolve asks the resolver once and turns the answer into a list and the
// smallest TTL.
func (c *dnsConfig) resolve(ctx context.Context) ([]balancer.Endpoint, time.Duration, error) {
	if c.srv {
		recs, err := c.resolver.LookupSRV(ctx, c.name)
		if err != nil {
			return nil, 0, fmt.Errorf("discovery: SRV %s: %w", c.name, err)
		}
		list, ttl := srvEndpoints(recs)
		if len(list) == 0 {
			return nil, 0, fmt.Errorf("discovery: SRV %s: %w (%d records, none usable)", c.name, ErrNoRecords, len(recs))
		}
		return list, ttl, nil
	}
	recs, err := c.resolver.LookupIP(ctx, c.network, c.name)
	if err != nil {
		return nil, 0, fmt.Errorf("discovery: %s %s: %w", c.network, c.name, err)
	}
	list, ttl := ipEndpoints(recs, c.port)
	if len(list) == 0 {
		return nil, 0, fmt.Errorf("discovery: %s %s: %w", c.network, c.name, ErrNoRecords)
	}
	return list, ttl, nil
}

// ipEndpoints turns address records into "ip:port" endpoints, once per
// address, and returns the smallest TTL.
func ipEndpoints(recs []IPRecord, port int) ([]balancer.Endpoint, time.Duration) {
	list := make([]balancer.Endpoint, 0, len(recs))
	seen := make(map[netip.Addr]bool, len(recs))
	var ttl time.Duration
	p := strconv.Itoa(port)
	for i, r := range recs {
		if i == 0 || r.TTL < ttl {
			ttl = r.TTL
		}
		if !r.IP.IsValid() {
			continue
		}
		ip := r.IP.Unmap()
		if seen[ip] {
			continue
		}
		seen[ip] = true
		list = append(list, balancer.Endpoint{Addr: net.JoinHostPort(ip.String(), p), Weight: 1})
	}
	return list, ttl
}

// srvEndpoints keeps the usable records of the lowest priority value and
// returns them as endpoints with the smallest TTL of all records.
func srvEndpoints(recs []SRVRecord) ([]balancer.Endpoint, time.Duration) {
	var ttl time.Duration
	best, found := uint16(0), false
	for i, r := range recs {
		if i == 0 || r.TTL < ttl {
			ttl = r.TTL
		}
		if srvHost(r.Target) == "" {
			continue
		}
		if !found || r.Priority < best {
			best, found = r.Priority, true
		}
	}
	var list []balancer.Endpoint
	index := make(map[string]int)
	for _, r := range recs {
		host := srvHost(r.Target)
		if host == "" || r.Priority != best {
			continue
		}
		w := max(int(r.Weight), 1)
		addr := net.JoinHostPort(host, strconv.Itoa(int(r.Port)))
		if i, dup := index[addr]; dup {
			list[i].Weight += w
			continue
		}
		index[addr] = len(list)
		list = append(list, balancer.Endpoint{Addr: addr, Weight: w})
	}
	return list, ttl
}

// srvHost is an SRV target without its final dot, lower-cased (DNS names
// compare without case, and endpoints are identified by Addr); "" for the
// "no service" target ".".
func srvHost(target string) string {
	return strings.ToLower(strings.TrimSuffix(target, "."))
}

// errNoName: DNS.Name is empty.
var errNoName = errors.New("must not be empty")

// fqdn returns name with a final dot, checking its syntax loosely: not
// empty, at most 253 characters, labels of 1 to 63 characters.
func fqdn(name string) (string, error) {
	n := strings.TrimSuffix(name, ".")
	if n == "" {
		return "", errNoName
	}
	if len(n) > 253 {
		return "", fmt.Errorf("%d characters, more than 253", len(n))
	}
	for label := range strings.SplitSeq(n, ".") {
		if len(label) == 0 || len(label) > 63 {
			return "", fmt.Errorf("%q: labels must have 1 to 63 characters", name)
		}
	}
	return n + ".", nil
}
