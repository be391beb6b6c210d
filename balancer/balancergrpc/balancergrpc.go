// Package balancergrpc is a grpc-go load-balancing policy over this
// module's pickers: least request by the power of two choices over the
// RPCs in flight on each ready connection.
//
// Importing the package registers the policy under Name,
// "spillway_least_request", as grpc's own policies register themselves
// (import it for its side effect: import _ ".../balancer/balancergrpc").
// Select it with the service config:
//
//	grpc.NewClient(target,
//		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"spillway_least_request":{}}]}`))
//
// or with `{"spillway_least_request":{"choiceCount":3}}` for three choices
// (LBConfig).
//
// The policy is built on google.golang.org/grpc/balancer/base (not
// deprecated in grpc v1.85): one SubConn per resolved address, connected
// eagerly and kept connected; the picker sees the SubConns that are READY
// (with client-side health checking when the service config asks for it:
// "healthCheckConfig", and google.golang.org/grpc/health imported). It reads
// the resolver state's Addresses, which every grpc resolver fills; a
// resolver that sends only Endpoints is not supported.
//
// Each pick draws two distinct ready connections and takes the one with
// fewer RPCs in flight (balancer.P2C), counts the RPC on it, and hands grpc
// a Done callback, built once per connection, that uncounts it when the RPC
// ends, whatever its status. A pick does not allocate and takes no lock.
// Counts survive picker rebuilds for connections that stay READY; a
// connection that leaves READY starts again from zero when it comes back.
package balancergrpc

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	gbal "google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/serviceconfig"

	"github.com/spillwayhq/spillway/balancer"
)

// Name is the name the policy is registered under, for the service
// config's loadBalancingConfig.
const Name = "spillway_least_request"

func init() {
	gbal.Register(builder{})
}

// LBConfig is the policy's configuration in the service config:
// {"choiceCount": d}. Unknown fields are ignored.
type LBConfig struct {
	serviceconfig.LoadBalancingConfig `json:"-"`

	// ChoiceCount is the number of ready connections drawn per pick, d, 1
	// to balancer.MaxChoices: d = 2 is balancer.P2C (two distinct
	// connections), d > 2 balancer.PowerOfD (with replacement), d = 1 a
	// uniform random pick. 0 or absent means 2.
	ChoiceCount int `json:"choiceCount,omitempty"`
}

// builder builds one policy instance per channel.
type builder struct{}

// Name returns Name.
func (builder) Name() string { return Name }

// Build returns a base balancer with a picker builder of the channel's own,
// so that in-flight counts are per channel.
func (builder) Build(cc gbal.ClientConn, opts gbal.BuildOptions) gbal.Balancer {
	pb := &pickerBuilder{choices: 2}
	b := base.NewBalancerBuilder(Name, pb, base.Config{HealthCheck: true}).Build(cc, opts)
	return &lb{Balancer: b, pb: pb}
}

// ParseConfig parses {"choiceCount": d}; it rejects a d outside [0,
// balancer.MaxChoices].
func (builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	cfg := &LBConfig{}
	if len(js) > 0 {
		if err := json.Unmarshal(js, cfg); err != nil {
			return nil, errors.New("balancergrpc: " + Name + " config: " + err.Error())
		}
	}
	if cfg.ChoiceCount < 0 || cfg.ChoiceCount > balancer.MaxChoices {
		return nil, &balancer.ConfigError{Field: "balancergrpc.LBConfig.ChoiceCount",
			Reason: "must be between 1 and " + strconv.Itoa(balancer.MaxChoices) + " (0 means 2), got " + strconv.Itoa(cfg.ChoiceCount)}
	}
	if cfg.ChoiceCount == 0 {
		cfg.ChoiceCount = 2
	}
	return cfg, nil
}

// lb is the base balancer, told the channel's configuration first.
type lb struct {
	gbal.Balancer
	pb *pickerBuilder
}

// UpdateClientConnState records the choice count, then lets the base
// balancer update its SubConns and rebuild the picker.
func (l *lb) UpdateClientConnState(s gbal.ClientConnState) error {
	if c, ok := s.BalancerConfig.(*LBConfig); ok {
		l.pb.setChoices(c.ChoiceCount)
	}
	return l.Balancer.UpdateClientConnState(s)
}

// pickerBuilder builds pickers over the ready SubConns of one channel and
// keeps each SubConn's in-flight counter across builds while it stays
// ready. Builds are rare (a SubConn entering or leaving READY, an address
// update) and serialised by grpc; the mutex makes that explicit.
type pickerBuilder struct {
	mu      sync.Mutex
	choices int                       // guarded by mu
	subs    map[gbal.SubConn]*counter // guarded by mu: the ready SubConns' counters
}

func (b *pickerBuilder) setChoices(d int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.choices = d
}

// Build returns a picker over info's ready SubConns, in address order, or
// one that answers ErrNoSubConnAvailable (the RPC waits for the next
// picker) when none is ready.
func (b *pickerBuilder) Build(info base.PickerBuildInfo) gbal.Picker {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(info.ReadySCs) == 0 {
		b.subs = nil
		return base.NewErrPicker(gbal.ErrNoSubConnAvailable)
	}
	next := make(map[gbal.SubConn]*counter, len(info.ReadySCs))
	list := make([]*counter, 0, len(info.ReadySCs))
	for sc, si := range info.ReadySCs {
		c := b.subs[sc]
		if c == nil {
			c = newCounter(sc, si.Address.Addr)
		}
		next[sc] = c
		list = append(list, c)
	}
	b.subs = next
	slices.SortFunc(list, func(x, y *counter) int { return cmp.Compare(x.addr, y.addr) })
	return newPicker(list, b.choices)
}

// counter is one ready SubConn's RPCs in flight, on a cache line of its
// own, with the Done callback that uncounts one.
type counter struct {
	n    atomic.Int64
	_    [56]byte
	sc   gbal.SubConn
	addr string
	done func(gbal.DoneInfo)
}

func newCounter(sc gbal.SubConn, addr string) *counter {
	c := &counter{sc: sc, addr: addr}
	c.done = func(gbal.DoneInfo) { c.n.Add(-1) }
	return c
}

// loads is the balancer.Loads view of a picker's counters.
type loads []*counter

func (l loads) Len() int       { return len(l) }
func (l loads) Load(i int) int { return int(l[i].n.Load()) }

// picker picks among a fixed list of ready SubConns. Immutable; safe for
// concurrent use.
type picker struct {
	subs []*counter
	view balancer.Loads // loads(subs), converted once
	p    balancer.Picker
}

func newPicker(subs []*counter, d int) *picker {
	var p balancer.Picker
	switch {
	case d == 2 || d == 0:
		p = &balancer.P2C{}
	default:
		p = &balancer.PowerOfD{D: d}
	}
	return &picker{subs: subs, view: loads(subs), p: p}
}

// Pick chooses a SubConn, counts the RPC on it and returns the callback
// that uncounts it. It does not allocate.
func (p *picker) Pick(gbal.PickInfo) (gbal.PickResult, error) {
	i, err := p.p.Pick(p.view)
	if err != nil {
		return gbal.PickResult{}, gbal.ErrNoSubConnAvailable
	}
	c := p.subs[i]
	c.n.Add(1)
	return gbal.PickResult{SubConn: c.sc, Done: c.done}, nil
}
