package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/loadgen"
	"github.com/spillwayhq/spillway/propose"
)

// loadOpts is a parsed `spillway load` command line.
type loadOpts struct {
	cfg      loadgen.Config
	step     time.Duration // each rate's duration (--step, --duration)
	knee     bool
	cooldown time.Duration // pause before each bisection probe
	output   string        // table or json
	svg      string
	quiet    bool
	propose  *propose.Options // --propose: the gateway the proposal is for; nil without
	// proposeFile is where --propose writes the configuration; "": stdout,
	// after the table.
	proposeFile string
	// noConfirm (--no-confirm): --knee takes a trusted step or probe that
	// fails as failed, without measuring it again.
	noConfirm bool
}

// loadFlags holds the flag values that need more than the flag types.
type loadFlags struct {
	url, targets, method, body, rate string
	arrivals, retry, classes         string
	abortErrors                      float64
	cacert, cert, key                string
	insecure                         bool
	propose                          bool
	replicas                         int
	route, redis                     string
	headers                          headerFlag
	vars                             varsFlag
}

// parseLoad parses the flags; done says to exit with code (help: 0, a bad
// value: 2, one line on stderr naming the flag).
func parseLoad(args []string, stdout, stderr io.Writer) (o loadOpts, code int, done bool) {
	const cmd = "spillway load"
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := loadFlags{headers: headerFlag{}, vars: varsFlag{}}
	defineLoadFlags(fs, &o, &f)
	if code, done := parse(fs, cmd, loadHelp, args, stdout, stderr); done {
		return o, code, true
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := o.build(&f, set); err != nil {
		fmt.Fprintf(stderr, "%s: %v (see %s -h)\n", cmd, err, cmd)
		return o, 2, true
	}
	return o, 0, false
}

func defineLoadFlags(fs *flag.FlagSet, o *loadOpts, f *loadFlags) {
	c := &o.cfg
	fs.StringVar(&f.url, "url", "", "send every request to this `URL` (or give --targets)")
	fs.StringVar(&f.targets, "targets", "", "read the requests from this targets `FILE` (see above)")
	fs.StringVar(&f.method, "method", "GET", "--url: the requests' method")
	fs.Var(f.headers, "header", "`'NAME: VALUE'` added to every request (repeatable)")
	fs.StringVar(&f.body, "body", "", "--url: the requests' body")
	fs.StringVar(&f.rate, "rate", "", "requests per second: `SPEC` N, FROM:TO:BY (a ramp, inclusive) or N,N,... (required)")
	fs.DurationVar(&o.step, "step", 10*time.Second, "how long each rate of --rate is held")
	fs.DurationVar(&o.step, "duration", 10*time.Second, "the same as --step (for a single rate)")
	fs.StringVar(&f.arrivals, "arrivals", "constant", "arrival process: constant or poisson")
	fs.StringVar(&f.classes, "classes", "", "criticality mix, `NAME=SHARE,...` such as critical=0.3,sheddable=0.7 (shares sum to at most 1)")
	fs.StringVar(&c.ClassHeader, "class-header", "Spillway-Criticality", "the header carrying the class")
	fs.Var(f.vars, "var", "`NAME=N`: {{NAME}} in the URL, headers and body takes a value in 0…N−1 (repeatable)")
	fs.DurationVar(&c.Timeout, "timeout", time.Second, "each attempt's timeout; a call is good when answered 2xx within it")
	fs.DurationVar(&c.Deadline, "deadline", 0, "bound on a call with its retries (0: timeout × (1 + retries), plus the backoff)")
	fs.IntVar(&c.MaxInFlight, "max-inflight", 10000, "calls in flight at most; an arrival beyond is unsent (a failure)")
	fs.DurationVar(&c.MaxSendLag, "max-send-lag", 5*time.Millisecond, "a step whose send lag p99 is above this is INVALID")
	fs.StringVar(&f.retry, "retry", "none", "client retries: none, immediate, backoff (full jitter) or budget (backoff paid from a retry budget)")
	fs.IntVar(&c.Client.Retries, "retries", 3, "retries per call at most (with --retry other than none)")
	fs.DurationVar(&c.Client.BackoffBase, "backoff-base", 50*time.Millisecond, "backoff: the first retry's delay bound")
	fs.DurationVar(&c.Client.BackoffCap, "backoff-cap", time.Second, "backoff: the longest delay")
	fs.Float64Var(&c.Client.BudgetRatio, "budget-ratio", 0.1, "budget: retries per call at most")
	fs.Float64Var(&f.abortErrors, "abort-errors", 0, "stop when errors exceed this `PERCENT` over --abort-for (0: never)")
	fs.DurationVar(&c.Abort.P99, "abort-p99", 0, "stop when the p99 exceeds this over --abort-for (0: never)")
	fs.DurationVar(&c.Abort.For, "abort-for", 5*time.Second, "the window of the abort thresholds")
	fs.BoolVar(&c.HTTP2, "http2", false, "HTTP/2: ALPN over TLS, prior knowledge (h2c) on http:// URLs")
	fs.BoolVar(&f.insecure, "insecure", false, "do not verify the server's TLS certificate")
	fs.StringVar(&f.cacert, "cacert", "", "trust the CA certificates in this PEM `FILE`")
	fs.StringVar(&f.cert, "cert", "", "client certificate PEM `FILE` (with --key)")
	fs.StringVar(&f.key, "key", "", "client key PEM `FILE` (with --cert)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the arrivals, the mix and the variables")
	fs.BoolVar(&o.knee, "knee", false, "after the ramp, bisect to 5% between the last passing and first failing rate; print the knee and the safe rate")
	fs.DurationVar(&o.cooldown, "cooldown", 0, "--knee: pause before each probe so a backlog drains (0: --step)")
	fs.BoolVar(&o.noConfirm, "no-confirm", false, "--knee: take a failing step or probe as failed at once, without the second measurement at its rate")
	fs.StringVar(&o.output, "output", "table", "output: table or json (JSON lines)")
	fs.StringVar(&o.svg, "svg", "", "also write a chart (goodput and p99 against offered load) to this SVG `FILE`")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on stderr")
	fs.BoolVar(&f.propose, "propose", false, "after the knee (--propose implies --knee), print a gateway config with limits 10% below it (see above)")
	fs.IntVar(&f.replicas, "replicas", 1, "--propose: gateway instances sharing the traffic (each takes 1/N of the limits on the memory store)")
	fs.StringVar(&f.route, "route", "app", "--propose: the `NAME` of the proposed route and its cluster")
	fs.StringVar(&f.redis, "redis", "", "--propose: host:port of a Redis the gateways share; the rate limit is then global")
	fs.StringVar(&o.proposeFile, "propose-file", "", "--propose: write the config to this `FILE` instead of after the table")
}

// build checks the flags and fills o.cfg, naming the flag in its errors.
// set holds the flags given.
func (o *loadOpts) build(f *loadFlags, set map[string]bool) error {
	if err := o.checkScalars(f, set); err != nil {
		return err
	}
	c := &o.cfg
	steps, err := loadgen.ParseRate(f.rate, o.step)
	if err != nil {
		return fmt.Errorf("--rate: %v", plain(err))
	}
	c.Steps = steps
	if c.Targets, err = f.requests(); err != nil {
		return err
	}
	if f.classes != "" {
		if c.Classes, err = loadgen.ParseClasses(f.classes); err != nil {
			return fmt.Errorf("--classes: %v", plain(err))
		}
	}
	if len(f.vars) > 0 {
		c.Vars = f.vars
	}
	c.Arrivals = loadgen.Constant
	if f.arrivals == "poisson" {
		c.Arrivals = loadgen.Poisson
	}
	c.Client.Retry = retryModes[f.retry]
	if c.Client.Retry == loadgen.RetryNone {
		c.Client.Retries = 0
	}
	c.Abort.ErrorRate = f.abortErrors / 100
	if c.TLS, err = f.tlsConfig(); err != nil {
		return err
	}
	return o.buildPropose(f, set)
}

var retryModes = map[string]loadgen.RetryMode{
	"none": loadgen.RetryNone, "immediate": loadgen.RetryImmediate, "backoff": loadgen.RetryBackoff, "budget": loadgen.RetryBudget,
}

// plain is a parser's message without the "loadgen: invalid
// configuration: " that the flag's name replaces.
func plain(err error) string {
	return strings.TrimPrefix(err.Error(), loadgen.ErrConfig.Error()+": ")
}

func knownRetry(s string) bool {
	_, ok := retryModes[s]
	return ok
}

// checkScalars checks the flags whose values stand alone.
func (o *loadOpts) checkScalars(f *loadFlags, set map[string]bool) error {
	c := &o.cfg
	switch {
	case f.rate == "":
		return errors.New("--rate: required, such as --rate 100 or --rate 50:200:25")
	case (f.url == "") == (f.targets == ""):
		return errors.New("give either --url or --targets")
	case f.targets != "" && (set["method"] || set["body"]):
		return errors.New("--method and --body go with --url; a targets file names its own")
	case set["step"] && set["duration"]:
		return errors.New("--step and --duration are the same flag; give one")
	case o.step <= 0:
		return fmt.Errorf("--step: must be above 0, got %v", o.step)
	case f.arrivals != "constant" && f.arrivals != "poisson":
		return fmt.Errorf("--arrivals: must be constant or poisson, got %q", f.arrivals)
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("--output: must be table or json, got %q", o.output)
	case !knownRetry(f.retry):
		return fmt.Errorf("--retry: must be none, immediate, backoff or budget, got %q", f.retry)
	case set["retries"] && f.retry == "none":
		return errors.New("--retries: needs --retry immediate, backoff or budget")
	case !(f.abortErrors >= 0 && f.abortErrors <= 100):
		return fmt.Errorf("--abort-errors: must be a percentage from 0 to 100, got %v", f.abortErrors)
	case c.Timeout <= 0:
		return fmt.Errorf("--timeout: must be above 0, got %v", c.Timeout)
	case c.MaxInFlight < 1:
		return fmt.Errorf("--max-inflight: must be at least 1, got %d", c.MaxInFlight)
	case o.cooldown < 0:
		return fmt.Errorf("--cooldown: must be 0 or more, got %v", o.cooldown)
	case (f.cert == "") != (f.key == ""):
		return errors.New("--cert and --key go together")
	case set["class-header"] && f.classes == "":
		return errors.New("--class-header: needs --classes")
	}
	if o.cooldown == 0 {
		o.cooldown = o.step
	}
	return nil
}

// requests are the targets: --url's one, or the targets file's, with
// --header's headers added to each.
func (f *loadFlags) requests() ([]loadgen.Target, error) {
	var targets []loadgen.Target
	if f.url != "" {
		t := loadgen.Target{Method: f.method, URL: f.url, Header: http.Header{}}
		if f.body != "" {
			t.Body = []byte(f.body)
		}
		targets = []loadgen.Target{t}
	} else {
		data, err := os.ReadFile(f.targets)
		if err != nil {
			return nil, fmt.Errorf("--targets: %v", err)
		}
		if targets, err = loadgen.ParseTargets(f.targets, data); err != nil {
			return nil, fmt.Errorf("--targets: %v", plain(err))
		}
	}
	for i := range targets {
		if targets[i].Header == nil {
			targets[i].Header = http.Header{}
		}
		for name, values := range f.headers {
			for _, v := range values {
				targets[i].Header.Add(name, v)
			}
		}
	}
	return targets, nil
}

// tlsConfig is the TLS configuration the flags ask for; nil: the defaults.
func (f *loadFlags) tlsConfig() (*tls.Config, error) {
	if !f.insecure && f.cacert == "" && f.cert == "" {
		return nil, nil
	}
	tc := &tls.Config{InsecureSkipVerify: f.insecure}
	if f.cacert != "" {
		pem, err := os.ReadFile(f.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %v", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert: no PEM certificate in %s", f.cacert)
		}
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--cert, --key: %v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// headerFlag is --header: 'Name: value', repeatable.
type headerFlag http.Header

func (h headerFlag) String() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			parts = append(parts, name+": "+v)
		}
	}
	return strings.Join(parts, ", ")
}

func (h headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return errors.New("want 'NAME: VALUE', such as 'Authorization: Bearer x'")
	}
	http.Header(h).Add(name, strings.TrimSpace(value))
	return nil
}

// varsFlag is --var: NAME=N, repeatable (or comma lists), each name once.
type varsFlag map[string]int

func (v varsFlag) String() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(v)) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, v[name]))
	}
	return strings.Join(parts, ",")
}

func (v varsFlag) Set(s string) error {
	vars, err := loadgen.ParseVars(s)
	if err != nil {
		return errors.New(plain(err))
	}
	for name, n := range vars {
		if _, dup := v[name]; dup {
			return fmt.Errorf("%s given twice", name)
		}
		v[name] = n
	}
	return nil
}
