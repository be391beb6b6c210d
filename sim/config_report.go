package sim

import (
	"io"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/spillwayhq/spillway/chart"
	"github.com/spillwayhq/spillway/loadgen"
	"github.com/spillwayhq/spillway/retry"
)

// clientAnswer is r's client with its answer (status 0: it timed out):
// done, or it retries by its policy.
func (s *configSim) clientAnswer(r *cfgReq, now float64, status int, reason string) {
	c := r.call
	if status >= 200 && status < 300 {
		s.endCall(c, now, status, "")
		return
	}
	if s.client != nil {
		delay, v := s.client.Next(retry.Attempt{N: c.n, Now: now, Prev: c.prev, Deadline: c.deadline, After: -1}, s.misc)
		if v == retry.Retry && now+delay < c.deadline {
			c.prev = delay
			s.tallies[c.step].res.Retries++
			s.ev.push(now+delay, cfgClientRetry, &r.g)
			return
		}
	}
	s.endCall(c, now, status, reason)
}

// endCall counts call c, ended at now with status (0: timed out) and the
// gateway's reason code, in its step.
func (s *configSim) endCall(c *cfgCall, now float64, status int, reason string) {
	s.open--
	t := s.tallies[c.step]
	lat := now - c.sent
	t.lat = append(t.lat, lat)
	t.res.Statuses[status]++
	switch {
	case status >= 200 && status < 300:
		t.res.OK++
		t.res.Good++
		t.good = append(t.good, lat)
		cr := t.res.Classes[c.name]
		cr.Good++
		t.res.Classes[c.name] = cr
		s.series.count(now).good++
	case status == 0:
		t.res.Timeouts++
	}
	if reason != "" {
		if t.res.Refusals[c.name] == nil {
			t.res.Refusals[c.name] = map[string]int{}
		}
		t.res.Refusals[c.name][reason]++
	}
}

// cfgTally is one step's counts as they come in.
type cfgTally struct {
	res       loadgen.StepResult
	lat, good []float64 // seconds: every call's latency, the good ones'
}

func newCfgTally(i int, st loadgen.Step) *cfgTally {
	return &cfgTally{res: loadgen.StepResult{Index: i, Rate: st.Rate, Duration: st.Duration, Elapsed: st.Duration,
		Statuses: map[int]int{}, Refusals: map[string]map[string]int{}, Classes: map[string]loadgen.ClassResult{}}}
}

func (t *cfgTally) offer(class string) {
	t.res.Offered++
	t.res.Sent++
	cr := t.res.Classes[class]
	cr.Offered++
	t.res.Classes[class] = cr
}

// tallyAt returns the step whose window holds now (the tail after the
// last step's end).
func (s *configSim) tallyAt(now float64) *loadgen.StepResult {
	i, _ := slices.BinarySearch(s.stepEnd, now)
	for i < len(s.stepEnd) && s.stepEnd[i] <= now {
		i++
	}
	if i >= len(s.tallies) {
		return &s.series.tail
	}
	return &s.tallies[i].res
}

func (s *configSim) result() loadgen.Result {
	var res loadgen.Result
	for _, t := range s.tallies {
		r := t.res
		r.Failed = r.Offered - r.Good
		secs := r.Elapsed.Seconds()
		r.Throughput, r.Goodput = float64(r.OK)/secs, float64(r.Good)/secs
		r.Latency, r.GoodLatency = quantiles(t.lat), quantiles(t.good)
		res.Steps = append(res.Steps, r)
	}
	res.TailAttempts = s.series.tail.Attempts
	return res
}

// quantiles of v (seconds), nearest rank.
func quantiles(v []float64) loadgen.Quantiles {
	slices.Sort(v)
	d := func(q float64) time.Duration { return time.Duration(math.Round(NearestRank(v, q) * 1e9)) }
	return loadgen.Quantiles{P50: d(0.5), P90: d(0.9), P99: d(0.99), P999: d(0.999), Max: d(1)}
}

// ConfigSeries is the policies' state second by second: at T (seconds
// from the start) the counts of the second that ended then, and the state
// at that instant.
type ConfigSeries struct {
	T         []float64
	Attempts  []float64            // client attempts sent in the second
	Good      []float64            // calls that ended good in the second
	GwRetries []float64            // the gateway's retries in the second
	Rejects   map[string][]float64 // the gateway's refusals in the second, by reason code
	Limit     map[string][]float64 // by cluster: the admission limit
	InFlight  map[string][]float64 // by cluster: requests holding a place
	Queue     map[string][]float64 // by cluster: requests waiting in the admission queue
	Breaker   map[string][]float64 // by cluster: 0 closed, 1 open, 2 half-open
	Budget    map[string][]float64 // by route: the retry budget's tokens
}

// configMaxSamples bounds the series (a day of seconds is more than a
// simulation runs for).
const configMaxSamples = 100_000

type cfgSeries struct {
	out  ConfigSeries
	cur  cfgSecond
	tail loadgen.StepResult // attempts after the last step
}

type cfgSecond struct {
	attempts, good, gwRetries int
	rejects                   map[string]int
}

func (c *cfgSecond) reject(reason string) {
	if c.rejects == nil {
		c.rejects = map[string]int{}
	}
	c.rejects[reason]++
}

func (s *cfgSeries) count(float64) *cfgSecond { return &s.cur }

// sample records the second ending at now and schedules the next.
func (s *configSim) sample(now float64) {
	o, c := &s.series.out, &s.series.cur
	if len(o.T) >= configMaxSamples {
		return
	}
	if o.Rejects == nil {
		o.Rejects, o.Limit, o.InFlight, o.Queue = map[string][]float64{}, map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
		o.Breaker, o.Budget = map[string][]float64{}, map[string][]float64{}
	}
	n := len(o.T)
	o.T = append(o.T, now)
	o.Attempts, o.Good = append(o.Attempts, float64(c.attempts)), append(o.Good, float64(c.good))
	o.GwRetries = append(o.GwRetries, float64(c.gwRetries))
	for reason, k := range c.rejects {
		if o.Rejects[reason] == nil {
			o.Rejects[reason] = make([]float64, n, n+1)
		}
		o.Rejects[reason] = append(o.Rejects[reason], float64(k))
	}
	for reason, v := range o.Rejects {
		if len(v) == n {
			o.Rejects[reason] = append(v, 0)
		}
	}
	for name, cl := range s.clusters {
		if g := cl.gate; g != nil {
			o.Limit[name] = append(o.Limit[name], float64(g.lim.Limit()))
			o.InFlight[name] = append(o.InFlight[name], float64(g.lim.InFlight()))
			o.Queue[name] = append(o.Queue[name], float64(g.lim.QueueLen()))
		}
		if cl.brk != nil {
			o.Breaker[name] = append(o.Breaker[name], float64(cl.brk.Snapshot().State))
		}
	}
	for _, rt := range s.routes {
		if rt.budget != nil {
			o.Budget[rt.r.Name] = append(o.Budget[rt.r.Name], rt.budget.Tokens())
		}
	}
	*c = cfgSecond{}
	if s.sending || s.open > 0 {
		s.ev.push(now+1, cfgSample, nil)
	}
}

// check runs cluster cl's active checks at now and schedules the next.
func (s *configSim) check(cl *cfgCluster, tag *predJob, now float64) {
	h := cl.health
	for _, ep := range cl.order {
		if ep.srv.workers(now) > 0 {
			ep.fails, ep.rises = 0, ep.rises+1
			if !ep.healthy && ep.rises >= h.rise {
				ep.healthy = true
				cl.set.SetHealthy(now, ep.addr, true)
			}
		} else {
			ep.fails, ep.rises = ep.fails+1, 0
			if ep.healthy && ep.fails >= h.fall {
				ep.healthy = false
				cl.set.SetHealthy(now, ep.addr, false)
			}
		}
	}
	if s.sending || s.open > 0 {
		s.ev.push(now+h.interval, cfgCheck, tag)
	}
}

// WriteConfigSVG draws the series: goodput and attempts, each cluster's
// admission limit against its requests in flight and queued, the
// refusals by reason, and the breakers' states and retry budgets.
func WriteConfigSVG(w io.Writer, s *ConfigSeries) error {
	load := &chart.Chart{Title: "Load and goodput", XLabel: "time (s)", YLabel: "per second"}
	load.Line("client attempts", s.T, s.Attempts)
	load.Line("good", s.T, s.Good)
	load.Line("gateway retries", s.T, s.GwRetries)
	charts := []*chart.Chart{load}
	if len(s.Limit) > 0 {
		adm := &chart.Chart{Title: "Admission: limit, in flight, queued", XLabel: "time (s)", YLabel: "requests"}
		for _, name := range slices.Sorted(maps.Keys(s.Limit)) {
			adm.Line(name+" limit", s.T, s.Limit[name])
			adm.Line(name+" in flight", s.T, s.InFlight[name])
			adm.Line(name+" queued", s.T, s.Queue[name])
		}
		charts = append(charts, adm)
	}
	if len(s.Rejects) > 0 {
		rej := &chart.Chart{Title: "Refusals by reason", XLabel: "time (s)", YLabel: "per second"}
		for _, reason := range slices.Sorted(maps.Keys(s.Rejects)) {
			rej.Line(reason, s.T, s.Rejects[reason])
		}
		charts = append(charts, rej)
	}
	if len(s.Breaker)+len(s.Budget) > 0 {
		st := &chart.Chart{Title: "Breaker state (0 closed, 1 open, 2 half-open) and retry budget tokens", XLabel: "time (s)"}
		for _, name := range slices.Sorted(maps.Keys(s.Breaker)) {
			st.Line(name+" breaker", s.T, s.Breaker[name])
		}
		for _, name := range slices.Sorted(maps.Keys(s.Budget)) {
			st.Line(name+" budget", s.T, s.Budget[name])
		}
		charts = append(charts, st)
	}
	return chart.WriteSVG(w, charts...)
}
