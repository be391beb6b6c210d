package demo

import (
	"context"
	"time"

	"github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/loadgen"
)

// dipLanes are the two client policies of the capacity dip: immediate
// retries against a backend that works on abandoned requests, and
// budgeted retries with backoff against one that drops them.
func dipLanes(p Plan) []lane {
	be := func(seed uint64, honor bool) backend.Config {
		return backend.Config{Workers: p.Workers, Queue: p.Queue, Seed: seed, HonorCancel: honor,
			Service:  backend.Dist{Kind: backend.Exponential, Mean: p.Service},
			Schedule: []backend.Window{{From: p.DipFrom, To: p.DipTo, Workers: p.DipWorkers}}}
	}
	return []lane{
		{key: "immediate", name: "immediate retries", backend: be(p.Seed+11, false)},
		{key: "budget", name: "budget + drop expired", backend: be(p.Seed+12, true)},
	}
}

// Series is one dip lane over time, one point a second.
type Series struct {
	Lane      string
	Seconds   []float64
	Attempts  []float64 // attempts sent in the second: the load the gateway saw
	Good      []float64 // calls of the second that succeeded in time
	LoadInDip float64   // mean attempts a second during the dip
	LoadAfter float64   // mean attempts a second from Plan.LoadAfter to the end
	Recovery  float64   // seconds after the dip until goodput stayed ≥ 90% of the new calls (see recovery); −1: never
	Late      int       // seconds (steps) in which the load generator was late: send lag p99 above 5 ms
	Partial   bool
}

// clientPolicy is the lane's retry policy.
func (p Plan) clientPolicy(key string) loadgen.ClientPolicy {
	if key == "immediate" {
		return loadgen.ClientPolicy{Retry: loadgen.RetryImmediate, Retries: p.Retries}
	}
	return loadgen.ClientPolicy{Retry: loadgen.RetryBudget, Retries: p.Retries, BudgetRatio: p.BudgetRatio,
		BackoffBase: p.BackoffBase, BackoffCap: p.BackoffCap}
}

// runDip runs both dip lanes at once on st, whose backends it replaces with
// the dip's (their capacity schedule starts now).
func runDip(ctx context.Context, st *stack, p Plan) ([]Series, error) {
	lanes := dipLanes(p)
	if err := st.swap(lanes); err != nil {
		return nil, err
	}
	n := int(p.DipEnd / time.Second)
	steps := make([]loadgen.Step, n)
	for i := range steps {
		steps[i] = loadgen.Step{Rate: p.NewRate, Duration: time.Second}
	}
	results, err := st.runLanes(ctx, lanes, func(i int, l lane) loadgen.Config {
		cfg := p.loadConfig(st.url(l.key), steps, p.Seed+1000+uint64(i))
		cfg.Client = p.clientPolicy(l.key)
		return cfg
	})
	out := make([]Series, len(lanes))
	for i, r := range results {
		out[i] = p.seriesOf(lanes[i].key, r.Steps)
	}
	return out, err
}

// seriesOf turns one-second steps into a Series.
func (p Plan) seriesOf(key string, steps []loadgen.StepResult) Series {
	s := Series{Lane: key}
	var offered []float64
	for i, st := range steps {
		offered = append(offered, float64(st.Offered))
		s.Seconds = append(s.Seconds, float64(i))
		s.Attempts = append(s.Attempts, float64(st.Attempts))
		s.Good = append(s.Good, float64(st.Good))
		if st.Invalid {
			s.Late++
		}
		s.Partial = s.Partial || st.Partial
	}
	s.LoadInDip = mean(s.Attempts, int(p.DipFrom/time.Second), int(p.DipTo/time.Second))
	s.LoadAfter = mean(s.Attempts, int(p.LoadAfter/time.Second), len(s.Attempts))
	s.Recovery = recovery(s.Good, offered, int(p.DipTo/time.Second), int(p.recoveryWindow()/time.Second))
	return s
}

// mean is the mean of v[from:to] (clamped to v); 0 when empty.
func mean(v []float64, from, to int) float64 {
	to = min(to, len(v))
	if from >= to {
		return 0
	}
	sum := 0.0
	for _, x := range v[from:to] {
		sum += x
	}
	return sum / float64(to-from)
}

// recovery is the seconds after second `from` (the dip's end) from which
// every w-second window to the end has goodput ≥ 90% of the calls that
// arrived in it (sim.DipResult.Recovery's rule, so both sides agree on what
// recovered means); −1 if none.
func recovery(good, offered []float64, from, w int) float64 {
	n := len(good)
	start := from
	for k := n - w; k >= from; k-- {
		if sum(good[k:k+w]) < 0.9*sum(offered[k:k+w]) {
			start = k + 1
			break
		}
	}
	if start > n-w {
		return -1
	}
	return float64(start - from)
}

func sum(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}
