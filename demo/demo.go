package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Options configures a demo run.
type Options struct {
	Plan Plan
	// Out receives the progress lines and the tables.
	Out io.Writer
	// Dir is where the chart (spillway-demo.svg) and the page
	// (spillway-demo.html) are written; "" means a spillway-demo directory
	// under os.TempDir(). Nothing is written when NoFiles is set.
	Dir     string
	NoFiles bool
	// SkipDip runs the overload experiment only; SkipOverload the dip only.
	SkipDip, SkipOverload bool
	// Dashboard is the gateway's admin address, where its live dashboard
	// is served (/dashboard); "" means 127.0.0.1:0, a free port. When the
	// address is taken, a free port is used instead.
	Dashboard string
	// Stay keeps the gateway (and its dashboard) up after the run until
	// ctx ends.
	Stay bool
}

// Run runs the demo: the simulator's predictions first (they take a few
// seconds of CPU, which would disturb the load generator's pacing if they
// ran beside it), then the overload levels, then the dip. When ctx ends
// it stops, prints the partial tables and returns them with Partial set.
func Run(ctx context.Context, o Options) (*Report, error) {
	p := o.Plan
	if err := p.Check(); err != nil {
		return nil, err
	}
	w := o.Out
	if w == nil {
		w = io.Discard
	}
	r := &Report{Plan: p}
	start := time.Now()
	fmt.Fprintln(w, "Spillway demo: the seeds' overload experiment over real HTTP — load generator → gateway → backend, on loopback.")
	fmt.Fprintln(w, p.ScaleNote())
	fmt.Fprintln(w, "Simulating the same configurations (spillway sim, the gateway's own admission code under virtual time)…")
	if err := r.predict(); err != nil {
		return nil, err
	}
	lanes := overloadLanes(p)
	st, err := startStack(lanes, o.Dashboard)
	if err != nil {
		return r, err
	}
	defer st.close()
	fmt.Fprintf(w, "Dashboard (live, while the demo runs): %s\n", st.dashboard())
	if err := r.measure(ctx, st, o, w); err != nil {
		return r, err
	}
	r.Partial = ctx.Err() != nil
	if r.Partial {
		fmt.Fprintln(w, "\nStopped early: the tables hold what was measured.")
	}
	if !o.NoFiles {
		if err := r.writeFiles(o.Dir); err != nil {
			return r, err
		}
		fmt.Fprintf(w, "\nChart: %s\n", strings.Join(r.Files, "\nPage:  "))
	}
	fmt.Fprintf(w, "Done in %s.\n", time.Since(start).Round(time.Second))
	if o.Stay && ctx.Err() == nil {
		fmt.Fprintf(w, "The gateway and its dashboard stay up at %s; Ctrl-C stops them.\n", st.dashboard())
		<-ctx.Done()
	}
	return r, nil
}

// measure runs the experiments over HTTP on st, printing to w as it goes.
func (r *Report) measure(ctx context.Context, st *stack, o Options, w io.Writer) error {
	p := r.Plan
	lanes := overloadLanes(p)
	if !o.SkipOverload {
		fmt.Fprintln(w, "Measuring over HTTP, each load level from an empty system, the four gateway configs at once:")
		rows, err := runOverload(ctx, st, p, lanes, func(level []Row) { progressLine(w, level) })
		r.Overload = rows
		if err != nil {
			return err
		}
		fmt.Fprintln(w)
		r.WriteOverload(w, laneKeys(lanes))
	}
	if !o.SkipDip && ctx.Err() == nil {
		fmt.Fprintf(w, "\nMeasuring the capacity dip (%s)…\n", p.DipEnd)
		dip, err := runDip(ctx, st, p)
		r.Dip = dip
		if err != nil {
			return err
		}
		fmt.Fprintln(w)
		r.WriteDip(w)
	}
	return nil
}

func laneKeys(lanes []lane) []string {
	keys := make([]string, len(lanes))
	for i, l := range lanes {
		keys[i] = l.key
	}
	return keys
}

// progressLine prints one level's measured goodput, lane by lane.
func progressLine(w io.Writer, level []Row) {
	if len(level) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  load %3.0f/s:", level[0].Load)
	for _, r := range level {
		fmt.Fprintf(&b, "  %s %.0f good/s, critical %s;", r.Lane, r.GoodPerSec, pct(r.CriticalOK))
	}
	fmt.Fprintln(w, strings.TrimSuffix(b.String(), ";"))
}

// outDir is where the files go.
func outDir(dir string) (string, error) {
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "spillway-demo")
	}
	return dir, os.MkdirAll(dir, 0o755)
}
