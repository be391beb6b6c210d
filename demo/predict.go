package demo

import (
	"math"
	"time"

	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/sim"
)

// predict runs the simulator on the plan's parameters and the lanes' own
// admission configs (parsed from the gateway config the demo generates).
func (r *Report) predict() error {
	p := r.Plan
	lanes := overloadLanes(p)
	adm, err := admissions(lanes)
	if err != nil {
		return err
	}
	for i, l := range lanes {
		rows, err := sim.PredictOverload(sim.OverloadModel{
			Seed: uint32(p.Seed) + uint32(i), Workers: p.Workers, Service: p.Service, Queue: p.Queue,
			Timeout: p.Timeout, Critical: p.Critical, Loads: p.Loads, Duration: p.Level,
			Admission: adm[l.key],
		})
		if err != nil {
			return err
		}
		for _, s := range rows {
			crit := s.CriticalOK
			if math.IsNaN(crit) {
				crit = -1
			}
			r.Predicted = append(r.Predicted, Row{Lane: l.key, Load: s.Load, GoodPerSec: s.GoodPerSec,
				P99: s.P99, CriticalOK: crit, Rejected: s.Rejected - s.RejectedBackend, Offered: s.Offered, Good: s.Good})
		}
	}
	for i, l := range dipLanes(p) {
		m := sim.DipModel{
			Seed: uint32(p.Seed) + 10 + uint32(i), NewRate: p.NewRate, Workers: p.Workers, Service: p.Service,
			Queue: p.Queue, DipWorkers: p.DipWorkers, DipFrom: p.DipFrom, DipTo: p.DipTo, End: p.DipEnd,
			Timeout: p.Timeout, MaxRetries: p.Retries, Policy: sim.Immediate,
			LoadFrom: p.LoadAfter, LoadTo: p.DipEnd, Window: p.recoveryWindow(),
		}
		if l.key == "budget" {
			m.Policy = sim.BudgetDropExpired
			m.Budget = retry.BudgetConfig{Ratio: p.BudgetRatio, Max: p.BudgetMax}
			m.Backoff = retry.Backoff{Base: p.BackoffBase.Seconds(), Cap: p.BackoffCap.Seconds()}
		}
		d, err := sim.PredictDip(m)
		if err != nil {
			return err
		}
		r.DipSim = append(r.DipSim, Series{Lane: l.key, Seconds: d.Seconds, Attempts: d.Attempts, Good: d.Good,
			LoadInDip: d.LoadInDip, LoadAfter: d.LoadAfter, Recovery: d.Recovery})
	}
	return nil
}

// recoveryWindow is the span over which goodput must hold ≥ 90% of the new
// calls for the dip to count as over: the seed's 5 s, scaled, at least 1 s.
func (p Plan) recoveryWindow() time.Duration {
	return max(time.Second, time.Duration(float64(5*time.Second)*p.Scale).Truncate(time.Second))
}
