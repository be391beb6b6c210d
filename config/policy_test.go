package config

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
)

// check compares got with want for each named value.
func check(t *testing.T, cases []struct {
	name      string
	got, want any
}) {
	t.Helper()
	for _, x := range cases {
		if !reflect.DeepEqual(x.got, x.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", x.name, x.got, x.want)
		}
	}
}

type cases = []struct {
	name      string
	got, want any
}

// A file without policy sections gets the defaults the reference documents
// (written out here by hand): retries with a budget, nothing else.
func TestPolicyDefaults(t *testing.T) {
	c := mustParse(t, t.TempDir(), "version: 1\nadmin:\nlisteners: [{address: \"127.0.0.1:8080\", limits: }]\n"+
		"routes: [{cluster: app, request_headers: {add: }, policies: }]\nclusters: [{name: app, endpoints: [127.0.0.1:9001]}]\n", noEnv)
	p, rl := &c.Routes[0].Policies, &c.RateLimit
	r := &p.Retry
	check(t, cases{
		{"class", p.ClassOf(), shed.Default},
		{"class header", p.ClassHeader, true},
		{"bulkhead", p.MaxConcurrent, 0},
		{"deadline", p.Deadline, Deadline{Headers: true, Forward: true}},
		{"route rules", p.RateLimit, (*RouteRateLimit)(nil)},
		{"retry policy", r.Policy(), retry.Policy{MaxAttempts: 2, Backoff: retry.Backoff{Base: 0.025, Cap: 0.25, Jitter: retry.FullJitter}}},
		{"retry budget", r.BudgetConfig(), retry.BudgetConfig{Max: 10, Ratio: 0.2, MinPerSecond: 3}},
		{"retry kinds", []bool{r.RetryKind("connect-failure"), r.RetryKind("reset"), r.RetryKind("timeout"), r.RetryKind("nope")},
			[]bool{true, true, false, false}},
		{"retry statuses", []bool{r.RetryStatus(500), r.RetryStatus(502), r.RetryStatus(503), r.RetryStatus(504), r.RetryStatus(-1), r.RetryStatus(1 << 20)},
			[]bool{false, true, true, false, false, false}},
		{"retry buffer", r.BufferBytes, Bytes(64 << 10)},
		{"store", rl.Store, "memory"},
		{"redis options", rl.RedisOptions(), (*redis.UniversalOptions)(nil)},
		{"memory", rl.MemoryConfig(), ratelimit.MemoryConfig{}},
		{"hot keys", rl.HotKeysConfig(), (*ratelimit.HotKeysConfig)(nil)},
		{"jitter", rl.RetryAfterJitter, Duration(0)},
		{"admission", c.Clusters[0].Admission, (*Admission)(nil)},
		{"breaker", c.Clusters[0].Breaker, (*Breaker)(nil)},
	})
}

// Sections given empty get their documented defaults, mapped onto the
// library's structs.
func TestPolicySectionDefaults(t *testing.T) {
	c := mustParse(t, t.TempDir(), "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\n"+
		"ratelimit: {store: redis, redis: {addresses: [127.0.0.1:6379]}, hot_keys: {}, leasing: {}}\n"+
		"routes: [{cluster: app, policies: {ratelimit: {rules: [{id: a, rate: 1, per: 1s}]}}}]\n"+
		"clusters:\n  - {name: app, endpoints: [127.0.0.1:9001], admission: {brownout: {target_p99: 1s}}, breaker: {}}\n"+
		"  - {name: b, endpoints: [127.0.0.1:9002], breaker: {window: count, calls: 10}}\n", noEnv)
	rl, a := &c.RateLimit, c.Clusters[0].Admission
	alg, err := a.Algorithm()
	if err != nil {
		t.Fatal(err)
	}
	dim, ok := a.DimmerConfig()
	check(t, cases{
		{"redis options", rl.RedisOptions(), &redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}, DialTimeout: time.Second,
			ContextTimeoutEnabled: true, MaxRetries: -1}},
		{"stores", rl.StoresConfig(), redisstore.StoresConfig{Store: redisstore.Config{Prefix: "rl", Timeout: 0.05},
			Breaker: breaker.Config{Threshold: 3, Recovery: 1}, FloorFactor: 1,
			Lease: &redisstore.LeaseOptions{Config: ratelimit.LeaseConfig{Size: 10, TTL: 1}}}},
		{"hot keys", rl.HotKeysConfig(), &ratelimit.HotKeysConfig{Width: 1024, Depth: 4, TopK: 10, Interval: 60, Decay: 0.5, MinCount: 1}},
		{"rules", len(c.Routes[0].Policies.RateLimit.RuleSet().Rules), 1},
		{"ipv6 prefix", c.Routes[0].Policies.RateLimit.RuleSet().IPv6Prefix, 64},
		{"algorithm", reflect.TypeOf(alg), reflect.TypeFor[*limit.Gradient2]()},
		{"initial limit", alg.Limit(), 20},
		{"limiter", a.LimiterConfig(), limit.LimiterConfig{Shares: []float64{1, 0.9, 0.5},
			Queue: limit.QueueConfig{MaxWait: 0.05, MaxQueue: 1024, Target: 0.005, Interval: 0.1}}},
		{"dimmer", [2]any{dim, ok}, [2]any{brownout.Config{TargetP99: 1, Period: 1, Hysteresis: 0.2, Decrease: 0.8,
			Increase: 0.05, MinSamples: 20}, true}},
		{"brownout header", a.Brownout.Header, "Spillway-Brownout"},
		{"admission shadow", a.Shadow, false},
		{"breaker", c.Clusters[0].Breaker.BreakerConfig(), breaker.Config{Threshold: 5, Recovery: 5, RecoveryMultiplier: 1, Trials: 1}},
		{"count window, min_calls cut to calls", c.Clusters[1].Breaker.BreakerConfig(), breaker.Config{Window: breaker.CountWindow,
			WindowCalls: 10, MinCalls: 10, FailureRate: 0.5, Recovery: 5, RecoveryMultiplier: 1, Trials: 1}},
	})
}

// loadPolicies loads testdata/policies.yaml (its ${ENV} references set).
func loadPolicies(t *testing.T) *Config {
	t.Helper()
	data, err := os.ReadFile("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parse("testdata/policies.yaml", data, env("REDIS_PASSWORD", "pw-s3cret", "LOGIN_RATE", "5"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testdata/policies.yaml sets every policy field; each value lands in the
// library's struct (expected values written by hand from the file).
func TestPoliciesExample(t *testing.T) {
	c := loadPolicies(t)
	rl := &c.RateLimit
	hot := &ratelimit.HotKeysConfig{Width: 2048, Depth: 5, TopK: 5, Shards: 8, Interval: 30, Decay: 0.25, MinCount: 100}
	check(t, cases{
		{"redis options", rl.RedisOptions(), &redis.UniversalOptions{Addrs: []string{"10.0.0.5:26379", "10.0.0.6:26379"},
			MasterName: "limits", Username: "gateway", Password: "pw-s3cret", DB: 2, PoolSize: 32,
			DialTimeout: 500 * time.Millisecond, ContextTimeoutEnabled: true, MaxRetries: -1}},
		{"stores", rl.StoresConfig(), redisstore.StoresConfig{Store: redisstore.Config{Prefix: "edge", Timeout: 0.02},
			Breaker: breaker.Config{Threshold: 4, Recovery: 2}, FloorFactor: 0.5, LocalFactor: 2,
			Lease: &redisstore.LeaseOptions{Config: ratelimit.LeaseConfig{Size: 20, TTL: 0.5}, HotKeys: hot}}},
		{"hot keys", rl.HotKeysConfig(), hot},
		{"jitter", rl.RetryAfterJitter.Seconds(), 1.0},
	})
	checkExampleRoutes(t, c)
	checkExampleClusters(t, c)
}

func checkExampleRoutes(t *testing.T, c *Config) {
	t.Helper()
	api, batch := &c.Routes[0].Policies, &c.Routes[1].Policies
	set := api.RateLimit.RuleSet()
	if set == nil || len(set.Rules) != 2 {
		t.Fatalf("api rules %+v", set)
	}
	dev, login := set.Rules[0], set.Rules[1]
	r := &api.Retry
	check(t, cases{
		{"class", api.ClassOf(), shed.Critical},
		{"class header", api.ClassHeader, false},
		{"bulkhead", api.MaxConcurrent, 500},
		{"deadline", api.Deadline, Deadline{Default: Duration(2 * time.Second), Max: Duration(10 * time.Second)}},
		{"device key", dev.Key, []rules.KeyPart{{Kind: rules.PartIdentity, Name: "device", Header: "X-Device-Id"}}},
		{"device spec", dev.Spec, ratelimit.Spec{Rate: 100, Per: 60, Burst: 20}},
		{"login from ${LOGIN_RATE}", [3]any{login.ID, login.Spec.Rate, login.FailMode}, [3]any{"login", 5.0, ratelimit.FailClosed}},
		{"login match", login.Match.Methods, []string{"POST"}},
		{"ipv6 prefix", set.IPv6Prefix, 56},
		{"retry policy", r.Policy(), retry.Policy{MaxAttempts: 3, Backoff: retry.Backoff{Base: 0.01, Cap: 1, Jitter: retry.DecorrelatedJitter}}},
		{"retry budget", r.BudgetConfig(), retry.BudgetConfig{Max: 5, Ratio: 0.1, MinPerSecond: 1}},
		{"retry kinds", []bool{r.RetryKind("connect-failure"), r.RetryKind("reset"), r.RetryKind("timeout")}, []bool{true, false, true}},
		{"retry statuses", []bool{r.RetryStatus(499), r.RetryStatus(500), r.RetryStatus(502), r.RetryStatus(504), r.RetryStatus(505)},
			[]bool{false, true, true, true, false}},
		{"buffer", r.BufferBytes, Bytes(1 << 20)},
		{"hedge", r.Hedge, &RetryHedge{Quantile: 0.9, MaxHedges: 2, Samples: 64, MaxAge: Duration(30 * time.Second)}},
		{"batch class", batch.ClassOf(), shed.Sheddable},
		{"batch rules from limits.yaml", ruleIDs(batch.RateLimit.RuleSet()), []string{"export", "tenant"}},
		{"batch retry default", batch.Retry.Policy().MaxAttempts, 2},
	})
}

func ruleIDs(s *rules.Set) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, r := range s.Rules {
		out = append(out, r.ID)
	}
	return out
}

func checkExampleClusters(t *testing.T, c *Config) {
	t.Helper()
	app, batch := c.Cluster("app"), c.Cluster("batch")
	alg, err := app.Admission.Algorithm()
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := batch.Admission.Algorithm()
	if err != nil {
		t.Fatal(err)
	}
	dim, ok := app.Admission.DimmerConfig()
	fb := batch.Breaker.Fallback
	check(t, cases{
		{"aimd", [2]any{reflect.TypeOf(alg), alg.Limit()}, [2]any{reflect.TypeFor[*limit.AIMD](), 50}},
		{"app limiter", app.Admission.LimiterConfig(), limit.LimiterConfig{Shares: []float64{1, 0.8, 0.4},
			Queue: limit.QueueConfig{Discipline: limit.AdaptiveLIFO, MaxWait: 0.2, MaxQueue: 256, StandingWait: 0.02,
				Target: 0.005, Interval: 0.1}, Fairness: limit.FairnessConfig{Slots: 1024, Pressure: 0.7}}},
		{"dimmer", [2]any{dim, ok}, [2]any{brownout.Config{TargetWait: 0.01, TargetP99: 0.3, Period: 0.5, Window: 5,
			Hysteresis: 0.1, Decrease: 0.5, Increase: 0.1, Min: 0.2, MinSamples: 50}, true}},
		{"admission shadow and header", [2]any{app.Admission.Shadow, app.Admission.Brownout.Header}, [2]any{true, "X-Dim"}},
		{"app breaker", app.Breaker.BreakerConfig(), breaker.Config{Window: breaker.TimeWindow, Recovery: 2, RecoveryMultiplier: 2,
			MaxRecovery: 60, Trials: 3, WindowSeconds: 20, BucketSeconds: 2, MinCalls: 30, FailureRate: 0.4, SlowCall: 0.8, SlowCallRate: 0.6}},
		{"app fallback", [2]any{app.Breaker.Shadow, app.Breaker.Fallback.Cluster}, [2]any{true, "batch"}},
		{"fixed", [2]any{reflect.TypeOf(fixed), fixed.Limit()}, [2]any{reflect.TypeFor[*limit.Fixed](), 8}},
		{"codel", batch.Admission.LimiterConfig().Queue, limit.QueueConfig{Discipline: limit.CoDel, MaxWait: 0.05, MaxQueue: 1024,
			Target: 0.002, Interval: 0.05}},
		{"batch breaker", batch.Breaker.BreakerConfig(), breaker.Config{Window: breaker.CountWindow, WindowCalls: 50, MinCalls: 20,
			FailureRate: 0.5, Recovery: 5, RecoveryMultiplier: 1, Trials: 1}},
		{"consecutive breaker", c.Cluster("spare").Breaker.BreakerConfig(), breaker.Config{Threshold: 3, Recovery: 10,
			RecoveryMultiplier: 1, Trials: 1}},
		{"static fallback", [4]any{fb.Status, fb.Body, fb.ContentType, fb.Headers},
			[4]any{200, `{"items": []}`, "application/json", map[string]string{"Cache-Control": "no-store"}}},
	})
}

// The Redis password is a secret: the redacted copy and its JSON (what
// the admin /config serves) never show it; inline rules show as JSON.
func TestPolicyRedacted(t *testing.T) {
	c := loadPolicies(t)
	r := c.Redacted()
	if got := r.RateLimit.Redis.Password; got != RedactedValue {
		t.Errorf("password %q", got)
	}
	if c.RateLimit.Redis.Password != "pw-s3cret" {
		t.Error("Redacted changed the original")
	}
	if r.RateLimit.RedisOptions().Password != RedactedValue || r.Routes[0].Policies.RateLimit.RuleSet() == nil {
		t.Error("the copy lost what is not secret")
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Password":"[redacted]"`, `"id":"per-device"`, `"header":"X-Device-Id"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	if strings.Contains(string(js), "pw-s3cret") {
		t.Error("JSON shows the password")
	}
	if empty, _ := json.Marshal(RulesDoc{}); string(empty) != "null" {
		t.Errorf("absent rules as %s", empty)
	}
}

// Rule files are read once per load, whichever routes name them, and the
// rules of a file read by two routes are the same.
func TestRulesFileShared(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/limits.yaml", "rules: [{id: a, rate: 1, per: 1s}]\n")
	c := mustParse(t, dir, "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes:\n"+
		"  - {cluster: app, policies: {ratelimit: {file: limits.yaml}}}\n  - {cluster: app, policies: {ratelimit: {file: limits.yaml}}}\n"+
		clus, noEnv)
	a, b := c.Routes[0].Policies.RateLimit, c.Routes[1].Policies.RateLimit
	if a.File != dir+"/limits.yaml" || a.RuleSet() == nil || a.RuleSet() != b.RuleSet() || !slices.Equal(ruleIDs(a.RuleSet()), []string{"a"}) {
		t.Errorf("file %q, sets %p %p", a.File, a.RuleSet(), b.RuleSet())
	}
}

// A rules file's problems name that file, line and column, once however
// many routes use it, after the configuration file's own; one setting the
// client IP's sources is refused at the reference.
func TestRulesFileProblems(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/bad.yaml", "rules:\n  - {id: a, rate: 1}\n  - {id: b, rate: 1, per: 1s, colour: red}\n")
	write(t, dir+"/proxies.yaml", "trustedProxies: [10.0.0.0/8]\nrules: [{id: a, rate: 1, per: 1s}]\n")
	in := pl + "routes:\n" +
		"  - {cluster: app, policies: {ratelimit: {file: bad.yaml}}}\n" +
		"  - {cluster: app, policies: {ratelimit: {file: proxies.yaml}}}\n" +
		"  - {cluster: app, policies: {ratelimit: {file: bad.yaml}}}\n" +
		"  - {cluster: app, policies: {ratelimit: {file: none.yaml}}}\n" + clus
	_, err := parse(dir+"/f.yaml", []byte(in), noEnv)
	want := strings.Join([]string{
		dir + "/f.yaml:5:49: routes[1].policies.ratelimit.file: " + dir + "/proxies.yaml sets trustedProxies or forwardedHeader; the gateway finds the client IP by the listener's trusted_proxies: remove them",
		dir + "/f.yaml:7:49: routes[3].policies.ratelimit.file: cannot read " + dir + "/none.yaml: no such file or directory",
		dir + `/bad.yaml:2:5: rule "a": missing per (e.g. "1s", "1m", "15m", "1h", "1d")`,
		dir + `/bad.yaml:3:31: rule "b": unknown field "colour" (want id, key, rate, per, burst, algorithm, cost, shadow, failMode, onMissing, match)`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("\n got %v\nwant %s", err, want)
	}
}

// Fallbacks that lead back to where they started are refused, once per
// loop, at its first cluster.
func TestFallbackLoop(t *testing.T) {
	fb := func(name, to string) string {
		return "  - {name: " + name + ", endpoints: [127.0.0.1:9001], breaker: {fallback: {cluster: " + to + "}}}\n"
	}
	in := pl + "routes: [{cluster: a}]\nclusters:\n" + fb("a", "b") + fb("b", "c") + fb("c", "a") + fb("d", "a")
	got := problems(t, in, noEnv)
	want := `f.yaml:5:74: clusters[0].breaker.fallback.cluster: the fallbacks go round in a loop (a → b → c → a)`
	if strings.Join(got, "\n") != want {
		t.Errorf("\n got %s\nwant %s", strings.Join(got, "\n     "), want)
	}
}

// testdata/policies.yaml writes every field of every policy section at
// least once, so TestPoliciesExample covers each mapping.
func TestPoliciesExampleComplete(t *testing.T) {
	c := loadPolicies(t)
	given := map[string]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Struct:
			info := infoOf(v.Type())
			for _, f := range info.fields {
				fv := v.Field(f.index)
				if _, ok := c.Pos(fv.Addr().Interface()); ok {
					given[v.Type().Name()+"."+f.name] = true
				}
				walk(fv)
			}
		}
	}
	walk(reflect.ValueOf(c).Elem())
	// max_keys is store memory's, and the example's store is redis.
	mem := mustParse(t, t.TempDir(), pl+"ratelimit: {max_keys: 5000}\n"+pr+clus, noEnv)
	if got := mem.RateLimit.MemoryConfig(); !reflect.DeepEqual(got, ratelimit.MemoryConfig{MaxKeys: 5000}) {
		t.Errorf("memory config %+v", got)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[RateLimit](), reflect.TypeFor[Redis](), reflect.TypeFor[StoreBreaker](),
		reflect.TypeFor[Leasing](), reflect.TypeFor[HotKeys](), reflect.TypeFor[Admission](), reflect.TypeFor[Shares](),
		reflect.TypeFor[Queue](), reflect.TypeFor[Fairness](), reflect.TypeFor[Brownout](), reflect.TypeFor[Breaker](),
		reflect.TypeFor[Fallback](), reflect.TypeFor[Policies](), reflect.TypeFor[Deadline](), reflect.TypeFor[RouteRateLimit](),
		reflect.TypeFor[Retry](), reflect.TypeFor[RetryBackoff](), reflect.TypeFor[RetryBudget](), reflect.TypeFor[RetryHedge]()} {
		for _, f := range infoOf(typ).fields {
			if !given[typ.Name()+"."+f.name] && typ.Name()+"."+f.name != "RateLimit.max_keys" {
				t.Errorf("testdata/policies.yaml never sets %s.%s", typ.Name(), f.name)
			}
		}
	}
}

// On Redis rules of one id share their keys: the same limit on two routes
// is one budget, two limits under one id are refused.
func TestSharedRuleIDs(t *testing.T) {
	const redis = "ratelimit: {store: redis, redis: {addresses: [127.0.0.1:6379]}}\n"
	route := func(rate string) string {
		return "  - {cluster: app, policies: {ratelimit: {rules: [{id: a, rate: " + rate + ", per: 1s}]}}}\n"
	}
	mustParse(t, t.TempDir(), pl+redis+"routes:\n"+route("5")+route("5")+clus, noEnv)
	mustParse(t, t.TempDir(), pl+"routes:\n"+route("5")+route("7")+clus, noEnv) // memory: each route its own stores
	got := problems(t, pl+redis+"routes:\n"+route("5")+route("7")+clus, noEnv)
	want := `f.yaml:6:50: routes[1].policies.ratelimit: rule "a": routes[0] has a rule of this id with another limit; on Redis both would count in the same keys: give one another id`
	if strings.Join(got, "\n") != want {
		t.Errorf("\n got %s\nwant %s", strings.Join(got, "\n     "), want)
	}
}
