package demo

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, opt) })
}

// TestOverloadProtects runs the four gateway configs at twice the
// backend's capacity for 8 s, from an empty system: the protected ones
// keep goodput near capacity and serve the critical requests, the
// unprotected one drowns in its queue (answers later than the client's
// 1 s timeout are wasted). The bounds: protected goodput ≥ 3× the
// unprotected one's, critical success ≥ 95%.
func TestOverloadProtects(t *testing.T) {
	noLeaks(t)
	p := DefaultPlan()
	p.Level = 8 * time.Second
	lanes := overloadLanes(p)
	st := testStack(t, lanes)
	rows := overloadRows(t, st, p, lanes)
	by := map[string]Row{}
	for _, r := range rows {
		by[r.Lane] = r
		t.Logf("%-9s good/s %5.1f  p99 %v  critical ok %s  refused %d  invalid %v", r.Lane, r.GoodPerSec, r.P99, pct(r.CriticalOK), r.Rejected, r.Invalid)
	}
	none := by["none"]
	for _, lane := range []string{"priority", "adaptive"} {
		r := by[lane]
		if r.GoodPerSec < 3*none.GoodPerSec {
			t.Errorf("%s: goodput %.1f/s; want ≥ 3 × the unprotected %.1f/s", lane, r.GoodPerSec, none.GoodPerSec)
		}
		if r.CriticalOK < 0.95 {
			t.Errorf("%s: critical ok %s; want ≥ 95%%", lane, pct(r.CriticalOK))
		}
	}
	if b := by["bounded"]; b.GoodPerSec < 3*none.GoodPerSec {
		t.Errorf("bounded: goodput %.1f/s; want ≥ 3 × the unprotected %.1f/s", b.GoodPerSec, none.GoodPerSec)
	}
	if invalid(rows) {
		// The simulator models the planned schedule; a lane whose sends
		// lagged measured another experiment (the report marks it INVALID
		// too). Take the level again once; the bounds above hold either way.
		t.Logf("the load generator was late: measuring again for the comparison with the simulation")
		rows = overloadRows(t, st, p, lanes)
	}
	agreesWithSim(t, p, []float64{2 * p.Capacity()}, rows)
}

// overloadRows measures every lane at twice the plan's capacity.
func overloadRows(t *testing.T, st *stack, p Plan, lanes []lane) []Row {
	t.Helper()
	rows, err := runLevel(context.Background(), st, p, lanes, 2*p.Capacity(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// invalid reports whether the load generator was late in any row.
func invalid(rows []Row) bool {
	for _, r := range rows {
		if r.Invalid {
			return true
		}
	}
	return false
}

// agreesWithSim checks measured rows against the simulator's prediction
// for the same plan and admission configs, with bounds wider than the
// 10% the demo aims for on a quiet machine: goodput within 20% (or 5
// good/s; from above only for the unprotected lane, none), critical ok
// within 15 points. Rows the load generator was late for (Invalid) are
// logged and not compared.
func agreesWithSim(t *testing.T, p Plan, loads []float64, rows []Row) {
	t.Helper()
	p.Loads = loads
	r := &Report{Plan: p}
	if err := r.predict(); err != nil {
		t.Fatal(err)
	}
	for _, m := range rows {
		if m.Invalid {
			t.Logf("%-9s at %3.0f/s: not compared with the simulation: the load generator was late", m.Lane, m.Load)
			continue
		}
		s, ok := find(r.Predicted, m.Lane, m.Load)
		if !ok {
			t.Fatalf("no prediction for %s at %v", m.Lane, m.Load)
		}
		t.Logf("%-9s at %3.0f/s: good/s %.1f measured, %.1f simulated; critical ok %s, %s", m.Lane, m.Load, m.GoodPerSec, s.GoodPerSec, pct(m.CriticalOK), pct(s.CriticalOK))
		d, tol := math.Abs(m.GoodPerSec-s.GoodPerSec), max(0.2*s.GoodPerSec, 5)
		if m.Lane == "none" && m.GoodPerSec < s.GoodPerSec {
			// The unprotected lane's goodput is what its queue answers
			// before the client's timeout; every stall of a loaded machine
			// adds to that queue (scripts/stress measured 0.0 against 21.5
			// simulated, on schedule). It is checked from above only: it
			// must not do better than it should.
			d = 0
		}
		if d > tol {
			t.Errorf("%s at %v/s: goodput %.1f measured, %.1f simulated", m.Lane, m.Load, m.GoodPerSec, s.GoodPerSec)
		}
		if d := math.Abs(m.CriticalOK - s.CriticalOK); d > 0.15 {
			t.Errorf("%s at %v/s: critical ok %s measured, %s simulated", m.Lane, m.Load, pct(m.CriticalOK), pct(s.CriticalOK))
		}
	}
}

// TestDipRetries runs the capacity dip at a quarter of the seed's times
// (dip 7.5–15 s of 30 s): with immediate retries the offered load is
// still ≥ 2.5× the new requests' rate 30 s (scaled: 7.5 s) after the
// capacity came back; with budgeted retries and expired work dropped,
// goodput is back to ≥ 90% of the base within 10 s (scaled: 2.5 s).
func TestDipRetries(t *testing.T) {
	noLeaks(t)
	p := QuickPlan()
	st := testStack(t, overloadLanes(p))
	series, err := runDip(context.Background(), st, p)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Series{}
	for _, s := range series {
		by[s.Lane] = s
		t.Logf("%-9s attempts/s %v", s.Lane, s.Attempts)
		t.Logf("%-9s good/s     %v", s.Lane, s.Good)
		t.Logf("%-9s load in dip %.0f, after %.0f, recovery %v s", s.Lane, s.LoadInDip, s.LoadAfter, s.Recovery)
	}
	if im := by["immediate"]; im.LoadAfter < 2.5*p.NewRate {
		t.Errorf("immediate retries: %.0f attempts/s from %s; want ≥ 2.5 × %.0f (the storm outlives the dip)", im.LoadAfter, p.LoadAfter, p.NewRate)
	}
	limit := 10 * p.Scale
	if b := by["budget"]; b.Recovery < 0 || b.Recovery > limit {
		t.Errorf("budgeted retries: recovery %v s after the dip; want within %v s", b.Recovery, limit)
	}
}

// TestRunWritesTablesAndChart runs a short plan end to end and checks the
// tables (measured beside simulated), the SVG (well-formed XML) and the
// HTML page.
func TestRunWritesTablesAndChart(t *testing.T) {
	noLeaks(t)
	p := QuickPlan()
	p.Loads, p.Level = []float64{100}, 2*time.Second
	p.scaleDip(0.1)
	dir := t.TempDir()
	var out bytes.Buffer
	r, err := Run(context.Background(), Options{Plan: p, Out: &out, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log(text)
	for _, want := range []string{"measured over HTTP", "simulated (spillway sim)", "priority shedding", "immediate retries", "budget + drop expired", "Times are scaled"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if len(r.Overload) != 4 || len(r.Predicted) != 4 || len(r.Dip) != 2 || len(r.DipSim) != 2 {
		t.Fatalf("report has %d measured and %d simulated rows, %d measured and %d simulated dip series; want 4, 4, 2, 2",
			len(r.Overload), len(r.Predicted), len(r.Dip), len(r.DipSim))
	}
	svg, err := os.ReadFile(filepath.Join(dir, "spillway-demo.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := wellFormed(svg); err != nil {
		t.Errorf("SVG: %v", err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "spillway-demo.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("<svg")) || !bytes.Contains(page, []byte("priority shedding")) {
		t.Errorf("the page lacks the chart or the table")
	}
}

// TestRunStopsWithPartialTables cancels a run during its first level: it
// returns promptly with Partial set and prints what it has.
func TestRunStopsWithPartialTables(t *testing.T) {
	noLeaks(t)
	p := QuickPlan()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	var out bytes.Buffer
	start := time.Now()
	r, err := Run(ctx, Options{Plan: p, Out: &out, NoFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Run took %v after the cancel; want it to stop promptly", took)
	}
	if !r.Partial || !strings.Contains(out.String(), "Stopped early") {
		t.Errorf("Partial %v, output:\n%s", r.Partial, out.String())
	}
	if len(r.Dip) != 0 {
		t.Errorf("the dip ran after the cancel")
	}
}

// testStack starts a stack for lanes, closed at the test's end.
func testStack(t *testing.T, lanes []lane) *stack {
	t.Helper()
	st, err := startStack(lanes, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", st.log.String())
		}
	})
	return st
}

func wellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
