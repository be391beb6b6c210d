package loadgen

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/spillwayhq/spillway/shed"
)

// ErrConfig is wrapped by every configuration error of Run and of the
// parsers; the message names the field (or file and line) and the reason.
var ErrConfig = errors.New("loadgen: invalid configuration")

// Bounds on a configuration, so that a run's memory stays bounded.
const (
	maxClasses  = 16      // criticality classes in a mix
	maxVars     = 32      // variables
	maxVarRange = 1 << 40 // values of one variable
	maxAbortFor = 10 * time.Minute
	minRate     = 0.001 // per second
	maxRate     = 1e7
)

// Defaults for zero Config fields.
const (
	DefaultTimeout     = time.Second
	DefaultMaxInFlight = 10000
	DefaultMaxSendLag  = 5 * time.Millisecond
	DefaultRetries     = 3
	DefaultBackoffBase = 50 * time.Millisecond
	DefaultBackoffCap  = time.Second
	DefaultBudgetRatio = 0.1
	DefaultAbortFor    = 5 * time.Second
)

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// withDefaults returns cfg checked and with its zero fields filled in.
func withDefaults(cfg Config) (Config, error) {
	if err := checkShape(&cfg); err != nil {
		return cfg, err
	}
	c := &cfg.Client
	if c.Retry != RetryNone && c.Retries == 0 {
		c.Retries = DefaultRetries
	}
	if c.Retry == RetryNone {
		c.Retries = 0
	}
	c.BackoffBase = orDuration(c.BackoffBase, DefaultBackoffBase)
	c.BackoffCap = orDuration(c.BackoffCap, DefaultBackoffCap)
	if c.BudgetRatio == 0 {
		c.BudgetRatio = DefaultBudgetRatio
	}
	if cfg.ClassHeader == "" {
		cfg.ClassHeader = shed.ClassHeader
	}
	cfg.ClassHeader = http.CanonicalHeaderKey(cfg.ClassHeader)
	cfg.Timeout = orDuration(cfg.Timeout, DefaultTimeout)
	if cfg.Deadline == 0 {
		cfg.Deadline = cfg.Timeout * time.Duration(1+c.Retries)
		if c.Retry == RetryBackoff || c.Retry == RetryBudget {
			cfg.Deadline += c.BackoffCap * time.Duration(c.Retries)
		}
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	cfg.MaxSendLag = orDuration(cfg.MaxSendLag, DefaultMaxSendLag)
	cfg.Abort.For = orDuration(cfg.Abort.For, DefaultAbortFor)
	return cfg, checkDerived(&cfg)
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// checkShape checks the fields as given, before defaults.
func checkShape(cfg *Config) error {
	if len(cfg.Targets) == 0 {
		return configErr("Targets is empty, want at least one target")
	}
	if len(cfg.Steps) == 0 {
		return configErr("Steps is empty, want at least one step")
	}
	for i, s := range cfg.Steps {
		if !(s.Rate >= minRate && s.Rate <= maxRate) {
			return configErr("Steps[%d].Rate = %v, want %v to %v per second", i, s.Rate, minRate, maxRate)
		}
		if s.Duration <= 0 {
			return configErr("Steps[%d].Duration = %v, want > 0", i, s.Duration)
		}
	}
	if cfg.Arrivals != Constant && cfg.Arrivals != Poisson {
		return configErr("Arrivals = %d, want Constant or Poisson", cfg.Arrivals)
	}
	if err := checkClasses(cfg.Classes); err != nil {
		return err
	}
	if cfg.ClassHeader != "" && !validToken(cfg.ClassHeader) {
		return configErr("ClassHeader = %q is not a valid header name", cfg.ClassHeader)
	}
	if err := checkVars(cfg.Vars); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"Timeout", cfg.Timeout}, {"Deadline", cfg.Deadline}, {"MaxSendLag", cfg.MaxSendLag},
		{"Client.BackoffBase", cfg.Client.BackoffBase}, {"Client.BackoffCap", cfg.Client.BackoffCap},
		{"Abort.P99", cfg.Abort.P99}, {"Abort.For", cfg.Abort.For},
	} {
		if f.d < 0 {
			return configErr("%s = %v, want >= 0 (0 means the default)", f.name, f.d)
		}
	}
	if cfg.MaxInFlight < 0 {
		return configErr("MaxInFlight = %d, want >= 1 (0 means %d)", cfg.MaxInFlight, DefaultMaxInFlight)
	}
	return checkPolicy(cfg.Client, cfg.Abort)
}

func checkClasses(classes []Class) error {
	if len(classes) > maxClasses {
		return configErr("Classes has %d classes, want at most %d", len(classes), maxClasses)
	}
	sum := 0.0
	seen := make(map[string]bool, len(classes))
	for i, c := range classes {
		if c.Name == "" || !validHeaderValue(c.Name) {
			return configErr("Classes[%d].Name = %q, want a non-empty header value", i, c.Name)
		}
		if seen[c.Name] {
			return configErr("Classes[%d].Name = %q appears twice", i, c.Name)
		}
		seen[c.Name] = true
		if !(c.Share > 0 && c.Share <= 1) {
			return configErr("Classes[%d].Share = %v, want a share in (0, 1]", i, c.Share)
		}
		sum += c.Share
	}
	if sum > 1+1e-9 {
		return configErr("Classes' shares sum to %v, want at most 1 (the rest carries no class)", sum)
	}
	return nil
}

func checkVars(vars map[string]int) error {
	if len(vars) > maxVars {
		return configErr("Vars has %d variables, want at most %d", len(vars), maxVars)
	}
	names, _ := varIndex(vars)
	for _, name := range names {
		n := vars[name]
		if !validVarName(name) {
			return configErr("Vars[%q]: a name is a letter or _ followed by letters, digits or _", name)
		}
		if name == seqVar {
			return configErr("Vars[%q]: {{seq}} is the arrival's sequence number, not a variable to set", name)
		}
		if n < 1 || n > maxVarRange {
			return configErr("Vars[%q] = %d, want 1 to %d values", name, n, maxVarRange)
		}
	}
	return nil
}

func checkPolicy(c ClientPolicy, a Abort) error {
	if c.Retry < RetryNone || c.Retry > RetryBudget {
		return configErr("Client.Retry = %d is not a known retry mode", c.Retry)
	}
	if c.Retries < 0 || c.Retries > 100 {
		return configErr("Client.Retries = %d, want 0 to 100 (0 means %d)", c.Retries, DefaultRetries)
	}
	if !(c.BudgetRatio >= 0) || math.IsInf(c.BudgetRatio, 0) {
		return configErr("Client.BudgetRatio = %v, want a finite ratio >= 0 (0 means %v)", c.BudgetRatio, DefaultBudgetRatio)
	}
	if !(c.BudgetMin >= 0) || math.IsInf(c.BudgetMin, 0) {
		return configErr("Client.BudgetMin = %v, want a finite rate >= 0 per second", c.BudgetMin)
	}
	if !(a.ErrorRate >= 0 && a.ErrorRate <= 1) {
		return configErr("Abort.ErrorRate = %v, want a share in [0, 1] (0: never)", a.ErrorRate)
	}
	if a.For != 0 && (a.For < time.Second || a.For > maxAbortFor) {
		return configErr("Abort.For = %v, want 1s to %v (it is evaluated each second)", a.For, maxAbortFor)
	}
	return nil
}

// checkDerived checks the fields that defaults filled in or that depend on
// each other.
func checkDerived(cfg *Config) error {
	if cfg.Deadline < cfg.Timeout {
		return configErr("Deadline = %v is below Timeout = %v", cfg.Deadline, cfg.Timeout)
	}
	if c := cfg.Client; c.BackoffCap < c.BackoffBase {
		return configErr("Client.BackoffCap = %v is below Client.BackoffBase = %v (a zero one is its default)", c.BackoffCap, c.BackoffBase)
	}
	if cfg.Deadline > 24*time.Hour {
		return configErr("Deadline = %v, want at most 24h", cfg.Deadline)
	}
	if cfg.MaxInFlight > 1_000_000 {
		return configErr("MaxInFlight = %d, want at most 1000000", cfg.MaxInFlight)
	}
	_, index := varIndex(cfg.Vars)
	for i, t := range cfg.Targets {
		if err := checkTarget(t, index); err != nil {
			return fmt.Errorf("%w: Targets[%d]: %w", ErrConfig, i, err)
		}
	}
	return nil
}

// checkTarget checks one target: method, URL (with every variable as 0),
// weight, header names.
func checkTarget(t Target, index map[string]int) error {
	if t.Method != "" && !validToken(t.Method) {
		return fmt.Errorf("Method = %q is not a valid HTTP method", t.Method)
	}
	if !(t.Weight >= 0) || math.IsInf(t.Weight, 0) {
		return fmt.Errorf("Weight = %v, want a finite weight >= 0 (0 means 1)", t.Weight)
	}
	u, err := compile(t.URL, index)
	if err != nil {
		return fmt.Errorf("URL: %w", err)
	}
	if err := checkURL(string(u.render(nil, nil, 0))); err != nil {
		return err
	}
	for name, values := range t.Header {
		if !validToken(name) {
			return fmt.Errorf("Header %q is not a valid header name", name)
		}
		for _, v := range values {
			if _, err := compile(v, index); err != nil {
				return fmt.Errorf("Header %s: %w", name, err)
			}
		}
	}
	if _, err := compile(string(t.Body), index); err != nil {
		return fmt.Errorf("Body: %w", err)
	}
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q: want an http:// or https:// URL", s)
	}
	if u.Host == "" {
		return fmt.Errorf("URL %q has no host", s)
	}
	return nil
}

// validToken reports whether s is an RFC 9110 token (a method or a field
// name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || isDelimiter(c) {
			return false
		}
	}
	return true
}

func isDelimiter(c byte) bool {
	switch c {
	case '"', '(', ')', ',', '/', ':', ';', '<', '=', '>', '?', '@', '[', '\\', ']', '{', '}':
		return true
	}
	return false
}

// validHeaderValue reports whether s may be sent as a field value as it is:
// no control characters and no leading or trailing space.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return len(s) == 0 || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
}
