package sim

import (
	"strings"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/health"
)

// rolloutCluster is what a rolling restart's arithmetic reads from one
// cluster of a gateway config.
type rolloutCluster struct {
	name, file string
	weights    []float64 // the static endpoints' weights; nil with discovery
	active     bool
	timing     health.CheckTiming // the active check's, defaults applied
	outlier    int                // consecutive gateway failures that eject; 0: no outlier detection
}

// loadRolloutCluster loads p.config with the gateway's own loader and
// picks p.cluster (or the only cluster).
func loadRolloutCluster(p *rolloutParams) (*rolloutCluster, error) {
	cfg, err := config.Load(p.config)
	if err != nil {
		return nil, Badf("config", "%s", oneLine(err.Error()))
	}
	var c *config.Cluster
	switch {
	case p.cluster != "":
		if c = cfg.Cluster(p.cluster); c == nil {
			return nil, Badf("cluster", "%s has no cluster %q (it has %s)", p.config, p.cluster, clusterNames(cfg))
		}
	case len(cfg.Clusters) == 1:
		c = &cfg.Clusters[0]
	default:
		return nil, Badf("cluster", "%s has %d clusters: name one (%s)", p.config, len(cfg.Clusters), clusterNames(cfg))
	}
	rc := &rolloutCluster{name: c.Name, file: p.config}
	for _, e := range c.Endpoints {
		rc.weights = append(rc.weights, float64(e.Weight))
	}
	switch {
	case len(rc.weights) == 0 && c.Discovery == nil:
		return nil, Badf("cluster", "cluster %q has no endpoints", c.Name)
	case len(rc.weights) > 0 && p.given["servers"] && p.servers != len(rc.weights):
		return nil, Badf("servers", "cluster %q lists %d endpoints; leave --servers out (it is for clusters with discovery)",
			c.Name, len(rc.weights))
	}
	if a, ok := c.ActiveConfig(); ok {
		rc.active, rc.timing = true, a.Timing()
	}
	if o := c.Health.Outlier; o != nil && o.ConsecutiveGatewayFailure > 0 {
		rc.outlier = o.ConsecutiveGatewayFailure
	}
	return rc, nil
}

func clusterNames(cfg *config.Config) string {
	var names []string
	for _, c := range cfg.Clusters {
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// oneLine is the first line of a loader's error, with the number of
// problems left out: a usage error is one line.
func oneLine(s string) string {
	first, rest, more := strings.Cut(s, "\n")
	if more && rest != "" {
		return first + " (and more: spillway validate lists them)"
	}
	return first
}

// batchShare is the share of the traffic on the k heaviest of weights (on
// k of n equal servers without weights).
func batchShare(weights []float64, n, k int) float64 {
	k = min(k, n)
	if weights == nil {
		return float64(k) / float64(n)
	}
	rest := weightedRest(1, weights, k) // total ÷ (total − out)
	return 1 - 1/rest
}

// report prints the rolling restart's length and what the detection time
// costs, for n endpoints restarted p.batch at a time.
func (c *rolloutCluster) report(r *Report, p *rolloutParams, n int) {
	k := min(max(p.batch, 1), n)
	batches := (n + k - 1) / k
	r.Println("")
	r.Println("cluster " + c.name + " of " + c.file + ": " + Int(n) + " endpoints" + c.checkText())
	perBatch := p.drain + p.restart
	recovery := "restart " + Num(p.restart) + "s"
	if c.active {
		perBatch += c.timing.Recovery()
		recovery += " + rise " + Int(c.timing.Rise) + " × interval " + Num(c.timing.Interval) + "s"
	}
	total := float64(batches) * perBatch
	r.Println("rolling restart, " + Int(k) + " at a time: " + Int(batches) + " batches × (drain " + Num(p.drain) + "s + " +
		recovery + ") = " + Int(batches) + " × " + Num(perBatch) + "s = " + Num(total) + "s")
	if p.kube {
		r.Println("(batches in sequence: Kubernetes overlaps a wave's drain with the next one's start, so at most this)")
	}
	share := batchShare(c.weights, n, k)
	t := r.Table("restart", "cluster", "endpoints", "batch", "batches", "batch_s", "total_s",
		"detect_worst_s", "detect_mean_s", "failed_per_batch", "failed_rollout")
	worst, mean, perB, roll := c.failures(r, p, n, share)
	t.Add(c.name, n, k, batches, perBatch, total, worst, mean, perB, roll)
}

// failures prints how many requests a batch restarted without a drain
// fails before the checks notice, and returns the detection times and
// the counts (worst per batch, whole rollout).
func (c *rolloutCluster) failures(r *Report, p *rolloutParams, n int, share float64) (worst, mean, perBatch, rollout float64) {
	switch {
	case c.active:
		worst, mean = c.timing.WorstDetection(), c.timing.MeanDetection()
		r.Println("a dead endpoint is noticed after fall " + Int(c.timing.Fall) + " × interval " + Num(c.timing.Interval) +
			"s + timeout " + Num(c.timing.Timeout) + "s = " + Num(worst) + "s at worst (" + Num(mean) + "s on average)")
		perBatch, rollout = p.rate*share*worst, p.rate*worst
		r.Println("restarted without a drain, a batch fails rate × its share × detection = " + Num(p.rate) + "/s × " +
			pct(share) + " × " + Num(worst) + "s")
		r.Println("= " + Num(round1(perBatch)) + " requests at worst (" + Num(round1(p.rate*share*mean)) +
			" on average); the whole rollout " + Num(round1(rollout)))
	case c.outlier > 0:
		perBatch = float64(c.outlier)
		rollout = perBatch * float64(n)
		r.Println("no active check: outlier detection ejects a dead endpoint after " + Int(c.outlier) +
			" gateway failures in a row: about that many failed requests per endpoint (refused connections fail fast)")
	default:
		perBatch, rollout = p.rate*share*p.restart, p.rate*p.restart
		r.Println("no health checks: a dead endpoint keeps its share until it is back: " + Num(p.rate) + "/s × " + pct(share) +
			" × restart " + Num(p.restart) + "s = " + Num(round1(perBatch)) + " failed requests a batch; the rollout " +
			Num(round1(rollout)))
	}
	r.Println("drained first (POST /clusters/" + c.name + "/endpoints/ADDR/drain on the admin API, or a preStop hook),")
	r.Println("none fail; the route's retries (connect-failure) may save some of the others within their budget")
	return worst, mean, perBatch, rollout
}

func (c *rolloutCluster) checkText() string {
	if !c.active {
		return "; no active health check"
	}
	return "; active check every " + Num(c.timing.Interval) + "s, timeout " + Num(c.timing.Timeout) + "s, fall " +
		Int(c.timing.Fall) + ", rise " + Int(c.timing.Rise)
}

// round1 rounds to one decimal, for counts of requests.
func round1(x float64) float64 { return JSRound(x*10) / 10 }
