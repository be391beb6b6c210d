package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/httpserver"
)

// statsPath is where `spillway backend` answers its counts as JSON.
const statsPath = "/stats"

// backendStopGrace bounds the wait for connections to go idle once the
// backend has answered the requests it held. net/http's Shutdown counts a
// connection that has not sent a request yet as busy for its first 5 s
// (a client's spare connection, say); after the grace such connections
// are closed, and the stop is clean unless an answer was still being
// written.
const backendStopGrace = time.Second

const backendSummary = `Serve a test service of known capacity (package backend): at most --workers
requests are worked on at once, each for a service time drawn from --service
(waited on a timer, not the CPU), so its capacity is workers / mean service
time requests a second. Requests beyond the workers wait in a FIFO queue of
--queue places; beyond that they are refused with 503. Every path but the
health and stats paths is served: 200 "ok" after the service time.

By default a request whose client has gone is served anyway and counted as
served late (seed 000's wasted work); --honor-cancel stops it instead.

  --service   DURATION             constant, e.g. 20ms
              exp:DURATION         exponential with that mean
              lognormal:DURATION[:SIGMA]
                                   log-normal with that mean and shape SIGMA
                                   (the log's standard deviation, default 0.5)
  --cost      PATH=FACTOR          PATH's service time × FACTOR (repeatable)
  --schedule  FROM-TO:WORKERS      WORKERS workers from FROM to TO after the
                                   start, e.g. 30s-60s:5 (repeatable, or a
                                   comma list; windows may not overlap)

GET /stats answers the counts as JSON (arrived, served, late, errors, hung,
rejected, cancelled, in_flight, queued, max_in_flight, health, by_header,
capacity). One line is printed on start (address and capacity), and a summary
on SIGINT or SIGTERM and every --report interval.`

// backendOpts is a parsed `spillway backend` command line.
type backendOpts struct {
	cfg    backend.Config
	addr   string
	report time.Duration
}

// backendCommand runs `spillway backend` until SIGINT or SIGTERM (a second
// one stops it at once).
func backendCommand(args []string, stdout, stderr io.Writer) int {
	o, code, done := parseBackend(args, stdout, stderr)
	if done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // the next signal gets the default action
	return runBackend(ctx, o, stdout, stderr)
}

// parseBackend parses the flags; done says to exit with code (help: 0,
// a bad value: 2, one line on stderr naming the flag).
func parseBackend(args []string, stdout, stderr io.Writer) (o backendOpts, code int, done bool) {
	const cmd = "spillway backend"
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &o.cfg
	c.Service = backend.Dist{Kind: backend.Constant, Mean: 100 * time.Millisecond}
	costs := costFlag{}
	var sched scheduleFlag
	fs.StringVar(&o.addr, "addr", "127.0.0.1:9001", "listen on this address (port 0: a free port, printed on start)")
	fs.IntVar(&c.Workers, "workers", 10, "capacity: requests worked on at once")
	fs.IntVar(&c.Queue, "queue", 1000, "requests that may wait for a worker; more are refused with 503")
	fs.Var((*serviceFlag)(&c.Service), "service", "service time of a request, a `SPEC`: DURATION, exp:DURATION or lognormal:DURATION[:SIGMA]")
	fs.Var(costs, "cost", "`PATH=FACTOR`: PATH's service time times FACTOR (repeatable)")
	fs.Float64Var(&c.ErrorRate, "error-rate", 0, "share of requests answered at once with --error-status (0 to 1)")
	fs.IntVar(&c.ErrorStatus, "error-status", 503, "status of the injected errors (a 5xx)")
	fs.Float64Var(&c.HangRate, "hang-rate", 0, "share of requests, health checks included, that never answer (0 to 1)")
	fs.Float64Var(&c.SlowDown, "slow-down", 1, "factor on every service time")
	fs.Var(&sched, "schedule", "`FROM-TO:WORKERS`: the workers for a window of time after the start (repeatable or comma list)")
	fs.BoolVar(&c.HonorCancel, "honor-cancel", false, "stop a request whose client has gone (default: serve it, counted late)")
	fs.StringVar(&c.HealthPath, "health-path", "/healthz", "the health endpoint's path")
	fs.StringVar(&c.Name, "name", "", "sent in every answer's Backend-Name header")
	fs.StringVar(&c.CountHeader, "count-header", "", "count requests by this header's value in the stats (e.g. Spillway-Criticality)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the service times and injected failures")
	fs.DurationVar(&o.report, "report", 0, "print a summary this often (0: only on stop)")
	if code, done := parse(fs, cmd, backendSummary, args, stdout, stderr); done {
		return o, code, true
	}
	c.Costs, c.Schedule = costs, sched
	if err := checkBackend(&o); err != nil {
		fmt.Fprintf(stderr, "%s: %v (see %s -h)\n", cmd, err, cmd)
		return o, 2, true
	}
	return o, 0, false
}

// checkBackend checks what the flag types do not, naming the flag.
func checkBackend(o *backendOpts) error {
	c := &o.cfg
	switch {
	case o.addr == "":
		return errors.New("--addr: must not be empty")
	case c.Workers < 1:
		return fmt.Errorf("--workers: must be at least 1, got %d", c.Workers)
	case c.Queue < 0:
		return fmt.Errorf("--queue: must be 0 or more, got %d", c.Queue)
	case !isShare(c.ErrorRate):
		return fmt.Errorf("--error-rate: must be between 0 and 1, got %v", c.ErrorRate)
	case !isShare(c.HangRate):
		return fmt.Errorf("--hang-rate: must be between 0 and 1, got %v", c.HangRate)
	case c.ErrorRate+c.HangRate > 1:
		return fmt.Errorf("--error-rate %v and --hang-rate %v: must add up to at most 1", c.ErrorRate, c.HangRate)
	case c.ErrorStatus < 500 || c.ErrorStatus > 599:
		return fmt.Errorf("--error-status: must be a 5xx, got %d", c.ErrorStatus)
	case !(c.SlowDown > 0) || math.IsInf(c.SlowDown, 0):
		return fmt.Errorf("--slow-down: must be a finite factor above 0, got %v", c.SlowDown)
	case o.report < 0:
		return fmt.Errorf("--report: must be 0 or more, got %v", o.report)
	case !strings.HasPrefix(c.HealthPath, "/") || c.HealthPath == statsPath:
		return fmt.Errorf("--health-path: must start with / and not be %s, got %q", statsPath, c.HealthPath)
	}
	for path := range c.Costs {
		if path == c.HealthPath || path == statsPath {
			return fmt.Errorf("--cost: %s is not served by the workers", path)
		}
	}
	_, err := backend.New(o.cfg) // anything the package refuses that the flags let through
	return err
}

func isShare(x float64) bool { return x >= 0 && x <= 1 }

// serviceFlag is --service: a backend.Dist.
type serviceFlag backend.Dist

func (f *serviceFlag) String() string {
	if f == nil {
		return ""
	}
	switch backend.Kind(f.Kind) {
	case backend.Exponential:
		return "exp:" + f.Mean.String()
	case backend.LogNormal:
		return "lognormal:" + f.Mean.String() + ":" + strconv.FormatFloat(f.Sigma, 'g', -1, 64)
	}
	return f.Mean.String()
}

func (f *serviceFlag) Set(s string) error {
	parts := strings.Split(s, ":")
	d := backend.Dist{Kind: backend.Constant, Sigma: 0.5}
	switch {
	case len(parts) == 1:
	case len(parts) == 2 && parts[0] == "exp":
		d.Kind = backend.Exponential
	case (len(parts) == 2 || len(parts) == 3) && parts[0] == "lognormal":
		d.Kind = backend.LogNormal
	default:
		return errors.New("want DURATION, exp:DURATION or lognormal:DURATION[:SIGMA]")
	}
	mean, err := time.ParseDuration(parts[min(1, len(parts)-1)])
	if err != nil || mean <= 0 {
		return errors.New("the mean must be a duration above 0, such as 20ms")
	}
	d.Mean = mean
	if len(parts) == 3 {
		sigma, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || !(sigma >= 0 && sigma <= 10) {
			return errors.New("SIGMA must be a number from 0 to 10")
		}
		d.Sigma = sigma
	}
	if d.Kind != backend.LogNormal {
		d.Sigma = 0
	}
	*f = serviceFlag(d)
	return nil
}

// costFlag is --cost: paths and the factors on their service times.
type costFlag map[string]float64

func (f costFlag) String() string {
	var b strings.Builder
	for i, p := range slices.Sorted(maps.Keys(f)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%g", p, f[p])
	}
	return b.String()
}

func (f costFlag) Set(s string) error {
	path, factor, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(path, "/") {
		return errors.New("want PATH=FACTOR with PATH starting with /, such as /report=5")
	}
	x, err := strconv.ParseFloat(factor, 64)
	if err != nil || !(x > 0) || math.IsInf(x, 0) {
		return errors.New("FACTOR must be a finite number above 0")
	}
	if _, dup := f[path]; dup {
		return fmt.Errorf("%s given twice", path)
	}
	f[path] = x
	return nil
}

// scheduleFlag is --schedule: capacity windows, none overlapping another.
type scheduleFlag []backend.Window

func (f *scheduleFlag) String() string {
	if f == nil {
		return ""
	}
	parts := make([]string, len(*f))
	for i, w := range *f {
		parts[i] = fmt.Sprintf("%v-%v:%d", w.From, w.To, w.Workers)
	}
	return strings.Join(parts, ",")
}

func (f *scheduleFlag) Set(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		w, err := parseWindow(item)
		if err != nil {
			return fmt.Errorf("%q: %v", item, err)
		}
		for _, o := range *f {
			if w.From < o.To && o.From < w.To {
				return fmt.Errorf("%q overlaps %v-%v", item, o.From, o.To)
			}
		}
		*f = append(*f, w)
	}
	return nil
}

func parseWindow(s string) (backend.Window, error) {
	var w backend.Window
	span, workers, ok := strings.Cut(s, ":")
	from, to, ok2 := strings.Cut(span, "-")
	if !ok || !ok2 {
		return w, errors.New("want FROM-TO:WORKERS, such as 30s-60s:5")
	}
	var err1, err2, err3 error
	w.From, err1 = time.ParseDuration(from)
	w.To, err2 = time.ParseDuration(to)
	w.Workers, err3 = strconv.Atoi(workers)
	switch {
	case err1 != nil || err2 != nil:
		return w, errors.New("FROM and TO must be durations, such as 30s")
	case err3 != nil || w.Workers < 0:
		return w, errors.New("WORKERS must be a whole number, 0 or more")
	case w.From < 0 || w.To <= w.From:
		return w, errors.New("want 0 ≤ FROM < TO")
	}
	return w, nil
}

// runBackend serves o until ctx is done, then ends the requests the
// backend holds, prints the summary and returns 0 (1 when it could not
// listen or stop).
func runBackend(ctx context.Context, o backendOpts, stdout, stderr io.Writer) int {
	b, err := backend.New(o.cfg)
	if err != nil {
		fmt.Fprintln(stderr, "spillway backend:", err)
		return 2
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		fmt.Fprintln(stderr, "spillway backend:", err)
		return 1
	}
	h := &backendHandler{b: b}
	srv := httpserver.New(httpserver.Config{Handler: h})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	start := time.Now()
	fmt.Fprintf(stdout, "spillway backend: serving http://%s; %s\n", ln.Addr(), describeBackend(&o.cfg))
	var tick <-chan time.Time
	if o.report > 0 {
		t := time.NewTicker(o.report)
		defer t.Stop()
		tick = t.C
	}
	var last backend.Stats
	code := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-served:
			fmt.Fprintln(stderr, "spillway backend:", err)
			code = 1
			break loop
		case <-tick:
			s := b.Stats()
			fmt.Fprintf(stdout, "spillway backend: at %v: %s; served %s req/s over the last %v\n",
				time.Since(start).Round(100*time.Millisecond), summarize(s, o.cfg.CountHeader), rate(float64(s.Served-last.Served)/o.report.Seconds()), o.report)
			last = s
		}
	}
	b.Close() // answers what it holds at once, so Shutdown need not wait for it
	sctx, cancel := context.WithTimeout(context.Background(), backendStopGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		if n := h.active.Load(); n > 0 {
			fmt.Fprintf(stderr, "spillway backend: stopping: %d answers still being written after %v were cut\n", n, backendStopGrace)
			code = 1
		}
	}
	fmt.Fprintf(stdout, "spillway backend: stopped after %v: %s\n", time.Since(start).Round(100*time.Millisecond), summarize(b.Stats(), o.cfg.CountHeader))
	return code
}

// describeBackend is the start line's account of the capacity.
func describeBackend(c *backend.Config) string {
	mean := time.Duration(float64(c.Service.Mean) * c.SlowDown)
	var b strings.Builder
	fmt.Fprintf(&b, "capacity %s req/s (%d workers / %v mean service time", rate(float64(c.Workers)/mean.Seconds()), c.Workers, mean)
	if c.SlowDown != 1 {
		fmt.Fprintf(&b, ", slow-down %g included", c.SlowDown)
	}
	fmt.Fprintf(&b, "), service %s, queue %d", (*serviceFlag)(&c.Service), c.Queue)
	for _, w := range c.Schedule {
		fmt.Fprintf(&b, ", %v-%v: %d workers, %s req/s", w.From, w.To, w.Workers, rate(float64(w.Workers)/mean.Seconds()))
	}
	if c.ErrorRate > 0 {
		fmt.Fprintf(&b, ", errors %g%% (%d)", 100*c.ErrorRate, c.ErrorStatus)
	}
	if c.HangRate > 0 {
		fmt.Fprintf(&b, ", hangs %g%%", 100*c.HangRate)
	}
	if c.HonorCancel {
		b.WriteString(", honor-cancel")
	}
	fmt.Fprintf(&b, "; health %s, stats %s", c.HealthPath, statsPath)
	return b.String()
}

// summarize is the summary of s that the reports and the last line print.
func summarize(s backend.Stats, header string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "arrived %d, served %d (late %d), errors %d, hung %d, rejected %d, cancelled %d, max in flight %d",
		s.Arrived, s.Served, s.Late, s.Errors, s.Hung, s.Rejected, s.Cancelled, s.MaxInFlight)
	if len(s.ByHeader) > 0 {
		fmt.Fprintf(&b, "; by %s:", header)
		for i, v := range slices.Sorted(maps.Keys(s.ByHeader)) {
			if i > 0 {
				b.WriteByte(',')
			}
			label := v
			if label == "" {
				label = "(none)"
			}
			fmt.Fprintf(&b, " %s %d", label, s.ByHeader[v])
		}
	}
	return b.String()
}

// rate formats a rate in requests a second: whole numbers as such, others
// to one decimal.
func rate(x float64) string {
	if x == math.Trunc(x) || x >= 1000 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

// backendHandler answers GET /stats and hands everything else to the
// backend.
type backendHandler struct {
	b      *backend.Backend
	active atomic.Int64 // requests being answered
}

// backendStats is the JSON of /stats.
type backendStats struct {
	backend.Stats
	Capacity int `json:"capacity"` // workers now (the schedule's, in a window)
}

func (h *backendHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.active.Add(1)
	defer h.active.Add(-1)
	if r.URL.Path != statsPath {
		h.b.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := json.Marshal(backendStats{Stats: h.b.Stats(), Capacity: h.b.Capacity()})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(body, '\n'))
}
