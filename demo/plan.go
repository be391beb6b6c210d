package demo

import (
	"fmt"
	"time"
)

// Plan is the parameters of a demo run: the seeds' experiments, with their
// times scaled to fit.
type Plan struct {
	// The backend: Workers × exponential Service (mean) is the capacity.
	Workers int
	Service time.Duration
	Queue   int // the backend's FIFO bound (beyond it, 503)

	Timeout  time.Duration // the clients' timeout per attempt
	Critical float64       // share of critical requests; the rest are sheddable

	// Overload: each load level for Level, from an empty system.
	Loads []float64
	Level time.Duration

	// Dip: NewRate new requests a second for DipEnd; the backend has
	// DipWorkers workers during [DipFrom, DipTo). LoadAfter is the instant
	// (after DipTo) from which the offered load is averaged to DipEnd.
	NewRate                 float64
	DipWorkers              int
	DipFrom, DipTo, DipEnd  time.Duration
	LoadAfter               time.Duration
	Retries                 int     // client retries at most
	BudgetRatio, BudgetMax  float64 // the budgeted clients' retry budget
	BackoffBase, BackoffCap time.Duration

	// Scale is the dip's time scale against the seed's (30–60 s dip,
	// load measured from 120 s): 0.5 halves every duration.
	Scale float64

	Seed uint64
}

// seed's retry storm: dip [30 s, 60 s), load after measured 120–180 s; we
// measure from DipTo + 30 s (scaled), as the test does.
const (
	seedDipFrom   = 30 * time.Second
	seedDipTo     = 60 * time.Second
	seedLoadAfter = 90 * time.Second // DipTo + 30 s
	seedDipEnd    = 120 * time.Second
	seedLevel     = 30 * time.Second // overload_policies: 30 s per level
)

// DefaultPlan is `spillway demo`: six load levels of 12 s and the dip at
// half the seed's times (about two and a half minutes).
func DefaultPlan() Plan {
	p := basePlan()
	p.Loads = []float64{50, 80, 100, 120, 150, 200}
	p.Level = 12 * time.Second
	p.scaleDip(0.5)
	return p
}

// QuickPlan is `spillway demo --quick`: four load levels of 4 s and the dip
// at a quarter of the seed's times (under a minute).
func QuickPlan() Plan {
	p := basePlan()
	p.Loads = []float64{50, 100, 150, 200}
	p.Level = 4 * time.Second
	p.scaleDip(0.25)
	return p
}

func basePlan() Plan {
	return Plan{
		Workers: 10, Service: 100 * time.Millisecond, Queue: 1000,
		Timeout: time.Second, Critical: 0.3,
		NewRate: 70, DipWorkers: 5, Retries: 3,
		BudgetRatio: 0.1, BudgetMax: 10,
		BackoffBase: 250 * time.Millisecond, BackoffCap: 4 * time.Second,
		Seed: 42,
	}
}

func (p *Plan) scaleDip(s float64) {
	p.Scale = s
	at := func(d time.Duration) time.Duration { return time.Duration(float64(d) * s) }
	p.DipFrom, p.DipTo, p.LoadAfter, p.DipEnd = at(seedDipFrom), at(seedDipTo), at(seedLoadAfter), at(seedDipEnd)
}

// Capacity is the backend's capacity in requests per second.
func (p Plan) Capacity() float64 { return float64(p.Workers) / p.Service.Seconds() }

// Check reports a plan that cannot run.
func (p Plan) Check() error {
	switch {
	case p.Workers < 1 || p.DipWorkers < 0 || p.Service <= 0 || p.Timeout <= 0:
		return fmt.Errorf("demo: workers, service and timeout must be positive")
	case len(p.Loads) == 0 || p.Level <= 0:
		return fmt.Errorf("demo: no load levels")
	case !(p.DipFrom < p.DipTo && p.DipTo < p.LoadAfter && p.LoadAfter < p.DipEnd):
		return fmt.Errorf("demo: the dip must start, end, then be measured, before the end")
	}
	return nil
}

// ScaleNote says how the times differ from the seeds'.
func (p Plan) ScaleNote() string {
	return fmt.Sprintf("Times are scaled: each load level runs %s (the seed's %s); the dip runs %s–%s of %s (the seed's 30–60 s, ×%g).",
		p.Level, seedLevel, p.DipFrom, p.DipTo, p.DipEnd, p.Scale)
}
