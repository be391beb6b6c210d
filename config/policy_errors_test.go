package config

import (
	"strings"
	"testing"
)

// The minimal file around the policy sections each case adds (clus is
// errors_test.go's).
const (
	pl = "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\n"
	pr = "routes: [{cluster: app}]\n"
)

// Every problem of the policy sections, with its exact message and
// position (the line and column of the value at fault, found in the input
// by hand).
func TestPolicyProblems(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"store redis without redis", pl + "ratelimit: {store: redis}\n" + pr + clus,
			[]string{`f.yaml:3:20: ratelimit.store: redis needs a redis: section (its addresses at least)`}},
		{"redis with memory", pl + "ratelimit: {redis: {addresses: [a:1]}}\n" + pr + clus,
			[]string{`f.yaml:3:20: ratelimit.redis: only with store: redis (the store is memory)`}},
		{"max_keys with redis", pl + "ratelimit: {store: redis, redis: {addresses: [a:1]}, max_keys: 10}\n" + pr + clus,
			[]string{`f.yaml:3:64: ratelimit.max_keys: only with store: memory (Redis holds the keys of store: redis)`}},
		{"redis fields with memory", pl + "ratelimit: {floor_factor: 2, leasing: {}}\n" + pr + clus,
			[]string{`f.yaml:3:27: ratelimit.floor_factor: only with store: redis`, `f.yaml:3:39: ratelimit.leasing: only with store: redis`}},
		{"hot_keys_only without hot_keys", pl + "ratelimit: {store: redis, redis: {addresses: [a:1]}, leasing: {hot_keys_only: true}}\n" + pr + clus,
			[]string{`f.yaml:3:79: ratelimit.leasing.hot_keys_only: needs hot_keys (which keys are hot: min_count within an interval)`}},
		{"db on a cluster", pl + "ratelimit: {store: redis, redis: {addresses: [a:1, b:1], db: 3}}\n" + pr + clus,
			[]string{`f.yaml:3:62: ratelimit.redis.db: several addresses without master_name are a Redis Cluster, which has only db 0`}},
		{"library: prefix", pl + "ratelimit: {store: redis, redis: {addresses: [a:1], prefix: \"a{b\"}}\n" + pr + clus,
			[]string{`f.yaml:3:61: ratelimit: StoresConfig.Store: redisstore: invalid configuration: Prefix "a{b" must be at most 64 bytes without '{' or '}'`}},
		{"library: hot key shards", pl + "ratelimit: {hot_keys: {shards: 3}}\n" + pr + clus,
			[]string{`f.yaml:3:23: ratelimit.hot_keys: ratelimit: invalid keyed configuration: Shards must be a power of two from 1 to 256, got 3`}},
		{"redis address", pl + "ratelimit: {store: redis, redis: {addresses: [localhost]}}\n" + pr + clus,
			[]string{`f.yaml:3:47: ratelimit.redis.addresses[0]: want host:port, got "localhost" (no port)`}},
		{"initial below min", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {initial_limit: 5, min_limit: 10}}]\n",
			[]string{`f.yaml:4:80: clusters[0].admission: limit: InitialLimit: must be within [MinLimit, MaxLimit], got 5`}},
		{"max below min", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {min_limit: 50, max_limit: 10}}]\n",
			[]string{`f.yaml:4:91: clusters[0].admission: limit: MaxLimit: must be at least MinLimit (50), got 10`}},
		{"bounds with fixed", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {algorithm: fixed, max_limit: 10, backoff: 0.5}}]\n",
			[]string{`f.yaml:4:94: clusters[0].admission.max_limit: only with an adaptive algorithm (not fixed)`, `f.yaml:4:107: clusters[0].admission.backoff: only with an adaptive algorithm (not fixed)`}},
		{"tolerance with vegas", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {algorithm: vegas, tolerance: 2}}]\n",
			[]string{`f.yaml:4:94: clusters[0].admission.tolerance: only with algorithm aimd, gradient or gradient2`}},
		{"baseline without aimd", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {baseline: 40ms}}]\n",
			[]string{`f.yaml:4:75: clusters[0].admission.baseline: only with algorithm aimd`}},
		{"unknown algorithm", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {algorithm: netflix}}]\n",
			[]string{`f.yaml:4:76: clusters[0].admission.algorithm: want one of fixed, aimd, gradient, gradient2, vegas, got "netflix"`}},
		{"queue without wait", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {queue: {discipline: fifo, max_wait: 0}}}]\n",
			[]string{`f.yaml:4:101: clusters[0].admission: limit: Queue.MaxWait: must be a positive finite number, got 0`}},
		{"queue fields with reject", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {queue: {max_wait: 10ms, max_length: 5}}}]\n",
			[]string{`f.yaml:4:83: clusters[0].admission.queue.max_wait: only with a queue (discipline fifo, adaptive-lifo or codel)`, `f.yaml:4:101: clusters[0].admission.queue.max_length: only with a queue (discipline fifo, adaptive-lifo or codel)`}},
		{"codel fields with fifo", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {queue: {discipline: fifo, target: 1ms, standing_wait: 1ms}}}]\n",
			[]string{`f.yaml:4:99: clusters[0].admission.queue.target: only with discipline codel`, `f.yaml:4:119: clusters[0].admission.queue.standing_wait: only with discipline adaptive-lifo`}},
		{"no such discipline", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {queue: {discipline: lifo}}}]\n",
			[]string{`f.yaml:4:85: clusters[0].admission.queue.discipline: want one of reject, fifo, adaptive-lifo, codel, got "lifo"`}},
		{"shares not decreasing", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {shares: {critical: 0.9, default: 0.95}}}]\n",
			[]string{`f.yaml:4:98: clusters[0].admission: limit: Shares[1]: must not exceed the share of the more important class before it`}},
		{"share out of range", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {shares: {sheddable: 0}}}]\n",
			[]string{`f.yaml:4:85: clusters[0].admission.shares.sheddable: must be at least 0.000001, got 0`}},
		{"brownout without targets", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {brownout: {period: 2s}}}]\n",
			[]string{`f.yaml:4:75: clusters[0].admission.brownout: brownout: TargetWait, TargetP99: at least one must be set`}},
		{"brownout window below period", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {brownout: {target_p99: 1s, period: 2s, window: 1s}}}]\n",
			[]string{`f.yaml:4:112: clusters[0].admission.brownout: brownout: Window: must be at least Period (2 s), got 1`}},
		{"brownout header", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], admission: {brownout: {target_p99: 1s, header: \"X Dim\"}}}]\n",
			[]string{"f.yaml:4:100: clusters[0].admission.brownout.header: want a header name or token (letters, digits and !#$%&'*+-.^_`|~), got \"X Dim\""}},
		{"fallback to itself", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], breaker: {fallback: {cluster: app}}}]\n",
			[]string{`f.yaml:4:83: clusters[0].breaker.fallback.cluster: "app" is this cluster itself`}},
		{"fallback to nothing", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], breaker: {fallback: {cluster: nope}}}]\n",
			[]string{`f.yaml:4:83: clusters[0].breaker.fallback.cluster: no cluster is named "nope" (clusters: app)`}},
		{"fallback both ways", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], breaker: {fallback: {status: 200, cluster: app}}}]\n",
			[]string{`f.yaml:4:96: clusters[0].breaker.fallback: give cluster or a static answer (status, body, content_type, headers), not both`}},
		{"fallback status", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], breaker: {fallback: {status: 99}}}]\n",
			[]string{`f.yaml:4:82: clusters[0].breaker.fallback.status: must be at least 100, got 99`}},
		{"threshold with count, slow_call_rate without slow_call", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], breaker: {window: count, threshold: 3, slow_call_rate: 0.5}}]\n",
			[]string{`f.yaml:4:89: clusters[0].breaker.threshold: only with window consecutive`, `f.yaml:4:108: clusters[0].breaker.slow_call_rate: only with slow_call`}},
		{"rates with consecutive", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], breaker: {min_calls: 5, calls: 10, bucket: 1s}}]\n",
			[]string{`f.yaml:4:74: clusters[0].breaker.min_calls: only with window count or time`, `f.yaml:4:84: clusters[0].breaker.calls: only with window count`, `f.yaml:4:96: clusters[0].breaker.bucket: only with window time`}},
		{"library: min_calls above calls", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], breaker: {window: count, calls: 10, min_calls: 20}}]\n",
			[]string{`f.yaml:4:100: clusters[0].breaker: breaker: Config.MinCalls: 20, above WindowCalls (10): the window could never hold that many`}},
		{"library: growth without cap", pl + pr + "clusters: [{name: app, endpoints: [127.0.0.1:9001], breaker: {multiplier: 2}}]\n",
			[]string{`f.yaml:4:75: clusters[0].breaker: breaker: Config.MaxRecovery: must be set when RecoveryMultiplier (2) > 1, or the open time grows without bound`}},
		{"bad class", pl + "routes: [{cluster: app, policies: {class: urgent}}]\n" + clus,
			[]string{`f.yaml:3:43: routes[0].policies.class: want a class: critical, default, sheddable, or 0 to 7, got "urgent"`}},
		{"default deadline above max", pl + "routes: [{cluster: app, policies: {deadline: {default: 5s, max: 1s}}}]\n" + clus,
			[]string{`f.yaml:3:56: routes[0].policies.deadline.default: 5s is above max (1s)`}},
		{"retry on", pl + "routes: [{cluster: app, policies: {retry: {on: [reset, 600, oops]}}}]\n" + clus,
			[]string{`f.yaml:3:56: routes[0].policies.retry.on[1]: want an error kind (connect-failure, reset, timeout), a status (503) or a range ("500-599"), got "600"`, `f.yaml:3:61: routes[0].policies.retry.on[2]: want an error kind (connect-failure, reset, timeout), a status (503) or a range ("500-599"), got "oops"`}},
		{"library: cap below base", pl + "routes: [{cluster: app, policies: {retry: {backoff: {base: 1s, cap: 100ms}}}}]\n" + clus,
			[]string{`f.yaml:3:69: routes[0].policies.retry.backoff: retry: invalid configuration: Backoff.Cap = 0.1 seconds is below Base = 1`}},
		{"attempts", pl + "routes: [{cluster: app, policies: {retry: {attempts: 0}}}]\n" + clus,
			[]string{`f.yaml:3:54: routes[0].policies.retry.attempts: must be at least 1, got 0`}},
		{"rules and file", pl + "routes: [{cluster: app, policies: {ratelimit: {rules: [], file: x.yaml}}}]\n" + clus,
			[]string{`f.yaml:3:65: routes[0].policies.ratelimit.file: give rules (inline) or file, not both`}},
		{"neither rules nor file", pl + "routes: [{cluster: app, policies: {ratelimit: {ipv6_prefix: 48}}}]\n" + clus,
			[]string{`f.yaml:3:47: routes[0].policies.ratelimit: give rules (inline, in the rules file format) or file (a rules file)`}},
		{"inline rule: bad value", pl + "routes: [{cluster: app, policies: {ratelimit: {rules: [{id: a, rate: 1, per: 1s, cost: 0}]}}}]\n" + clus,
			[]string{`f.yaml:3:88: routes[0].policies.ratelimit: rule "a": cost: want at least 1 unit, got 0`}},
		{"inline rule: unknown field", pl + "routes: [{cluster: app, policies: {ratelimit: {rules: [{id: a, rate: 1, per: 1s, burts: 2}]}}}]\n" + clus,
			[]string{`f.yaml:3:82: routes[0].policies.ratelimit: rule "a": unknown field "burts" (want id, key, rate, per, burst, algorithm, cost, shadow, failMode, onMissing, match)`}},
		{"inline rules: not a list", pl + "routes: [{cluster: app, policies: {ratelimit: {rules: {id: a}}}}]\n" + clus,
			[]string{`f.yaml:3:55: routes[0].policies.ratelimit: rules: want a list of rules, got a mapping`}},
		{"inline identity", pl + "routes: [{cluster: app, policies: {ratelimit: {identities: {ip: {header: X-Ip}}, rules: [{id: a, rate: 1, per: 1s}]}}}]\n" + clus,
			[]string{`f.yaml:3:61: routes[0].policies.ratelimit: identities.ip: "ip" is a built-in key part and cannot be redefined`}},
		{"inline rule: unset variable", pl + "routes: [{cluster: app, policies: {ratelimit: {rules: [{id: a, rate: \"${RATE}\", per: 1s}]}}}]\n" + clus,
			[]string{`f.yaml:3:70: routes[0].policies.ratelimit.rules: environment variable RATE is not set`}},
		{"leaky queue too long for Redis", pl + "ratelimit: {store: redis, redis: {addresses: [a:1]}}\nroutes: [{cluster: app, policies: {ratelimit: {rules: [{id: q, rate: 1, per: 1s, algorithm: leaky-queue, burst: 2000000}]}}}]\n" + clus,
			[]string{`f.yaml:4:55: routes[0].policies.ratelimit: rule "q": a leaky-queue burst of 2000000 cannot be kept on Redis (at most 1048576 with store: redis)`}},
		{"file with inline fields", pl + "routes: [{cluster: app, policies: {ratelimit: {file: x.yaml, ipv6_prefix: 48}}}]\n" + clus,
			[]string{`f.yaml:3:54: routes[0].policies.ratelimit.file: cannot read x.yaml: no such file or directory`, `f.yaml:3:75: routes[0].policies.ratelimit.ipv6_prefix: only with inline rules (a rules file sets its own)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, tc.in, noEnv)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}
