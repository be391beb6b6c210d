package demo

import (
	"context"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/loadgen"
)

// overloadLanes are the four configurations of the overload experiment.
// The limits are the seed's (overload_policies: 50 inside at most; 20 for
// non-critical requests under priority shedding), as the gateway's
// admission: in-flight at the gateway is inside the backend, queue
// included.
func overloadLanes(p Plan) []lane {
	be := func(seed uint64) backend.Config {
		return backend.Config{Workers: p.Workers, Queue: p.Queue, Seed: seed,
			Service: backend.Dist{Kind: backend.Exponential, Mean: p.Service}}
	}
	return []lane{
		{key: "none", name: "no protection", backend: be(p.Seed + 1)},
		{key: "bounded", name: "bounded, fail fast", backend: be(p.Seed + 2), // one bound for every class
			admission: "{algorithm: fixed, initial_limit: 50, shares: {critical: 1, default: 1, sheddable: 1}, queue: {discipline: reject}}"},
		{key: "priority", name: "priority shedding", backend: be(p.Seed + 3),
			admission: "{algorithm: fixed, initial_limit: 50, shares: {critical: 1, sheddable: 0.4}, queue: {discipline: reject}}"},
		{key: "adaptive", name: "adaptive + priority", backend: be(p.Seed + 4),
			// tolerance 5: one exponential service time's p99 is 4.6 × its mean, so a
			// latency rise below 5× the no-load level is noise, not a queue.
			admission: "{algorithm: gradient2, initial_limit: 50, min_limit: 10, max_limit: 200, tolerance: 5, shares: {critical: 1, sheddable: 0.4}, queue: {discipline: reject}}"},
	}
}

// Row is one configuration at one load: measured over HTTP, or simulated.
type Row struct {
	Lane       string  // key: none, bounded, priority, adaptive; immediate, budget
	Load       float64 // offered, requests per second
	GoodPerSec float64
	P99        time.Duration // of the good answers
	CriticalOK float64       // share of critical requests answered in time, in [0, 1]; −1 if none
	Offered    int           // arrivals in the level
	Good       int           // of which answered 200 in time
	Rejected   int           // shed by the gateway's admission (Spillway-Reason admit:…), or by the simulated one
	Invalid    bool          // the load generator was late (send lag)
	Partial    bool          // cut short (Ctrl-C)
}

// runOverload runs every load level of the plan for the lanes on st, each
// from an empty system (fresh backends and admission), the lanes at once,
// and calls level with each level's rows. It returns the rows in (load,
// lane) order as far as it got.
func runOverload(ctx context.Context, st *stack, p Plan, lanes []lane, level func([]Row)) ([]Row, error) {
	var rows []Row
	for i, load := range p.Loads {
		if ctx.Err() != nil {
			break
		}
		if i > 0 {
			if err := st.swap(lanes); err != nil {
				return rows, err
			}
		}
		lr, err := runLevel(ctx, st, p, lanes, load, uint64(i))
		if err != nil {
			return rows, err
		}
		level(lr)
		rows = append(rows, lr...)
	}
	return rows, nil
}

// runLevel runs one load level on st, every lane's load at once.
func runLevel(ctx context.Context, st *stack, p Plan, lanes []lane, load float64, n uint64) ([]Row, error) {
	results, err := st.runLanes(ctx, lanes, func(i int, l lane) loadgen.Config {
		return p.loadConfig(st.url(l.key), []loadgen.Step{{Rate: load, Duration: p.Level}}, p.Seed+100*n+uint64(i))
	})
	var rows []Row
	for i, r := range results {
		if len(r.Steps) > 0 {
			rows = append(rows, rowOf(lanes[i].key, load, r.Steps[0]))
		}
	}
	return rows, err
}

// loadConfig is the clients of the overload experiment: Poisson arrivals,
// the plan's class mix and timeout, no retries.
func (p Plan) loadConfig(url string, steps []loadgen.Step, seed uint64) loadgen.Config {
	return loadgen.Config{
		Targets:  []loadgen.Target{{URL: url}},
		Steps:    steps,
		Arrivals: loadgen.Poisson,
		Classes:  []loadgen.Class{{Name: "critical", Share: p.Critical}, {Name: "sheddable", Share: 1 - p.Critical}},
		Timeout:  p.Timeout,
		Seed:     seed,
	}
}

// rowOf summarises a measured step.
func rowOf(key string, load float64, s loadgen.StepResult) Row {
	r := Row{Lane: key, Load: load, P99: s.GoodLatency.P99, Invalid: s.Invalid, Partial: s.Partial, CriticalOK: -1, Offered: s.Offered, Good: s.Good}
	if sec := s.Elapsed.Seconds(); sec > 0 {
		r.GoodPerSec = float64(s.Good) / sec
	}
	if c, ok := s.Classes["critical"]; ok && c.Offered > 0 {
		r.CriticalOK = float64(c.Good) / float64(c.Offered)
	}
	for _, reasons := range s.Refusals {
		for reason, n := range reasons {
			if strings.HasPrefix(reason, "admit:") { // shed by admission (not a 504 upstream-timeout)
				r.Rejected += n
			}
		}
	}
	return r
}
