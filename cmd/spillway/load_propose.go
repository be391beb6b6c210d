package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"

	"github.com/spillwayhq/spillway/loadgen"
	"github.com/spillwayhq/spillway/propose"
)

const proposeSummary = `--propose (implies --knee) ends with a gateway configuration for the
tested service (package propose): a listener, a route and a cluster with
the target's host:port as its endpoint, and limits from the knee, each with
its formula in a comment — a rate limit at the safe rate (per gateway: ÷
--replicas on the memory store; global with --redis), a fixed admission
limit 10% below the knee's concurrency (Little's law: knee rate × mean
latency there), a FIFO queue whose max_wait is 2 × the service time (the
lowest step's p50) and a request timeout of 2 × the knee's p99. It is
printed after the table (or to --propose-file) and spillway validate
accepts it as it is.`

// buildPropose checks the --propose flags and fills o.propose from the
// target's URL. set holds the flags given.
func (o *loadOpts) buildPropose(f *loadFlags, set map[string]bool) error {
	if !f.propose {
		for _, name := range []string{"replicas", "route", "redis", "propose-file"} {
			if set[name] {
				return fmt.Errorf("--%s: needs --propose", name)
			}
		}
		return nil
	}
	if f.replicas < 1 {
		return fmt.Errorf("--replicas: must be at least 1, got %d", f.replicas)
	}
	if o.output == "json" && o.proposeFile == "" {
		return errors.New("--propose: with --output json, write the config to --propose-file")
	}
	endpoint, tls, err := proposeEndpoint(o.cfg.Targets)
	if err != nil {
		return err
	}
	o.knee = true
	o.propose = &propose.Options{Route: f.route, Endpoint: endpoint, TLS: tls, Replicas: f.replicas,
		Redis: f.redis, Source: o.cfg.Targets[0].URL}
	if f.targets != "" {
		o.propose.Source = f.targets
	}
	if err := o.propose.Check(); err != nil { // a bad --route or --redis now, not after the run
		return fmt.Errorf("--propose: %v", err)
	}
	return nil
}

// proposeEndpoint is the host:port every target goes to, and whether over
// https; targets on several services are refused (one cluster each).
func proposeEndpoint(targets []loadgen.Target) (endpoint string, tls bool, err error) {
	for i, t := range targets {
		u, err := url.Parse(t.URL)
		if err != nil || u.Hostname() == "" {
			return "", false, fmt.Errorf("--propose: target %q has no host", t.URL)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		ep := net.JoinHostPort(u.Hostname(), port)
		if i > 0 && ep != endpoint {
			return "", false, fmt.Errorf("--propose: the targets go to %s and %s; propose for one service at a time", endpoint, ep)
		}
		endpoint, tls = ep, u.Scheme == "https"
	}
	return endpoint, tls, nil
}

// writePropose writes the proposal for knee, after the table or to
// --propose-file; it returns the exit status (1 when there is no knee to
// propose from).
func writePropose(o *loadOpts, res loadgen.Result, knee *loadgen.Knee, stdout, stderr io.Writer) int {
	if knee == nil {
		knee = &loadgen.Knee{}
	}
	p, err := propose.Make(*knee, res.Steps, *o.propose)
	if err != nil {
		fmt.Fprintf(stderr, "spillway load: --propose: nothing proposed: %v\n", err)
		return 1
	}
	if o.proposeFile != "" {
		err = writeFile(o.proposeFile, func(w io.Writer) error { _, err := io.WriteString(w, p.YAML()); return err })
	} else {
		_, err = io.WriteString(stdout, "\n"+p.YAML())
	}
	if err != nil {
		fmt.Fprintf(stderr, "spillway load: --propose: %v\n", err)
		return 1
	}
	return 0
}
