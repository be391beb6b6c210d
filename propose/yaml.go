package propose

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/loadgen"
)

// YAML is the proposal as a complete minimal gateway configuration: a
// listener, the route with its timeout and rate-limit rule, the cluster
// with the tested endpoint and its admission limit and queue. Comments give
// each number's formula and inputs.
func (p *Proposal) YAML() string {
	var b strings.Builder
	p.header(&b)
	fmt.Fprintf(&b, "version: 1\nlisteners:\n  - address: %q   # where the gateway listens: change to taste\n", p.Listen)
	p.store(&b)
	p.route(&b)
	p.cluster(&b)
	return b.String()
}

func (p *Proposal) header(b *strings.Builder) {
	how := "the ramp's step"
	if len(p.Knee.Probes) > 0 {
		how = fmt.Sprintf("bisected to 5%% in %d probes", len(p.Knee.Probes))
	}
	fmt.Fprintf(b, "# Proposed by spillway load --propose for %s: knee %s req/s (%s).\n", p.Source, num(p.Knee.Rate), how)
	if p.Knee.Bounded {
		b.WriteString("# The ramp did not reach the knee (every step passed): the service sustains at least this\n" +
			"# much, so these limits are below its capacity. Ramp higher to find it.\n")
	}
	fmt.Fprintf(b, "# Measured: at the lowest step (%s req/s) p50 %v; at the knee (%s req/s) %s %v, p99 %v.\n",
		num(p.BaseStep.Rate), ms(p.Service), num(p.KneeStep.Rate), p.LatencyName, ms(p.Latency), ms(p.P99))
	b.WriteString("# Check it: spillway validate FILE. Replay it: spillway sim config FILE.\n")
}

func (p *Proposal) store(b *strings.Builder) {
	if p.Global {
		fmt.Fprintf(b, "ratelimit:\n  store: redis   # one count across every gateway on this Redis: the limit is global\n"+
			"  redis: {addresses: [%q]}\n", p.Redis)
		return
	}
	b.WriteString("ratelimit:\n  store: memory   # each gateway counts alone: the limit is per gateway instance\n")
}

func (p *Proposal) route(b *strings.Builder) {
	fmt.Fprintf(b, "routes:\n  - name: %s\n    cluster: %s\n", p.Route, p.Route)
	fmt.Fprintf(b, "    timeouts:\n"+
		"      # %g × the p99 at the knee (%v), rounded up to 2 digits: an exchange slower than twice the\n"+
		"      # worst the service showed at full load is not coming back in time (answered 504).\n"+
		"      request: %v\n", TimeoutFactor, ms(p.P99), p.Timeout)
	b.WriteString("    policies:\n      ratelimit:\n        rules:\n")
	fmt.Fprintf(b, "          # safe rate = %g × the knee = %g × %s = %s req/s for the whole fleet",
		loadgen.SafeShare, loadgen.SafeShare, num(p.Knee.Rate), num(round2(p.Safe)))
	switch {
	case p.Global:
		b.WriteString(";\n          # global: every gateway counts on the shared Redis, so the rule is the safe rate itself.\n")
	case p.Replicas > 1:
		fmt.Fprintf(b, ";\n          # per gateway instance (memory store, %d replicas): %s ÷ %d, rounded down. With\n"+
			"          # store: redis the count is global: set rate to %s there.\n", p.Replicas, num(round2(p.Safe)), p.Replicas, num(floorSig(p.Safe, 3)))
	default:
		b.WriteString(";\n          # one gateway instance (memory store). With N gateways on the memory store each takes\n" +
			"          # rate ÷ N (spillway load --propose --replicas N); on store: redis the count is global.\n")
	}
	b.WriteString("          # No key: one count for every client. Burst: one second's worth (the default).\n")
	fmt.Fprintf(b, "          - {id: %s-safe-rate, rate: %s, per: 1s}\n", p.Route, num(p.RateLimit))
}

func (p *Proposal) cluster(b *strings.Builder) {
	fmt.Fprintf(b, "clusters:\n  - name: %s\n    endpoints: [%q]\n", p.Route, p.Endpoint)
	if p.TLS {
		b.WriteString("    tls: {}   # the service was tested over https\n")
	}
	b.WriteString("    admission:\n")
	fmt.Fprintf(b, "      # Little's law: in flight at the knee = knee rate × %s latency there = %s/s × %v = %s;\n",
		p.LatencyName, num(p.Knee.Rate), ms(p.Latency), num(round2(p.InFlight)))
	if p.Replicas > 1 {
		fmt.Fprintf(b, "      # 10%% below it, per gateway instance (admission counts per gateway, %d replicas):\n"+
			"      # ⌊0.9 × %s ÷ %d⌋ = %d.\n", p.Replicas, num(round2(p.InFlight)), p.Replicas, p.Concurrency)
	} else {
		fmt.Fprintf(b, "      # 10%% below it, per gateway instance: ⌊0.9 × %s⌋ = %d.\n", num(round2(p.InFlight)), p.Concurrency)
	}
	fmt.Fprintf(b, "      algorithm: fixed\n      initial_limit: %d\n", p.Concurrency)
	b.WriteString("      # The route's requests are class default: let them fill the whole limit (the default\n" +
		"      # share is 0.9); sheddable ones, marked by a trusted peer, half of it.\n" +
		"      shares: {critical: 1, default: 1, sheddable: 0.5}\n")
	fmt.Fprintf(b, "      queue:\n        discipline: fifo\n"+
		"        # %g × the service time (the p50 at the lowest step, %v, where nothing queues), rounded\n"+
		"        # up: a request let in from the queue ends within about 3 service times, the bound the\n"+
		"        # knee allowed its p99; waiting longer, it would be too late anyway.\n"+
		"        max_wait: %v\n", WaitFactor, ms(p.Service), p.MaxWait)
}

// num formats a rate or a count without trailing zeros.
func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// round2 rounds x to two decimals, for comments.
func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// ms rounds a measured latency to a tenth of a millisecond, for comments.
func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
