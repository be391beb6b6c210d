package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// The policy chain's sections (issue 13): the rate-limit store at the top
// level, admission and the breaker per cluster, and per route the class,
// deadlines, rate-limit rules and retries. Each maps onto the library's own
// structs through the methods of library_policy.go.

// RateLimit is where every route's rate-limit state lives.
type RateLimit struct {
	Store            string   `yaml:"store" doc:"memory: each gateway counts on its own (N gateways admit up to N times a limit); redis: every gateway on one Redis counts against one limit." default:"memory" enum:"memory,redis"`
	MaxKeys          int      `yaml:"max_keys" doc:"With memory: most keys held per rule (past it the least recently used key is forgotten and starts again with a full budget); 0: ratelimit.DefaultMaxKeys (1048576)." default:"0" min:"0"`
	Redis            *Redis   `yaml:"redis" doc:"The Redis server, Sentinel set or Cluster; required with store: redis, not allowed with memory."`
	FloorFactor      float64  `yaml:"floor_factor" doc:"With redis: while Redis cannot decide, a fail-open rule is decided by this gateway alone within its limit times this factor (1: the rule's own limit, per gateway; 1/N of it across N gateways is about the fleet's limit); 0 or negative: no floor, a fail-open rule then lets everything through." default:"1" max:"1000000"`
	LocalFactor      float64  `yaml:"local_factor" doc:"With redis: a local tier in front of every rule refuses a key's flood on this gateway, without a round trip, once it sent this gateway its limit times this factor; 0: no local tier." default:"0" min:"0" max:"1000000"`
	Leasing          *Leasing `yaml:"leasing" doc:"With redis: fail-open rules take units from Redis in leases and spend them locally (fewer round trips). The bound: a unit leased at t may be spent until t + ttl, so the requests a rule admits across all gateways in any span of W seconds are at most its limit over W + ttl (burst + rate × (W + ttl) for gcra and token-bucket; with rate 10/s, burst 10 and ttl 1s, 30 in one second instead of 20; a limit that does not refill within W + ttl is not exceeded at all); leased units not spent within ttl are lost, at most size + size/2 per gateway and key; absent: no leasing, every decision is made on Redis."`
	HotKeys          *HotKeys `yaml:"hot_keys" doc:"Track each rule's heaviest keys (a count-min sketch, bounded memory) for the admin JSON and a bounded metrics series; absent: off."`
	RetryAfterJitter Duration `yaml:"retry_after_jitter" doc:"Most time added at random to each rate-limit refusal's Retry-After, so refused clients do not all come back at once; 0: none." default:"0s"`
}

// Redis is the Redis deployment of store: redis.
type Redis struct {
	Addresses   []string     `yaml:"addresses" doc:"host:port of one server (standalone), of several Cluster nodes (Redis Cluster), or of the Sentinels with master_name." required:"true" min:"1" kind:"endpoint"`
	MasterName  string       `yaml:"master_name" doc:"Sentinel: the name of the master the Sentinels at addresses watch; absent: standalone or Cluster."`
	Username    string       `yaml:"username" doc:"ACL user name; absent: the default user."`
	Password    string       `yaml:"password" doc:"Password (with username: the ACL user's); usually ${ENV} or file:." secret:"true"`
	DB          int          `yaml:"db" doc:"Database number selected after connecting (standalone and Sentinel; a Cluster has only 0)." default:"0" min:"0" max:"1000"`
	Timeout     Duration     `yaml:"timeout" doc:"Longest a decision waits for Redis, queueing included; past it the rule's fail mode decides." default:"50ms" min:"1ms" max:"60s"`
	DialTimeout Duration     `yaml:"dial_timeout" doc:"Longest time to open a connection to Redis." default:"1s" min:"1ms"`
	PoolSize    int          `yaml:"pool_size" doc:"Connections per Redis node; 0: go-redis's default (10 per CPU)." default:"0" min:"0" max:"100000"`
	Prefix      string       `yaml:"prefix" doc:"First part of every key (prefix:{key}:rule-id); gateways sharing a limit share the prefix." default:"rl"`
	Breaker     StoreBreaker `yaml:"breaker" doc:"The breaker around Redis: after threshold failures in a row decisions go to the fail mode at once, and one trial per recovery asks Redis again."`
}

// StoreBreaker is the breaker around the Redis store.
type StoreBreaker struct {
	Threshold int      `yaml:"threshold" doc:"Failed or late decisions in a row that open the breaker." default:"3" min:"1" max:"100000"`
	Recovery  Duration `yaml:"recovery" doc:"Time open before a trial decision is sent to Redis again." default:"1s" min:"1ms"`
}

// Leasing is token leasing against Redis.
type Leasing struct {
	Size        int      `yaml:"size" doc:"Units taken from Redis per round trip (cut to each rule's capacity; a rule holding fewer than 2 units is not leased)." default:"10" min:"1" max:"4294967295"`
	TTL         Duration `yaml:"ttl" doc:"How long leased units may be spent: the overshoot term of the bound (a span of W seconds admits at most the limit over W + ttl; see leasing)." default:"1s" min:"1ms"`
	HotKeysOnly bool     `yaml:"hot_keys_only" doc:"Lease only the keys hot_keys reports hot (needs hot_keys, whose min_count then says what is hot); the others are decided on Redis exactly." default:"false"`
}

// HotKeys configures the heavy-hitter tracker of each rule.
type HotKeys struct {
	Top      int      `yaml:"top" doc:"Keys tracked per shard and shown." default:"10" min:"1" max:"1024"`
	Width    int      `yaml:"width" doc:"Counters per sketch row: the error bound is e/width of a shard's traffic." default:"1024" min:"16" max:"16777216"`
	Depth    int      `yaml:"depth" doc:"Sketch rows: the bound fails with probability e^-depth." default:"4" min:"1" max:"16"`
	Shards   int      `yaml:"shards" doc:"Sketch shards, a power of two up to 256; 0: about twice the CPUs, at most 64." default:"0" min:"0" max:"256"`
	Interval Duration `yaml:"interval" doc:"Length of a counting interval, at whose end every count is multiplied by decay; 0: counts never decay." default:"1m"`
	Decay    float64  `yaml:"decay" doc:"Factor applied to every count at the end of each interval, from 0 (count per interval) to below 1." default:"0.5" min:"0" max:"0.999999"`
	MinCount int      `yaml:"min_count" doc:"Estimated count within an interval from which a tracked key is hot (for leasing.hot_keys_only)." default:"1" min:"1"`
}

// Admission is a cluster's adaptive concurrency limit.
type Admission struct {
	AlgorithmName string    `yaml:"algorithm" doc:"How the limit is found (see the limit package): fixed (initial_limit, always), aimd, gradient, gradient2 or vegas." default:"gradient2" enum:"fixed,aimd,gradient,gradient2,vegas"`
	InitialLimit  int       `yaml:"initial_limit" doc:"Requests in flight allowed at the start; with fixed, the limit." default:"20" min:"1" max:"1000000"`
	MinLimit      int       `yaml:"min_limit" doc:"Lowest limit an adaptive algorithm goes down to; not with fixed." default:"1" min:"1" max:"1000000"`
	MaxLimit      int       `yaml:"max_limit" doc:"Highest limit an adaptive algorithm goes up to; not with fixed." default:"1000" min:"1" max:"1000000"`
	Tolerance     float64   `yaml:"tolerance" doc:"With aimd, gradient and gradient2: how far latency may rise above its no-load level before the limit shrinks, as a factor; 0: the algorithm's default (aimd 2, gradient 1, gradient2 1.5)." default:"0" min:"0" max:"1000"`
	Backoff       float64   `yaml:"backoff" doc:"Not with fixed: the factor the limit is multiplied by on a request dropped by overload (a timeout or a 503 upstream), in (0, 1)." default:"0.9" min:"0.000001" max:"0.999999"`
	Baseline      Duration  `yaml:"baseline" doc:"With aimd: the healthy latency, above tolerance times which a request counts as overload; 0: learned, the measured no-load latency." default:"0s"`
	Shares        Shares    `yaml:"shares" doc:"Share of the limit each criticality class may fill; under overload sheddable requests are refused first, then default ones, and the last places are critical's."`
	Queue         Queue     `yaml:"queue" doc:"What a request that finds its class's share full does: refused at once, or waits in a queue sized in time."`
	Fairness      *Fairness `yaml:"fairness" doc:"Per-client fairness by client IP: near the limit no client holds more than its fair share of it; absent: off."`
	Shadow        bool      `yaml:"shadow" doc:"Count and log the requests the limit would refuse, and refuse none: see what adaptive shedding would do before turning it on." default:"false"`
	Brownout      *Brownout `yaml:"brownout" doc:"The dimmer: the share of requests allowed optional work, lowered while queue wait or latency is above its target, forwarded to the backend in a header; absent: off."`
}

// Shares are the class shares of the limit, most important class first.
type Shares struct {
	Critical  float64 `yaml:"critical" doc:"Share of the limit critical requests may fill, in (0, 1]." default:"1" min:"0.000001" max:"1"`
	Default   float64 `yaml:"default" doc:"Share default requests may fill, in (0, 1], at most critical's." default:"0.9" min:"0.000001" max:"1"`
	Sheddable float64 `yaml:"sheddable" doc:"Share sheddable requests may fill, in (0, 1], at most default's." default:"0.5" min:"0.000001" max:"1"`
}

// Queue is the wait queue in front of the limit.
type Queue struct {
	Discipline   string   `yaml:"discipline" doc:"reject: refuse at once (503, no queue); fifo: oldest waiter first; adaptive-lifo: FIFO while the queue drains, newest first while it stands; codel: FIFO, dropping waiters while the queue wait stays above target for an interval." default:"reject" enum:"reject,fifo,adaptive-lifo,codel"`
	MaxWait      Duration `yaml:"max_wait" doc:"Not with reject: longest a request waits for a place (then 503); the wait spends the request's deadline too." default:"50ms"`
	MaxLength    int      `yaml:"max_length" doc:"Not with reject: most requests waiting per class (memory bound; the queue is also sized by max_wait and the service rate)." default:"1024" min:"1" max:"1048576"`
	StandingWait Duration `yaml:"standing_wait" doc:"With adaptive-lifo: the queue stands, and serves newest first, while its oldest waiter has waited longer than this; 0: the smaller of 100ms and max_wait/2." default:"0s"`
	Target       Duration `yaml:"target" doc:"With codel: the queue wait CoDel keeps the queue at." default:"5ms" min:"1us"`
	Interval     Duration `yaml:"interval" doc:"With codel: how long the wait may stay above target before waiters are dropped." default:"100ms" min:"1us"`
}

// Fairness is per-client fairness within the limit.
type Fairness struct {
	Slots    int     `yaml:"slots" doc:"Client counters (rounded up to a power of two, 8 bytes each); clients hashing to one slot share it, so keep it well above the clients active at once." default:"4096" min:"1" max:"1048576"`
	Pressure float64 `yaml:"pressure" doc:"Share of the class's limit in flight from which fairness applies, in (0, 1]; below it no one is refused for fairness." default:"0.8" min:"0.000001" max:"1"`
}

// Brownout is the dimmer of optional work.
type Brownout struct {
	Header     string   `yaml:"header" doc:"Request header carrying the decision upstream (1: run optional work, 0: skip it); one sent by a client that is not a trusted peer is removed." default:"Spillway-Brownout" kind:"token"`
	TargetWait Duration `yaml:"target_wait" doc:"Mean queue wait above which the level is lowered; 0: ignored. At least one of target_wait and target_p99 must be set." default:"0s"`
	TargetP99  Duration `yaml:"target_p99" doc:"99th percentile latency above which the level is lowered; 0: ignored." default:"0s"`
	Period     Duration `yaml:"period" doc:"Time between control steps: the level changes at most once per period." default:"1s" min:"1ms"`
	Window     Duration `yaml:"window" doc:"Observations the signals cover, at least period and at most 1000 periods; 0: 10 periods." default:"0s"`
	Hysteresis float64  `yaml:"hysteresis" doc:"Band below each target in which the level holds, in (0, 1): it rises only while every signal is below (1 - hysteresis) times its target." default:"0.2" min:"0.000001" max:"0.999999"`
	Decrease   float64  `yaml:"decrease" doc:"Factor applied to the level at each step where a signal is above its target, in (0, 1)." default:"0.8" min:"0.000001" max:"0.999999"`
	Increase   float64  `yaml:"increase" doc:"Amount added to the level at each step where every signal is below its band, in (0, 1]." default:"0.05" min:"0.000001" max:"1"`
	Min        float64  `yaml:"min" doc:"Lowest level, in [0, 1); 0 lets the dimmer switch optional work off entirely." default:"0" min:"0" max:"0.999999"`
	MinSamples int      `yaml:"min_samples" doc:"Fewest observations in the window for a step to change the level (an idle server's noise changes nothing)." default:"20" min:"1" max:"1000000000"`
}

// Breaker is a cluster's circuit breaker.
type Breaker struct {
	Window       string    `yaml:"window" doc:"What opens the breaker: consecutive (threshold failures in a row), count (failure or slow-call rate over the last calls) or time (the same over the last duration)." default:"consecutive" enum:"consecutive,count,time"`
	Threshold    int       `yaml:"threshold" doc:"With consecutive: failures in a row that open the breaker." default:"5" min:"1" max:"1000000"`
	Calls        int       `yaml:"calls" doc:"With count: the most recent calls the rates are computed over." default:"100" min:"1" max:"1048576"`
	Duration     Duration  `yaml:"duration" doc:"With time: the span the rates are computed over, a whole number of buckets." default:"10s" min:"1ms"`
	Bucket       Duration  `yaml:"bucket" doc:"With time: calls leave the window a bucket at a time." default:"1s" min:"1ms"`
	MinCalls     int       `yaml:"min_calls" doc:"With count or time: calls the window must hold before a rate can open the breaker (with count, at most calls: it is cut to calls when left out)." default:"20" min:"1" max:"1048576"`
	FailureRate  float64   `yaml:"failure_rate" doc:"With count or time: share of failed calls in the window that opens the breaker, in (0, 1]." default:"0.5" min:"0.000001" max:"1"`
	SlowCall     Duration  `yaml:"slow_call" doc:"With count or time: a call lasting at least this long is slow, whatever its outcome; 0: no call is slow." default:"0s"`
	SlowCallRate float64   `yaml:"slow_call_rate" doc:"With slow_call: share of slow calls in the window that opens the breaker, in (0, 1]." default:"1" min:"0.000001" max:"1"`
	Open         Duration  `yaml:"open" doc:"Time open before trial calls are let through (the first time it opens after being closed)." default:"5s" min:"1ms"`
	Multiplier   float64   `yaml:"multiplier" doc:"Factor the open time grows by each time a round of trials fails, up to max_open (needed above 1); 1: constant." default:"1" min:"1" max:"1000"`
	MaxOpen      Duration  `yaml:"max_open" doc:"Longest open time with multiplier above 1; 0: no cap (only without growth)." default:"0s"`
	Trials       int       `yaml:"trials" doc:"Trial calls let through per half-open round." default:"1" min:"1" max:"10000"`
	Shadow       bool      `yaml:"shadow" doc:"Count and log what the breaker would refuse, and refuse nothing." default:"false"`
	Fallback     *Fallback `yaml:"fallback" doc:"What answers while the breaker is open: a static response or another cluster; absent: a 503 problem+json with reason breaker-open."`
}

// Fallback answers requests while a cluster's breaker is open.
type Fallback struct {
	Status      int               `yaml:"status" doc:"Status of the static answer." default:"503" min:"100" max:"599"`
	Body        string            `yaml:"body" doc:"Body of the static answer." file:"true"`
	ContentType string            `yaml:"content_type" doc:"Content-Type of the static answer's body (sent only with a body)." default:"text/plain; charset=utf-8"`
	Headers     map[string]string `yaml:"headers" doc:"Header fields of the static answer." kind:"token"`
	Cluster     string            `yaml:"cluster" doc:"Send the requests to this cluster instead (it must exist and not be this one; not with status, body, content_type or headers)." kind:"name"`
}

// Policies are a route's policies; absent, retries with a budget and
// nothing else.
type Policies struct {
	Class         string          `yaml:"class" doc:"Criticality class of the route's requests: critical, default, sheddable (or 0 to 7); admission refuses sheddable requests first." default:"default" kind:"class"`
	ClassHeader   bool            `yaml:"class_header" doc:"A Spillway-Criticality header from a trusted peer (the listener's trusted_proxies) sets the class; from any other peer the header is removed and ignored." default:"true"`
	MaxConcurrent int             `yaml:"max_concurrent" doc:"A bulkhead: most requests of this route in flight at once (then 503); 0: none. Streaming routes are bounded by it rather than by the cluster's adaptive limit, which they would distort." default:"0" min:"0" max:"10000000"`
	Deadline      Deadline        `yaml:"deadline" doc:"The request's time budget: expired or infeasible requests are refused before they cost a token or a place."`
	RateLimit     *RouteRateLimit `yaml:"ratelimit" doc:"Rate-limit rules of the route, kept where the top-level ratelimit says; absent: no rules."`
	Retry         Retry           `yaml:"retry" doc:"Retries of failed upstream attempts, on an endpoint not tried yet, paid by a retry budget."`
}

// Deadline is a route's time budget.
type Deadline struct {
	Default Duration `yaml:"default" doc:"Budget of a request that names none; 0: none." default:"0s"`
	Max     Duration `yaml:"max" doc:"Cap on any request's budget, named or default; 0: none." default:"0s"`
	Headers bool     `yaml:"headers" doc:"Read the budget a trusted peer names in Spillway-Timeout, grpc-timeout or x-envoy-expected-rq-timeout-ms (from other peers they are removed)." default:"true"`
	Forward bool     `yaml:"forward" doc:"Send the remaining budget upstream in Spillway-Timeout (grpc-timeout on grpc routes)." default:"true"`
}

// RouteRateLimit holds a route's rules: inline, or in a rules file.
type RouteRateLimit struct {
	Rules      RulesDoc `yaml:"rules" doc:"The rules, inline, in the rules file format of package ratelimit/rules (id, key, rate, per, burst, algorithm, cost, shadow, failMode, onMissing, match); ${ENV} is expanded and the result read as a plain YAML value, quoted or not (rate: \"${RATE}\" is a number); only one of rules and file." kind:"rules"`
	Identities RulesDoc `yaml:"identities" doc:"With rules: named key parts besides user, tenant, phone and apikey, as a rules file's identities (device: {header: X-Device-Id})." kind:"identities"`
	IPv6Prefix int      `yaml:"ipv6_prefix" doc:"With rules: leading bits of an IPv6 client address that form its ip key part (64: one host or household; 128: each address)." default:"64" min:"1" max:"128"`
	File       string   `yaml:"file" doc:"A rules file (YAML or JSON, the same format), relative to this file's directory; its problems name it. It must not set trustedProxies or forwardedHeader: the client IP is the listener's (trusted_proxies)." kind:"filepath"`

	set *rules.Set // the parsed rules, made by Load
}

// Retry is a route's retry policy.
type Retry struct {
	Attempts    int          `yaml:"attempts" doc:"Attempts per request, the first included; 1: no retries. Only idempotent methods are retried, and others carrying Idempotency-Key." default:"2" min:"1" max:"10"`
	Backoff     RetryBackoff `yaml:"backoff" doc:"Delay before each retry: exponential with jitter."`
	Budget      RetryBudget  `yaml:"budget" doc:"The retry budget, always on: retries may grow with new requests, never with failures (a dependency in trouble gets at most ratio more load)."`
	On          []string     `yaml:"on" doc:"What is retried: error kinds connect-failure (no connection made: always safe), reset (the connection failed before a response) and timeout, and upstream statuses (503) or ranges (\"500-599\")." default:"connect-failure,reset,502,503" kind:"retry-on"`
	BufferBytes Bytes        `yaml:"buffer_bytes" doc:"Request bodies up to this size are kept for a replay; a request with a larger (or unknown-length, longer) body is not retried." default:"64KiB" max:"16MiB"`
	Hedge       *RetryHedge  `yaml:"hedge" doc:"Hedged requests: while an attempt has no response head after a delay, another is sent to an endpoint not tried yet, the first good answer wins and the other is cancelled. Each hedge is paid from the retry budget (hedges and retries together stay within it). Only idempotent requests without a body are hedged (GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or one with Idempotency-Key; no Upgrade), on every listener and cluster protocol but one: a request that came over HTTP/1.1 to an http2 or h2c cluster is not hedged (yet); over HTTP/2 (h2, h2c) a hedged request's 1xx heads are not forwarded. Absent: off."`

	statuses [10]uint64 // bit s set: status s is retried (s < 640)
	kinds    uint8      // retryConnect | retryReset | retryTimeout
}

// RetryHedge is a route's hedging: retry.HedgeConfig, with the route's
// retry budget.
type RetryHedge struct {
	Delay     Duration `yaml:"delay" doc:"Time after an attempt was sent at which a hedge follows while no response head came; 0: the quantile of recent latencies (no hedge until 20 successful attempts were measured within max_age)." default:"0s"`
	Quantile  float64  `yaml:"quantile" doc:"With delay 0: the latency quantile after which a hedge follows, in (0, 1): 0.95 hedges about the slowest 5% of requests." default:"0.95" min:"0.000001" max:"0.999999"`
	MaxHedges int      `yaml:"max_hedges" doc:"Most hedges per request, each after another delay while no attempt has answered." default:"1" min:"1" max:"10"`
	Samples   int      `yaml:"samples" doc:"With delay 0: recent latencies the quantile is taken over." default:"128" min:"20" max:"1024"`
	MaxAge    Duration `yaml:"max_age" doc:"With delay 0: how long a latency counts for the quantile." default:"1m" min:"1ms"`
}

// RetryBackoff is the delay schedule between attempts.
type RetryBackoff struct {
	Base   Duration `yaml:"base" doc:"Scale of the schedule: retry n waits up to base × 2^n, capped." default:"25ms" min:"1ms"`
	Cap    Duration `yaml:"cap" doc:"Longest delay, at least base." default:"250ms" min:"1ms"`
	Jitter string   `yaml:"jitter" doc:"Randomisation: full (uniform up to the ceiling, the least total work), equal (at least half the ceiling), decorrelated (grows from the previous delay) or none (clients that failed together retry together)." default:"full" enum:"full,equal,decorrelated,none"`
}

// RetryBudget is a retry budget: a token bucket filled by new requests.
type RetryBudget struct {
	Ratio        float64 `yaml:"ratio" doc:"Tokens each new request deposits: the long-run ceiling of retries per request." default:"0.2" min:"0.001" max:"100"`
	MinPerSecond float64 `yaml:"min_per_second" doc:"Retries per second allowed beyond the ratio, for routes with so little traffic that the ratio would forbid every retry; 0: none." default:"3" min:"0" max:"1000000"`
	Max          float64 `yaml:"max" doc:"Capacity of the bucket in tokens (it starts full): the burst of retries after a quiet period." default:"10" min:"1" max:"1000000"`
}

// RulesDoc is a part of the file in the rules file format of package
// ratelimit/rules, kept as written (with ${ENV} expanded) and read by that
// package when the file is loaded.
type RulesDoc struct {
	node *yaml.Node // nil when absent
}
