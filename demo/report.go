package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Report is what a demo run measured and what the simulator predicted.
type Report struct {
	Plan      Plan
	Overload  []Row    // measured, in (load, lane) order
	Predicted []Row    // simulated, same keys
	Dip       []Series // measured
	DipSim    []Series // simulated
	Partial   bool     // stopped early (Ctrl-C)
	Files     []string // chart and page written
}

var laneNames = map[string]string{
	"none": "no protection", "bounded": "bounded, fail fast", "priority": "priority shedding",
	"adaptive": "adaptive + priority", "immediate": "immediate retries", "budget": "budget + drop expired",
}

// find returns the row of (lane, load), if any.
func find(rows []Row, lane string, load float64) (Row, bool) {
	for _, r := range rows {
		if r.Lane == lane && r.Load == load {
			return r, true
		}
	}
	return Row{}, false
}

func pct(x float64) string {
	if x < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }

// WriteOverload prints the overload table: per lane and load, measured
// beside simulated.
func (r *Report) WriteOverload(w io.Writer, lanes []string) {
	p := r.Plan
	fmt.Fprintf(w, "Overload: backend %d workers × %s exponential (capacity %.0f/s), %.0f%% critical, client timeout %s\n",
		p.Workers, p.Service, p.Capacity(), 100*p.Critical, p.Timeout)
	fmt.Fprintf(w, "%-22s %5s | %-37s | %s\n", "", "", "measured over HTTP", "simulated (spillway sim)")
	fmt.Fprintf(w, "%-22s %5s | %7s %7s %9s %10s | %7s %7s %9s\n", "policy", "load",
		"good/s", "p99 ms", "crit ok", "shed", "good/s", "p99 ms", "crit ok")
	defer r.writeKnees(w, lanes)
	defer fmt.Fprintln(w, "good/s: the level's requests answered 200 within the timeout (some after the level's end), per second of the level;\n"+
		"p99: of those good answers; crit ok: critical requests answered in time; shed: refused by the gateway's admission (503 admit:…).")
	for _, lane := range lanes {
		for _, load := range p.Loads {
			m, okM := find(r.Overload, lane, load)
			s, okS := find(r.Predicted, lane, load)
			if !okM && !okS {
				continue
			}
			left := fmt.Sprintf("%7s %7s %9s %10s", "-", "-", "-", "-")
			if okM {
				left = fmt.Sprintf("%7.1f %7s %9s %10d", m.GoodPerSec, ms(m.P99), pct(m.CriticalOK), m.Rejected)
			}
			right := ""
			if okS {
				right = fmt.Sprintf("%7.1f %7s %9s", s.GoodPerSec, ms(s.P99), pct(s.CriticalOK))
			}
			fmt.Fprintf(w, "%-22s %5.0f | %s | %s%s\n", laneNames[lane], load, left, right, flags(m))
		}
	}
}

// kneeLoad is the lane's highest load below the first that fails the
// knee test of `spillway load` (good answers ≥ 95% of the level's
// arrivals, shed ≤ 1% of them, p99 ≤ 3 × the lowest load's); 0 when the
// lowest fails or the lane has no rows.
func kneeLoad(rows []Row, lane string, loads []float64) float64 {
	knee, base := 0.0, time.Duration(-1)
	for _, load := range loads {
		r, ok := find(rows, lane, load)
		if !ok || r.Offered == 0 {
			break
		}
		if base < 0 {
			base = r.P99
		}
		good, offered := float64(r.Good), float64(r.Offered)
		if good < 0.95*offered || float64(r.Rejected) > 0.01*offered || r.P99 > 3*base {
			break
		}
		knee = load
	}
	return knee
}

// writeKnees prints each lane's knee, measured and simulated.
func (r *Report) writeKnees(w io.Writer, lanes []string) {
	var parts []string
	for _, lane := range lanes {
		m := kneeLoad(r.Overload, lane, r.Plan.Loads)
		s := kneeLoad(r.Predicted, lane, r.Plan.Loads)
		parts = append(parts, fmt.Sprintf("%s %s / %s", laneNames[lane], kneeText(m), kneeText(s)))
	}
	fmt.Fprintf(w, "knee (highest load with good answers ≥ 95%% of the arrivals, shed ≤ 1%%, p99 ≤ 3 × the lowest load's), measured / simulated:\n  %s\n",
		strings.Join(parts, "; "))
}

func kneeText(load float64) string {
	if load == 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f", load)
}

// flags marks a measured row that is not to be trusted as is.
func flags(m Row) string {
	var f []string
	if m.Invalid {
		f = append(f, "INVALID: the load generator was late")
	}
	if m.Partial {
		f = append(f, "partial")
	}
	if len(f) == 0 {
		return ""
	}
	return "  (" + strings.Join(f, ", ") + ")"
}

// WriteDip prints the dip table: per client policy, measured beside
// simulated.
func (r *Report) WriteDip(w io.Writer) {
	p := r.Plan
	fmt.Fprintf(w, "Capacity dip: %.0f new requests/s; capacity %.0f/s, %.0f/s from %s to %s; timeout %s, up to %d retries; the gateway does not retry\n",
		p.NewRate, p.Capacity(), float64(p.DipWorkers)/p.Service.Seconds(), p.DipFrom, p.DipTo, p.Timeout, p.Retries)
	fmt.Fprintf(w, "%-22s | %-38s | %s\n", "", "measured over HTTP", "simulated (spillway sim)")
	after := fmt.Sprintf("load/s %s+", p.LoadAfter)
	fmt.Fprintf(w, "%-22s | %11s %12s %12s | %11s %12s %12s\n", "client policy",
		"load/s dip", after, "recovery", "load/s dip", after, "recovery")
	for _, s := range r.Dip {
		sim := Series{LoadInDip: -1, LoadAfter: -1, Recovery: -2}
		for _, x := range r.DipSim {
			if x.Lane == s.Lane {
				sim = x
			}
		}
		fmt.Fprintf(w, "%-22s | %11.0f %12.0f %12s | %11s %12s %12s%s\n", laneNames[s.Lane],
			s.LoadInDip, s.LoadAfter, recText(s.Recovery), num(sim.LoadInDip), num(sim.LoadAfter), recText(sim.Recovery),
			dipFlags(s))
	}
}

// dipFlags marks a measured dip lane whose load generator was late in
// some seconds, or that was cut short.
func dipFlags(s Series) string {
	var f []string
	if s.Late > 0 {
		f = append(f, fmt.Sprintf("the load generator was late in %d of %d s", s.Late, len(s.Seconds)))
	}
	if s.Partial {
		f = append(f, "partial")
	}
	if len(f) == 0 {
		return ""
	}
	return "  (" + strings.Join(f, ", ") + ")"
}

func num(x float64) string {
	if x < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", x)
}

func recText(sec float64) string {
	switch {
	case sec == -2:
		return "-"
	case sec < 0:
		return "never"
	}
	return fmt.Sprintf("%.0f s", sec)
}
