package loadgen

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestConfigErrors(t *testing.T) {
	ok := func() Config {
		return Config{Targets: []Target{{URL: "http://127.0.0.1:1/"}}, Steps: []Step{{Rate: 10, Duration: time.Second}}}
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no targets", func(c *Config) { c.Targets = nil }, "Targets is empty"},
		{"no steps", func(c *Config) { c.Steps = nil }, "Steps is empty"},
		{"zero rate", func(c *Config) { c.Steps[0].Rate = 0 }, "Steps[0].Rate = 0"},
		{"NaN rate", func(c *Config) { c.Steps[0].Rate = math.NaN() }, "Steps[0].Rate = NaN"},
		{"no duration", func(c *Config) { c.Steps = append(c.Steps, Step{Rate: 1}) }, "Steps[1].Duration = 0s"},
		{"arrivals", func(c *Config) { c.Arrivals = 7 }, "Arrivals = 7"},
		{"share", func(c *Config) { c.Classes = []Class{{"a", 0.6}, {"b", 0.6}} }, "sum to 1.2"},
		{"class name", func(c *Config) { c.Classes = []Class{{"a\n", 0.5}} }, `Classes[0].Name = "a\n"`},
		{"class header", func(c *Config) { c.ClassHeader = "X Class" }, `ClassHeader = "X Class"`},
		{"var range", func(c *Config) { c.Vars = map[string]int{"user": 0} }, `Vars["user"] = 0`},
		{"var seq", func(c *Config) { c.Vars = map[string]int{"seq": 3} }, `Vars["seq"]`},
		{"timeout", func(c *Config) { c.Timeout = -time.Second }, "Timeout = -1s"},
		{"deadline", func(c *Config) { c.Timeout, c.Deadline = 2*time.Second, time.Second }, "Deadline = 1s is below Timeout = 2s"},
		{"in flight", func(c *Config) { c.MaxInFlight = -1 }, "MaxInFlight = -1"},
		{"retry mode", func(c *Config) { c.Client.Retry = 9 }, "Client.Retry = 9"},
		{"retries", func(c *Config) { c.Client.Retries = -1 }, "Client.Retries = -1"},
		{"backoff", func(c *Config) { c.Client.BackoffBase, c.Client.BackoffCap = time.Second, time.Millisecond }, "Client.BackoffCap = 1ms is below"},
		{"backoff default", func(c *Config) { c.Client.BackoffBase = 2 * time.Second }, "Client.BackoffCap = 1s is below Client.BackoffBase = 2s"},
		{"budget", func(c *Config) { c.Client.BudgetRatio = -1 }, "Client.BudgetRatio = -1"},
		{"abort rate", func(c *Config) { c.Abort.ErrorRate = 2 }, "Abort.ErrorRate = 2"},
		{"abort for", func(c *Config) { c.Abort.For = time.Millisecond }, "Abort.For = 1ms"},
		{"method", func(c *Config) { c.Targets[0].Method = "G T" }, `Targets[0]: Method = "G T"`},
		{"scheme", func(c *Config) { c.Targets[0].URL = "ftp://h/" }, `Targets[0]: URL "ftp://h/": want an http://`},
		{"unknown var", func(c *Config) { c.Targets[0].URL = "http://h/{{usr}}" }, "Targets[0]: URL: unknown variable {{usr}} (known: seq)"},
		{"body var", func(c *Config) { c.Targets[0].Body = []byte("{{x}}") }, "Targets[0]: Body: unknown variable {{x}}"},
		{"header", func(c *Config) { c.Targets[0].Header = http.Header{"A B": {"1"}} }, `Targets[0]: Header "A B"`},
		{"weight", func(c *Config) { c.Targets[0].Weight = -1 }, "Targets[0]: Weight = -1"},
	} {
		cfg := ok()
		tc.edit(&cfg)
		_, err := Run(context.Background(), cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrConfig containing %q", tc.name, err, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	base := Config{Targets: []Target{{URL: "http://h/"}}, Steps: []Step{{Rate: 1, Duration: time.Second}}}
	for _, tc := range []struct {
		client   ClientPolicy
		deadline time.Duration
	}{
		{ClientPolicy{}, time.Second},
		{ClientPolicy{Retry: RetryImmediate}, 4 * time.Second},
		{ClientPolicy{Retry: RetryImmediate, Retries: 1}, 2 * time.Second},
		{ClientPolicy{Retry: RetryBackoff}, 4*time.Second + 3*time.Second},
		{ClientPolicy{Retry: RetryBudget, Retries: 2, BackoffCap: 100 * time.Millisecond}, 3*time.Second + 200*time.Millisecond},
	} {
		cfg := base
		cfg.Client = tc.client
		got, err := withDefaults(cfg)
		if err != nil || got.Deadline != tc.deadline || got.Timeout != time.Second || got.MaxInFlight != 10000 ||
			got.MaxSendLag != 5*time.Millisecond || got.ClassHeader != "Spillway-Criticality" || got.Abort.For != 5*time.Second {
			t.Errorf("%+v: defaults %+v, %v; want Deadline %v", tc.client, got, err, tc.deadline)
		}
	}
}

// Constant arrivals fall at i/rate exactly, below the step's end; Poisson
// gaps average 1/rate.
func TestGaps(t *testing.T) {
	g := gaps{kind: Constant, mean: float64(time.Second) / 3}
	var offs []time.Duration
	for off, ok := g.next(time.Second); ok; off, ok = g.next(time.Second) {
		offs = append(offs, off)
	}
	want := []time.Duration{0, 333333333, 666666666}
	if len(offs) != 3 || offs[0] != want[0] || offs[1] != want[1] || offs[2] != want[2] {
		t.Errorf("constant 3/s over 1 s: %v, want %v", offs, want)
	}
	g = gaps{kind: Constant, mean: float64(time.Second) / 200}
	n := 0
	for _, ok := g.next(5 * time.Second); ok; _, ok = g.next(5 * time.Second) {
		n++
	}
	if n != 1000 {
		t.Errorf("constant 200/s over 5 s: %d arrivals, want 1000", n)
	}
	g = gaps{kind: Poisson, mean: float64(time.Millisecond), rnd: rand.New(rand.NewPCG(1, 2))}
	n = 0
	for _, ok := g.next(10 * time.Second); ok; _, ok = g.next(10 * time.Second) {
		n++
	}
	if n < 9700 || n > 10300 { // 10000 expected, sd 100
		t.Errorf("Poisson 1000/s over 10 s: %d arrivals, want 10000 ± 3%%", n)
	}
}

func TestTemplate(t *testing.T) {
	index := map[string]int{"a": 0, "b": 1}
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"/u/{{a}}/{{ b }}?s={{seq}}", "/u/7/12?s=99"},
		{"{{a}}{{a}}", "77"},
		{"{{not a name}} {{}} {{a", "{{not a name}} {{}} {{a"},
		{`{"x": {{b}}}`, `{"x": 12}`},
	} {
		tm, err := compile(tc.in, index)
		if err != nil {
			t.Errorf("compile(%q): %v", tc.in, err)
			continue
		}
		if got := string(tm.render(nil, []int64{7, 12}, 99)); got != tc.want {
			t.Errorf("render(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if tm, _ := compile("/x/{{seq}}", index); tm.static() {
		t.Error("a template with {{seq}} is static")
	}
	if _, err := compile("{{c}}", index); err == nil || err.Error() != "unknown variable {{c}} (known: a, b, seq)" {
		t.Errorf("compile({{c}}) error %v", err)
	}
}
