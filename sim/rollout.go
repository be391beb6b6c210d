package sim

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// rollout is seed 001's deploy arithmetic: taking k of N servers out (a
// rolling deploy, or Kubernetes' maxSurge/maxUnavailable) leaves the load
// on the rest, whose utilisation goes from u to u·N÷(N−k); with a
// cluster of a gateway config, how long a health-checked rolling restart
// takes and how many requests the checks' detection time fails.
var rollout = Scenario{
	Name:    "rollout",
	Summary: "deploy arithmetic: the utilisation of the servers left while k are out, and a health-checked rolling restart's length and cost",
	Bind: func(f *Flags) Runner {
		var p rolloutParams
		servers := f.Int("servers", 10, Positive, 1e6, "servers sharing the load evenly (with --config: the cluster's endpoints, by weight)")
		util := f.Float("util", 0.7, Fraction, "utilisation of every server while all are in service, 0 to 1")
		out := f.Int("out", 2, Positive, 1e6, "servers taken out at a time; the table shows 1 to this many")
		surge := kubeFlag(f, "max-surge", "Kubernetes maxSurge: `N or N%` (of --servers, rounded up) new pods above the count; instead of --out")
		unavail := kubeFlag(f, "max-unavailable", "Kubernetes maxUnavailable: `N or N%` (rounded down) pods out at once; instead of --out")
		knee := f.Float("knee-util", 0, Fraction, "the knee as a utilisation (spillway load's knee rate ÷ the capacity), for warnings; 0: none")
		fs := f.FlagSet()
		config := fs.String("config", "", "a gateway config `FILE`: time a rolling restart of --cluster under its health checks")
		cluster := fs.String("cluster", "", "--config: the cluster's `NAME` (optional when the file has one)")
		drain := f.Float("drain", 5, NonNegative, "--config: seconds an endpoint is drained before its restart")
		restart := f.Float("restart", 10, NonNegative, "--config: seconds from stop to serving again (before the checks see it)")
		rate := f.Float("rate", 100, Positive, "--config: requests per second through the cluster")
		return func() (*Report, error) {
			given := map[string]bool{}
			fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
			p = rolloutParams{servers: *servers, util: *util, out: *out, knee: *knee, config: *config, cluster: *cluster,
				drain: *drain, restart: *restart, rate: *rate, surge: *surge, unavail: *unavail, given: given}
			return runRollout(&p)
		}
	},
}

type rolloutParams struct {
	servers                      int
	util, knee                   float64
	out                          int
	surge, unavail               kubeValue
	config, cluster              string
	drain, restart, rate         float64
	given                        map[string]bool
	weights                      []float64 // the cluster's endpoint weights; nil: --servers equal ones
	batch                        int       // servers restarted at once
	kube                         bool
	surgeCount, unavailableCount int
}

// RestUtilisation is the utilisation of the servers left in service when k
// of n, each at u, are taken out and the rest carry their load: u·n÷(n−k)
// (infinite when none is left).
func RestUtilisation(u float64, n, k int) float64 {
	if k >= n {
		return math.Inf(1)
	}
	return u * float64(n) / float64(n-k)
}

// weightedRest is RestUtilisation with weighted servers (capacity in
// proportion to weight), the k heaviest out: the worst batch.
func weightedRest(u float64, weights []float64, k int) float64 {
	sorted := append([]float64(nil), weights...)
	var total, outW float64
	for _, w := range sorted {
		total += w
	}
	for range min(k, len(sorted)) {
		i := heaviest(sorted)
		outW += sorted[i]
		sorted[i] = -1
	}
	if k >= len(weights) || total-outW <= 0 {
		return math.Inf(1)
	}
	return u * total / (total - outW)
}

func heaviest(w []float64) int {
	best := 0
	for i, x := range w {
		if x > w[best] {
			best = i
		}
	}
	return best
}

func runRollout(p *rolloutParams) (*Report, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	var cl *rolloutCluster
	if p.config != "" {
		var err error
		if cl, err = loadRolloutCluster(p); err != nil {
			return nil, err
		}
		p.weights = cl.weights
	}
	n := p.servers
	if p.weights != nil {
		n = len(p.weights)
	}
	if err := p.fixKube(n); err != nil {
		return nil, err
	}
	r := &Report{}
	p.rows(r, n)
	if cl != nil {
		cl.report(r, p, n)
	}
	return r, nil
}

// check refuses flags that do not go together, and fixes the batch.
func (p *rolloutParams) check() error {
	p.kube = p.given["max-surge"] || p.given["max-unavailable"]
	if p.kube && p.given["out"] {
		return Badf("out", "give either --out or --max-surge/--max-unavailable")
	}
	if p.config == "" {
		for _, name := range []string{"cluster", "drain", "restart", "rate"} {
			if p.given[name] {
				return Badf(name, "needs --config")
			}
		}
	}
	p.batch = p.out
	return nil
}

// fixKube turns the Kubernetes settings into counts of n (Kubernetes'
// defaults, 25% each, for the one not given).
func (p *rolloutParams) fixKube(n int) error {
	if !p.kube {
		return nil
	}
	if !p.given["max-surge"] {
		p.surge = kubeValue{n: 25, percent: true}
	}
	if !p.given["max-unavailable"] {
		p.unavail = kubeValue{n: 25, percent: true}
	}
	p.surgeCount, p.unavailableCount = p.surge.count(n, true), p.unavail.count(n, false)
	if p.surgeCount == 0 && p.unavailableCount == 0 {
		return Badf("max-unavailable", "may not be 0 when --max-surge is 0 (Kubernetes refuses it too)")
	}
	p.batch = p.surgeCount + p.unavailableCount
	return nil
}

// rows prints the utilisation table for n servers: 0 to --out of them out
// (at most all), or Kubernetes' worst.
func (p *rolloutParams) rows(r *Report, n int) {
	outs := make([]int, 0, p.out+1)
	if p.kube {
		r.Println(fmt.Sprintf("Kubernetes rolling update of %d pods: maxSurge %s = %d, maxUnavailable %s = %d: "+
			"at most %d pods, at least %d serving (a surge pod serves once ready)",
			n, p.surge, p.surgeCount, p.unavail, p.unavailableCount, n+p.surgeCount, max(0, n-p.unavailableCount)))
		outs = append(outs, 0, p.unavailableCount)
	} else {
		for k := range min(p.out, n) + 1 {
			outs = append(outs, k)
		}
	}
	r.Println(Int(n) + " servers at " + pct(p.util) + " utilisation; the rest carry the load of those out: u·N÷(N−k)")
	t := r.Table("utilisation", "out", "serving", "util_rest", "above_knee", "over_capacity")
	r.Println("out  serving  util of the rest")
	for _, k := range outs {
		u := RestUtilisation(p.util, n, k)
		if p.weights != nil {
			u = weightedRest(p.util, p.weights, k)
		}
		note := ""
		above := p.knee > 0 && u > p.knee
		switch {
		case math.IsInf(u, 1):
			note = "  none serving: an outage"
		case u >= 1:
			note = "  OVER CAPACITY: the rest cannot carry the load"
		case above:
			note = "  WARNING: above the knee (" + pct(p.knee) + "): expect queueing, p99 climbing, shedding"
		}
		util := "-"
		if !math.IsInf(u, 1) {
			util = pct(u)
		}
		r.Println(PadStart(Int(k), 3) + PadStart(Int(max(0, n-k)), 9) + PadStart(util, 18) + note)
		t.Add(k, max(0, n-k), u, above, u >= 1)
	}
	if p.weights != nil {
		r.Println("(weighted: capacity in proportion to weight, the heaviest endpoints out: the worst batch)")
	}
}

// pct formats a share as a percentage with one decimal: 0.7778 → 77.8%.
func pct(x float64) string { return Fixed(100*x, 1) + "%" }

// kubeValue is a Kubernetes int-or-percent: "2" or "25%".
type kubeValue struct {
	n       int
	percent bool
}

func kubeFlag(f *Flags, name, usage string) *kubeValue {
	v := &kubeValue{n: 25, percent: true}
	f.FlagSet().Var(v, name, usage)
	return v
}

func (v kubeValue) String() string {
	if v.percent {
		return Int(v.n) + "%"
	}
	return Int(v.n)
}

func (v *kubeValue) Set(s string) error {
	s = strings.TrimSpace(s)
	num, percent := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(num)
	switch {
	case err != nil:
		return fmt.Errorf("want a whole number or a percentage such as 25%%")
	case n < 0:
		return fmt.Errorf("must not be negative")
	case percent && n > 100:
		return fmt.Errorf("must be at most 100%%")
	case n > 1e6:
		return fmt.Errorf("must be at most 1000000")
	}
	*v = kubeValue{n: n, percent: percent}
	return nil
}

// count is v of n pods: a percentage rounded up (maxSurge) or down
// (maxUnavailable), as Kubernetes does.
func (v kubeValue) count(n int, up bool) int {
	if !v.percent {
		return v.n
	}
	if up {
		return (v.n*n + 99) / 100
	}
	return v.n * n / 100
}
