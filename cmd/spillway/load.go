package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/loadgen"
)

const loadSummary = `Send open-loop load (package loadgen): requests leave at the times of the
arrival process (constant or Poisson), answered or not, and latency is
measured from each request's intended send time, so a slow server cannot
slow the generator down and hide its own delay (no coordinated omission).
An arrival that could not be sent in time (--max-inflight full, or overdue
by its timeout) counts as unsent: a failure and a timeout, never dropped.
A step whose send lag p99 (actual − intended send) is above --max-send-lag
is marked INVALID: the generator, not the server, was late.

The table has one line per step: the asked rate, the arrivals offered,
good answers (2xx within --timeout) and 2xx answers per second, latency
quantiles (every call; timeouts and unsent count as the timeout), errors,
unsent, retries, and the gateway's refusals (Spillway-Reason) by class.

--knee finds the highest rate sustained: p99 at most 3 × the lowest step's
(at least 1 ms), errors at most 1%, goodput at least 95% of offered; then
bisects between the last passing and the first failing rate (or, when
every trusted step passed, the first invalid one) to 5%, a --cooldown
before each probe, and reports the safe rate, 10% below. Invalid steps are
left out of the ramp; an invalid or aborted probe counts as failing. A
valid step or probe that fails is measured once more at its rate (after a
--cooldown; "confirmations:" in the table, c1…), and the rate fails only
when that fails too, so one stall of a busy machine is not taken for the
service's limit; a confirmation costs one more step at the failing rate,
and --no-confirm skips it (the fewest overloaded seconds against a
production service).

A targets file (--targets) holds one request per block, blocks separated by
blank lines, # comments:

  POST http://127.0.0.1:9001/order?user={{user}} weight=3
  Content-Type: application/json
  <<
  {"user": {{user}}, "seq": {{seq}}}
  >>

  GET http://127.0.0.1:9001/report
  @report-body.json

(a first line METHOD URL [weight=N], header lines, then a body inline
between << and >>, or @FILE relative to the targets file). {{NAME}} takes
a value in 0…N−1 for --var NAME=N, drawn per request; {{seq}} is the
arrival's number.

PROPOSE

Example: find the capacity of a backend of 10 workers × 50 ms (200 req/s):

  spillway backend --workers 10 --service 50ms &
  spillway load --url http://127.0.0.1:9001/ --rate 100:300:50 --step 5s --knee

Exit status: 0 done, 1 aborted by --abort-errors or --abort-p99 (or a
failure), 2 bad usage, 130 interrupted (SIGINT; the partial table is
printed).`

// loadHelp is the help text: the summary with --propose's paragraph.
var loadHelp = strings.Replace(loadSummary, "PROPOSE", proposeSummary, 1)

// loadCommand runs `spillway load` until its steps are done or SIGINT (a
// second one stops it at once).
func loadCommand(args []string, stdout, stderr io.Writer) int {
	o, code, done := parseLoad(args, stdout, stderr)
	if done {
		return code
	}
	loadGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // the next signal gets the default action
	return runLoad(ctx, o, stdout, stderr)
}

// loadGCPercent is the GC target of `spillway load` unless GOGC is set.
// Each request allocates a few kilobytes in net/http; at Go's default of
// 100 the collector's assists took the pacer's time at high rates, and a
// generator that falls behind dials more connections and falls further
// (measured on 2 cores against a trivial server: 14,000 req/s collapsed
// to 65,050 good of 112,000 with GOGC=100 and sent all 112,000 on time
// with 400). The live heap is small (the calls in flight), so 5× of it
// stays small.
const loadGCPercent = 400

// loadGC sets the GC target for load generation, unless GOGC is set.
func loadGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(loadGCPercent)
	}
}

// runLoad runs o until done or ctx ends, writes the outputs and returns
// the exit status.
func runLoad(ctx context.Context, o loadOpts, stdout, stderr io.Writer) int {
	const cmd = "spillway load"
	var pw *loadgen.ProgressWriter
	if !o.quiet {
		pw = loadgen.NewProgressWriter(stderr, loadgen.IsTerminal(stderr), len(o.cfg.Steps))
		n := len(o.cfg.Steps)
		o.cfg.Progress = pw.Report
		o.cfg.StepDone = func(s loadgen.StepResult) { pw.Println(stepLine(fmt.Sprintf("step %d/%d", s.Index+1, n), s)) }
		fmt.Fprintf(stderr, "%s: %s\n", cmd, describeLoad(&o))
	}
	res, err := loadgen.Run(ctx, o.cfg)
	if errors.Is(err, loadgen.ErrConfig) {
		fmt.Fprintf(stderr, "%s: %v (see %s -h)\n", cmd, err, cmd)
		return 2
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
	var knee *loadgen.Knee
	if o.knee {
		k, err := findKnee(ctx, &o, res, pw)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "%s: --knee: %v\n", cmd, err)
		}
		knee = &k
	}
	if pw != nil {
		pw.Clear()
	}
	code := writeLoad(&o, res, knee, stdout, stderr)
	if o.propose != nil && code == 0 && ctx.Err() == nil && res.Aborted == "" {
		code = writePropose(&o, res, knee, stdout, stderr)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "%s: interrupted: the results are partial\n", cmd)
		return 130
	case res.Aborted != "":
		fmt.Fprintf(stderr, "%s: aborted: %s\n", cmd, res.Aborted)
		return 1
	}
	return code
}

// writeLoad writes the table or the JSON lines, and the SVG file.
func writeLoad(o *loadOpts, res loadgen.Result, knee *loadgen.Knee, stdout, stderr io.Writer) int {
	var err error
	if o.output == "json" {
		err = loadgen.WriteJSONL(stdout, res, knee)
	} else {
		err = loadgen.WriteTable(stdout, res, knee)
	}
	if err != nil {
		fmt.Fprintf(stderr, "spillway load: %v\n", err)
		return 1
	}
	if o.svg != "" {
		if err := writeFile(o.svg, func(w io.Writer) error { return loadgen.WriteSVG(w, res, knee) }); err != nil {
			fmt.Fprintf(stderr, "spillway load: --svg: %v\n", err)
			return 1
		}
	}
	return 0
}

// findKnee finds the ramp's knee and bisects it to 5%, one probe (a single
// step of --step at the middle rate) after each --cooldown, between the
// last passing step and the first failing one — or, when every trusted
// step passed, the first invalid step above them (the generator could not
// deliver it then; a probe may). A trusted step or probe that fails is
// measured once more, after a cooldown too, unless --no-confirm; the rate
// fails only when that fails as well. No probe when none passed, the ramp
// did not reach the knee, or the run was aborted or interrupted.
func findKnee(ctx context.Context, o *loadOpts, res loadgen.Result, pw *loadgen.ProgressWriter) (loadgen.Knee, error) {
	crit := loadgen.KneeCriteria{NoConfirm: o.noConfirm}
	if res.Aborted != "" || ctx.Err() != nil {
		k, _ := loadgen.FindKnee(res.Steps, crit)
		return k, nil
	}
	probe := kneeProbe(o, len(res.Steps), pw)
	k, ok, err := loadgen.ConfirmKnee(ctx, res.Steps, crit, probe)
	if err != nil {
		return k, err
	}
	hi, why := k.Fail, k.FailReason
	if ok && k.Bounded {
		hi, why = untrustedAbove(res.Steps, k, crit)
	}
	if !ok || hi == 0 {
		return k, nil
	}
	b, err := loadgen.Bisect(ctx, k.Rate, hi, k.BaseP99, crit, loadgen.DefaultTolerance, probe)
	if b.Fail == hi && b.FailReason == "" {
		b.FailReason = why // the ramp's step, never probed again
	}
	b.Untrusted = k.Untrusted
	b.Confirmations = append(k.Confirmations, b.Confirmations...)
	return b, err
}

// kneeProbe runs one step of --step at a rate after --cooldown, for
// --knee's bisection and confirmations, numbering its results after the
// ramp's steps and its progress lines "probe N" and "confirm N (step 3)".
func kneeProbe(o *loadOpts, steps int, pw *loadgen.ProgressWriter) loadgen.Probe {
	n, probes, confirms := 0, 0, 0
	return func(ctx context.Context, rate float64, of string) (loadgen.StepResult, error) {
		n++
		label := ""
		if of == "" {
			probes++
			label = fmt.Sprintf("probe %d", probes)
		} else {
			confirms++
			label = fmt.Sprintf("confirm %d (%s)", confirms, of)
		}
		select { // the cooldown
		case <-time.After(o.cooldown):
		case <-ctx.Done():
			return loadgen.StepResult{}, ctx.Err()
		}
		cfg := o.cfg
		cfg.Steps = []loadgen.Step{{Rate: rate, Duration: o.step}}
		cfg.Seed = o.cfg.Seed + uint64(n)
		cfg.StepDone = nil
		if pw != nil {
			pw.SetLabel(label)
		}
		r, err := loadgen.Run(ctx, cfg)
		switch {
		case ctx.Err() != nil:
			return loadgen.StepResult{}, ctx.Err()
		case err != nil:
			return loadgen.StepResult{}, err
		case len(r.Steps) != 1:
			return loadgen.StepResult{}, fmt.Errorf("%s: %d steps for one", label, len(r.Steps))
		}
		s := r.Steps[0]
		s.Index = steps + n - 1
		if pw != nil {
			pw.Println(stepLine(label, s))
		}
		return s, nil
	}
}

// untrustedAbove is the lowest rate above the knee k whose step FindKnee
// left out, and why (0 and "" when there is none).
func untrustedAbove(steps []loadgen.StepResult, k loadgen.Knee, crit loadgen.KneeCriteria) (float64, string) {
	rate, why := 0.0, ""
	for _, s := range steps {
		if s.Rate > k.Rate && (s.Invalid || s.Partial) && (rate == 0 || s.Rate < rate) {
			rate, why = s.Rate, crit.Fails(s, k.BaseP99)
		}
	}
	return rate, why
}

// stepLine is the line printed on stderr as a step ends.
func stepLine(label string, s loadgen.StepResult) string {
	line := fmt.Sprintf("%s done: rate %s/s, good %.1f/s, p99 %v, errors %.2f%%, unsent %d",
		label, rate(s.Rate), s.Goodput, s.Latency.P99.Round(100*time.Microsecond), 100*s.ErrorRate(), s.Unsent)
	if s.Invalid {
		line += fmt.Sprintf(", INVALID (send lag p99 %v)", s.SendLag.P99.Round(100*time.Microsecond))
	}
	return line
}

// describeLoad is the start line: the steps, the arrivals, the targets,
// the client policy.
func describeLoad(o *loadOpts) string {
	c := &o.cfg
	var b strings.Builder
	lo, hi := c.Steps[0].Rate, c.Steps[0].Rate
	for _, s := range c.Steps {
		lo, hi = min(lo, s.Rate), max(hi, s.Rate)
	}
	fmt.Fprintf(&b, "%d step(s) of %v at %s", len(c.Steps), o.step, rate(lo))
	if hi != lo {
		fmt.Fprintf(&b, " to %s", rate(hi))
	}
	arr := "constant"
	if c.Arrivals == loadgen.Poisson {
		arr = "poisson"
	}
	fmt.Fprintf(&b, " req/s, %s arrivals, to %s", arr, c.Targets[0].URL)
	if len(c.Targets) > 1 {
		fmt.Fprintf(&b, " and %d more targets", len(c.Targets)-1)
	}
	fmt.Fprintf(&b, "; timeout %v", c.Timeout)
	for mode, m := range retryModes {
		if m == c.Client.Retry && m != loadgen.RetryNone {
			fmt.Fprintf(&b, ", retry %s ×%d", mode, c.Client.Retries)
		}
	}
	if o.knee {
		b.WriteString("; then the knee")
	}
	return b.String()
}
