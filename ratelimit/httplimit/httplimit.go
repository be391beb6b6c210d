package httplimit

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/request"
)

// ErrConfig is wrapped by the errors of New and Update for a configuration
// or rule set they refuse.
var ErrConfig = errors.New("httplimit: invalid configuration")

// ErrClosed is returned by Update after Close.
var ErrClosed = errors.New("httplimit: limiter closed")

// DefaultRetireAfter is Config.RetireAfter when zero: seconds a replaced
// store stays open before the Limiter closes it.
const DefaultRetireAfter = 10

// Rand is the random source of Retry-After jitter. It must be safe for
// concurrent use.
type Rand interface {
	Float64() float64 // uniform in [0, 1)
}

// DefaultUnavailableRetryAfter is the Retry-After, in seconds, of a 503
// from a fail-closed rule whose store gave no hint of its own.
const DefaultUnavailableRetryAfter = 5

// MaxKeyPartBytes is the longest key part value used as is; a longer one
// (a huge header) is replaced by "#" and the hex of the first 16 bytes of
// its SHA-256, so keys stay small and distinct values stay distinct.
const MaxKeyPartBytes = 256

// Config configures a Limiter. The zero value works: in-memory stores, the
// real clock, no jitter, "about:blank" problem types, slog.Default for
// shadow logs, one log line per second per rule.
type Config struct {
	// Store returns the keyed store enforcing a rule (an in-memory store,
	// a Redis store, a Guarded wrapper...). It is called once per rule by
	// New, and by Update for new or changed rules. nil means
	// ratelimit.NewMemory(rule.Spec, ratelimit.MemoryConfig{}): at most
	// ratelimit.DefaultMaxKeys keys per rule. A store that implements
	// io.Closer (the Redis stores of redisstore.Stores) is owned by the
	// Limiter from then on: closed RetireAfter seconds after an Update
	// stops using it, or by Close.
	Store func(rules.Rule) (ratelimit.Keyed, error)
	// RetireAfter is how long, in seconds, a store that Update replaced or
	// removed stays open before it is closed (when it implements
	// io.Closer), so that requests which began under the old rules finish
	// their decisions with it. 0 means DefaultRetireAfter; otherwise it
	// must be positive and finite. One timer per such Update, none when
	// nothing is retired.
	RetireAfter float64
	// HotKeys, if not nil, tracks each rule's heaviest keys with a
	// ratelimit.HeavyHitters of this configuration (one per rule, kept
	// while the rule's id stays in the set): every decision observes the
	// rule's key with the request's cost, allowed or not. The top keys are
	// exported as a gauge (see the package doc), returned by HotKeys and
	// served as JSON by HotKeysHandler. Memory per rule: Shards × Depth ×
	// Width × 4 bytes of counters (64 KiB with Width 1024, Depth 4 and 4
	// shards) and at most Shards × TopK keys.
	HotKeys *ratelimit.HotKeysConfig
	// Clock gives the decisions' now; nil means clock.NewReal().
	Clock clock.Clock
	// Cost, if not nil, returns the units a request takes under a rule (a
	// search 5, an export 50); a result ≤ 0 means the rule's own cost.
	// It runs for every matching rule of every request: keep it cheap.
	// Check has no *http.Request: its requests take the rule's own cost.
	Cost func(r *http.Request, rule *rules.Rule) int
	// Identity, if not nil, resolves named key parts ("user", "tenant")
	// from the request, typically from what authentication put in its
	// context. ok false falls back to the part's header.
	Identity func(r *http.Request, name string) (value string, ok bool)
	// IdentityView is Identity for the requests decided by Check (an
	// engine's request.View). nil, or ok false, falls back to the part's
	// header.
	IdentityView func(v *request.View, name string) (value string, ok bool)
	// Jitter is the most seconds added, uniformly at random, to each
	// Retry-After before it is rounded up, so that refused clients do not
	// all come back at the same instant; 0 means none.
	Jitter float64
	// Rand draws the jitter; nil means math/rand/v2's global source.
	Rand Rand
	// ProblemBase, if not empty, is the URI prefix of the problem types
	// (RFC 9457) in error bodies: ProblemBase + "rate-limited",
	// "store-unavailable", "queue-abandoned", "cost-exceeds-limit". Empty
	// means "about:blank", whose title is the status phrase.
	ProblemBase string
	// UnavailableRetryAfter is the Retry-After seconds of a 503 from a
	// fail-closed rule when the store's decision carries no RetryAfter;
	// 0 means DefaultUnavailableRetryAfter.
	UnavailableRetryAfter float64
	// Logger receives shadow-mode and store-error lines; nil means
	// slog.Default().
	Logger *slog.Logger
	// LogsPerSecond is the most lines logged per second per rule (shadow
	// denials and store errors together; a GCRA gate with a burst of the
	// same size, dropped lines counted in the next one); 0 means 1, and a
	// negative value turns logging off.
	LogsPerSecond float64
	// Registerer, if not nil, has the Limiter registered on it as a
	// prometheus.Collector by New.
	Registerer prometheus.Registerer
}

// Limiter enforces a rules.Set on HTTP requests; see the package
// documentation. It is safe for concurrent use; Update replaces its rules
// while requests are served.
type Limiter struct {
	cfg     Config      // immutable after New, defaults filled
	clock   clock.Clock // immutable
	rand    Rand        // immutable
	log     *slog.Logger
	metrics *metrics
	// decisions recycles the per-request list of matching rules.
	decisions decisionsPool

	state    atomic.Pointer[ruleSet]            // the published rules; replaced whole by Update
	updateMu sync.Mutex                         // serialises Updates and Close
	hot      map[string]*ratelimit.HeavyHitters // guarded by updateMu: trackers by rule id
	retiring map[*retireBatch]struct{}          // guarded by updateMu: replaced stores not yet closed
	closed   bool                               // guarded by updateMu
}

// retireBatch is the closable stores one Update stopped using, closed by
// its timer or by Close, whichever comes first.
type retireBatch struct {
	timer   *time.Timer
	closers []io.Closer
}

// ruleSet is an immutable compiled rules.Set.
type ruleSet struct {
	rules     []*rule
	trusted   []netip.Prefix
	forwarded bool // read Forwarded rather than X-Forwarded-For
	fwdHeader string
	v6bits    int
}

// rule is a compiled rules.Rule. Immutable.
type rule struct {
	rules.Rule
	store    ratelimit.Keyed
	joint    ratelimit.Joint         // store's, read once here (nil: not a JointKeyed)
	hot      *ratelimit.HeavyHitters // nil unless Config.HotKeys
	queue    bool                    // leaky queue: admitted requests wait Decision.Delay
	policy   string                  // RateLimit-Policy item
	quotedID string
	limited  problem // the 429 body
	// Verdict reasons: "ratelimit:<id>" (429, 400),
	// "ratelimit-unavailable:<id>" (503, fail closed) and
	// "ratelimit-abandoned:<id>" (503, gave up in the queue).
	reasonLimited, reasonUnavail, reasonAbandon string
	unavail                                     problem // the 503 body (fail closed)
	abandon                                     problem // the 503 body (gave up in the queue)
	tooBig                                      problem // the 400 body (cost beyond capacity)
	c                                           *ruleCounters
	gate                                        *ratelimit.LogGate
}

// New returns a Limiter enforcing rs (which it validates) with cfg, or an
// error wrapping ErrConfig naming the problem, or the error of cfg.Store.
func New(rs *rules.Set, cfg Config) (*Limiter, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.NewReal()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LogsPerSecond == 0 {
		cfg.LogsPerSecond = 1
	}
	if cfg.UnavailableRetryAfter == 0 {
		cfg.UnavailableRetryAfter = DefaultUnavailableRetryAfter
	}
	if cfg.RetireAfter == 0 {
		cfg.RetireAfter = DefaultRetireAfter
	}
	switch {
	case !(cfg.Jitter >= 0) || math.IsInf(cfg.Jitter, 1):
		return nil, fmt.Errorf("%w: Jitter must be a finite number of seconds ≥ 0, got %v", ErrConfig, cfg.Jitter)
	case !(cfg.UnavailableRetryAfter > 0) || cfg.UnavailableRetryAfter > maxRetryAfter:
		return nil, fmt.Errorf("%w: UnavailableRetryAfter must be from 0 to %d seconds, got %v", ErrConfig, maxRetryAfter, cfg.UnavailableRetryAfter)
	case math.IsNaN(cfg.LogsPerSecond) || math.IsInf(cfg.LogsPerSecond, 0):
		return nil, fmt.Errorf("%w: LogsPerSecond must be finite, got %v", ErrConfig, cfg.LogsPerSecond)
	case !(cfg.RetireAfter > 0) || math.IsInf(cfg.RetireAfter, 1):
		return nil, fmt.Errorf("%w: RetireAfter must be a positive finite number of seconds (0 means %d), got %v", ErrConfig, DefaultRetireAfter, cfg.RetireAfter)
	}
	if cfg.HotKeys != nil {
		if _, err := ratelimit.NewHeavyHitters(*cfg.HotKeys); err != nil {
			return nil, fmt.Errorf("%w: HotKeys: %w", ErrConfig, err)
		}
	}
	if cfg.ProblemBase != "" {
		if _, err := url.Parse(cfg.ProblemBase); err != nil {
			return nil, fmt.Errorf("%w: ProblemBase: %v", ErrConfig, err)
		}
	}
	l := &Limiter{cfg: cfg, clock: cfg.Clock, rand: cfg.Rand, log: cfg.Logger, metrics: newMetrics(),
		hot: map[string]*ratelimit.HeavyHitters{}, retiring: map[*retireBatch]struct{}{}}
	if l.rand == nil {
		l.rand = globalRand{}
	}
	if err := l.Update(rs); err != nil {
		return nil, err
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(l); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("httplimit: registering metrics: %w", err)
		}
	}
	return l, nil
}

type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// Update validates rs and replaces the Limiter's rules with it. A rule whose
// id, Spec and FailMode are unchanged keeps its store (and so its keys'
// state); others get a new store from Config.Store (a store may wrap the
// fail mode, as redisstore's do). The stores no rule uses any more are
// closed RetireAfter seconds later if they implement io.Closer. On error
// the old rules stay in force, and stores already made for the new rules
// are closed at once. After Close, Update returns ErrClosed.
func (l *Limiter) Update(rs *rules.Set) error {
	if rs == nil {
		return fmt.Errorf("%w: nil rules.Set", ErrConfig)
	}
	if err := rs.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	l.updateMu.Lock()
	defer l.updateMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	old := map[string]*rule{}
	if cur := l.state.Load(); cur != nil {
		for _, r := range cur.rules {
			old[r.ID] = r
		}
	}
	s := &ruleSet{
		trusted:   append([]netip.Prefix(nil), rs.TrustedProxies...),
		forwarded: rs.ForwardedHeaderName() == rules.HeaderForwarded,
		fwdHeader: rs.ForwardedHeaderName(),
		v6bits:    rs.IPv6Bits(),
	}
	keep := map[string]bool{}
	var made []ratelimit.Keyed // new stores, closed if the update fails
	for _, r := range rs.Rules {
		var store ratelimit.Keyed
		if o, ok := old[r.ID]; ok && o.Spec == r.Spec && o.FailMode == r.FailMode {
			store = o.store
		} else {
			var err error
			if store, err = l.newStore(r); err != nil {
				_ = closeAll(closersOf(made, nil))
				return fmt.Errorf("httplimit: store for rule %q: %w", r.ID, err)
			}
			made = append(made, store)
		}
		s.rules = append(s.rules, l.compile(r, store))
		keep[r.ID] = true
	}
	l.state.Store(s)
	l.metrics.forget(keep)
	for id := range l.hot {
		if !keep[id] {
			delete(l.hot, id)
		}
	}
	if len(old) > 0 {
		inUse := make([]ratelimit.Keyed, 0, len(s.rules))
		for _, r := range s.rules {
			inUse = append(inUse, r.store)
		}
		var was []ratelimit.Keyed
		for _, r := range old {
			was = append(was, r.store)
		}
		l.retireLocked(closersOf(was, inUse))
	}
	return nil
}

// retireLocked closes cs RetireAfter seconds from now, or at Close.
func (l *Limiter) retireLocked(cs []io.Closer) {
	if len(cs) == 0 {
		return
	}
	b := &retireBatch{closers: cs}
	l.retiring[b] = struct{}{}
	b.timer = time.AfterFunc(clock.Duration(l.cfg.RetireAfter), func() {
		l.updateMu.Lock()
		_, ok := l.retiring[b]
		delete(l.retiring, b)
		l.updateMu.Unlock()
		if ok { // else Close took it
			_ = closeAll(b.closers)
		}
	})
}

// Close closes every store the Limiter owns — those of the current rules
// and those retired by Update and not closed yet — that implements
// io.Closer, each once, and returns their errors joined. Call it after the
// server has stopped serving (http.Server.Shutdown): a request decided
// after Close meets closed stores and gets its rules' fail modes. Later
// Updates fail with ErrClosed; a second Close does nothing.
func (l *Limiter) Close() error {
	l.updateMu.Lock()
	if l.closed {
		l.updateMu.Unlock()
		return nil
	}
	l.closed = true
	var cs []io.Closer
	for b := range l.retiring {
		b.timer.Stop()
		cs = append(cs, b.closers...)
	}
	clear(l.retiring)
	if cur := l.state.Load(); cur != nil {
		stores := make([]ratelimit.Keyed, 0, len(cur.rules))
		for _, r := range cur.rules {
			stores = append(stores, r.store)
		}
		cs = append(cs, closersOf(stores, nil)...)
	}
	l.updateMu.Unlock()
	return closeAll(cs)
}

// closersOf returns the stores of ks that implement io.Closer and are not
// in keep, each once. Stores are told apart by identity when their
// dynamic type is a pointer (a store shared by several rules is closed
// once, and not while a rule in keep uses it); stores of other types are
// taken as distinct.
func closersOf(ks, keep []ratelimit.Keyed) []io.Closer {
	kept := map[ratelimit.Keyed]bool{}
	for _, k := range keep {
		if isPointer(k) {
			kept[k] = true
		}
	}
	var cs []io.Closer
	for _, k := range ks {
		c, ok := k.(io.Closer)
		if !ok {
			continue
		}
		if isPointer(k) {
			if kept[k] {
				continue
			}
			kept[k] = true
		}
		cs = append(cs, c)
	}
	return cs
}

func isPointer(k ratelimit.Keyed) bool {
	return k != nil && reflect.TypeOf(k).Kind() == reflect.Pointer
}

// closeAll closes cs and joins their errors.
func closeAll(cs []io.Closer) error {
	var errs []error
	for _, c := range cs {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (l *Limiter) newStore(r rules.Rule) (ratelimit.Keyed, error) {
	if l.cfg.Store != nil {
		k, err := l.cfg.Store(r)
		if err == nil && k == nil {
			err = errors.New("Config.Store returned nil")
		}
		return k, err
	}
	return ratelimit.NewMemory(r.Spec, ratelimit.MemoryConfig{})
}

// jointOf is store's Joint; nil when it is not a ratelimit.JointKeyed.
func jointOf(store ratelimit.Keyed) ratelimit.Joint {
	if jk, ok := store.(ratelimit.JointKeyed); ok {
		return jk.Joint()
	}
	return nil
}

func (l *Limiter) compile(r rules.Rule, store ratelimit.Keyed) *rule {
	r.Key = append([]rules.KeyPart(nil), r.Key...)
	r.Match.Methods = append([]string(nil), r.Match.Methods...)
	r.Match.Paths = append([]string(nil), r.Match.Paths...)
	base := l.cfg.ProblemBase
	ru := &rule{
		Rule:     r,
		store:    store,
		queue:    r.Spec.Algorithm == ratelimit.AlgLeakyQueue,
		policy:   policyField(&r),
		quotedID: strconv.Quote(r.ID),
		c:        l.metrics.counters(r.ID),
		gate:     ratelimit.NewLogGate(l.cfg.LogsPerSecond),
		hot:      l.hotKeysLocked(r.ID),
		joint:    jointOf(store),

		reasonLimited: "ratelimit:" + r.ID,
		reasonUnavail: "ratelimit-unavailable:" + r.ID,
		reasonAbandon: "ratelimit-abandoned:" + r.ID,
	}
	quoted := ru.quotedID
	ru.limited = newProblem(base, "rate-limited", http.StatusTooManyRequests, r.ID,
		"Rule "+quoted+" allows "+limitText(&r)+".", true)
	ru.unavail = newProblem(base, "store-unavailable", http.StatusServiceUnavailable, r.ID,
		"The rate limiter cannot check rule "+quoted+" right now.", true)
	ru.abandon = newProblem(base, "queue-abandoned", http.StatusServiceUnavailable, r.ID,
		"The request ended while it waited in the queue of rule "+quoted+".", false)
	ru.tooBig = newProblem(base, "cost-exceeds-limit", http.StatusBadRequest, r.ID,
		"The request costs more than rule "+quoted+" ever allows at once ("+limitText(&r)+").", false)
	return ru
}

// Describe implements prometheus.Collector.
func (l *Limiter) Describe(ch chan<- *prometheus.Desc) {
	l.metrics.vec.Describe(ch)
	if l.cfg.HotKeys != nil {
		ch <- hotKeyDesc
	}
}

// Collect implements prometheus.Collector.
func (l *Limiter) Collect(ch chan<- prometheus.Metric) {
	l.metrics.vec.Collect(ch)
	l.collectHotKeys(ch)
}

var _ prometheus.Collector = (*Limiter)(nil)
