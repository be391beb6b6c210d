package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/loadgen"
	"github.com/spillwayhq/spillway/sim"
)

const simConfigSummary = `Run a gateway config file's policies under virtual time: the file is loaded by the
gateway's own loader and each route's real policy objects are built from it (rate-limit
rules on the memory store, the cluster's admission, breaker and balancer, the route's
retries with their budget, the clusters' active health checks), in front of a simulated
backend per endpoint, under simulated Poisson load. Prints the table of spillway load and
the knee; --svg draws each policy's state second by second.`

// simConfig runs "spillway sim config FILE [flags]".
func simConfig(args []string, stdout, stderr io.Writer) int {
	const cmd = "spillway sim config"
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	route := fs.String("route", "", "send the load to this route only (default: every route, in equal shares)")
	clients := fs.Int("clients", 100, "distinct client addresses (the key of rate-limit rules on ip)")
	backend := fs.String("backend", "workers=10,service=100ms,dist=exp,errors=0,queue=1000,cancel=false",
		"each endpoint's backend: workers, mean service time, dist exp|const, error share (500s), queue, cancel (frees the place of a client that left)")
	schedule := fs.String("schedule", "", "capacity changes: [ENDPOINT@]FROM-TO:WORKERS, comma-separated, as 30s-60s:5")
	rate := fs.String("rate", "50:200:50", "load in requests/s: N, FROM:TO:BY or N,N,…")
	step := fs.Duration("step", 10*time.Second, "duration of each rate step")
	classes := fs.String("classes", "", "class mix, as critical=0.3,sheddable=0.7 (used on routes with class_header)")
	timeout := fs.Duration("timeout", time.Second, "client timeout per attempt")
	retryMode := fs.String("retry", "none", "client retries: none, immediate, backoff or budget")
	retries := fs.Int("retries", 3, "client retries at most (with --retry)")
	seed := fs.Uint("seed", 1, "random seed: runs are deterministic for a seed")
	svg := fs.String("svg", "", "also write the policies' state over time to this SVG file")
	file, rest := "", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, rest = args[0], args[1:]
	}
	if code, done := parse(fs, cmd+" FILE", simConfigSummary, rest, stdout, stderr); done {
		return code
	}
	if file == "" {
		fmt.Fprintf(stderr, "%s: a config file is needed: %s FILE [flags]\n", cmd, cmd)
		return 2
	}
	m, errs := simConfigModel(*route, *clients, *backend, *schedule, *rate, *step, *classes, *timeout, *retryMode, *retries, *seed)
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(stderr, "%s: %v\n", cmd, e)
		}
		return 2
	}
	cfg, err := config.Load(file)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 2
	}
	m.Config = cfg
	res, series, err := sim.SimulateConfig(m)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	fmt.Fprintf(stdout, "%s: %s\n", file, describeSim(&m))
	knee, _ := loadgen.FindKnee(res.Steps, loadgen.KneeCriteria{})
	if err := loadgen.WriteTable(stdout, res, &knee); err != nil {
		return fail(stderr, cmd, err)
	}
	if *svg != "" {
		if err := writeFile(*svg, func(w io.Writer) error { return sim.WriteConfigSVG(w, series) }); err != nil {
			fmt.Fprintf(stderr, "%s: --svg: %v\n", cmd, err)
			return 1
		}
	}
	return 0
}

// simConfigModel checks the flags, naming every bad one.
func simConfigModel(route string, clients int, backend, schedule, rate string, step time.Duration, classes string,
	timeout time.Duration, retryMode string, retries int, seed uint) (sim.ConfigModel, []error) {
	m := sim.ConfigModel{Route: route, Clients: clients, Timeout: timeout, Seed: uint32(seed)}
	var errs []error
	bad := func(flag string, err error) { errs = append(errs, fmt.Errorf("--%s: %v", flag, err)) }
	var err error
	if m.Backend, err = sim.ParseBackend(backend); err != nil {
		bad("backend", err)
	}
	if m.Schedule, err = sim.ParseSchedule(schedule); err != nil {
		bad("schedule", err)
	}
	if m.Steps, err = loadgen.ParseRate(rate, step); err != nil {
		bad("rate", err)
	}
	if m.Classes, err = loadgen.ParseClasses(classes); err != nil {
		bad("classes", err)
	}
	modes := map[string]loadgen.RetryMode{"none": loadgen.RetryNone, "immediate": loadgen.RetryImmediate,
		"backoff": loadgen.RetryBackoff, "budget": loadgen.RetryBudget}
	mode, ok := modes[retryMode]
	if !ok {
		bad("retry", fmt.Errorf("want none, immediate, backoff or budget, got %q", retryMode))
	}
	m.Client = loadgen.ClientPolicy{Retry: mode, Retries: retries}
	switch {
	case clients < 1 || clients > 1<<24:
		bad("clients", fmt.Errorf("want 1 to %d, got %d", 1<<24, clients))
	case timeout <= 0:
		bad("timeout", fmt.Errorf("want more than 0, got %v", timeout))
	case retries < 0 || retries > 10:
		bad("retries", fmt.Errorf("want 0 to 10, got %d", retries))
	case seed > 1<<32-1:
		bad("seed", fmt.Errorf("want at most %d, got %d", uint32(1<<32-1), seed))
	}
	return m, errs
}

// describeSim is the run's one-line header.
func describeSim(m *sim.ConfigModel) string {
	b := m.Backend
	routes := "every route"
	if m.Route != "" {
		routes = "route " + m.Route
	}
	retry := "no client retries"
	if m.Client.Retry != loadgen.RetryNone {
		retry = fmt.Sprintf("client retries %s × %d", [...]string{"none", "immediate", "backoff", "budget"}[m.Client.Retry], m.Client.Retries)
	}
	return fmt.Sprintf("simulated: %s; each endpoint %d workers × %v %s (%.0f/s), queue %d; %d clients, timeout %v, %s; seed %d",
		routes, b.Workers, b.Service, b.Dist, float64(b.Workers)/b.Service.Seconds(), b.Queue, m.Clients, m.Timeout, retry, m.Seed)
}
