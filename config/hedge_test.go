package config

import (
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/retry"
)

// Hedging is off without a hedge section; an empty one gets the defaults
// the reference documents (written out here by hand); the fields given map
// onto retry.HedgeConfig one to one.
func TestHedgeConfig(t *testing.T) {
	const head = "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\n"
	off := mustParse(t, t.TempDir(), head+"routes: [{cluster: app}]\n"+clus, noEnv)
	if h, ok := off.Routes[0].Policies.Retry.HedgeConfig(); ok {
		t.Errorf("no hedge section: hedging on, %+v", h)
	}
	def := mustParse(t, t.TempDir(), head+"routes: [{cluster: app, policies: {retry: {hedge: {}}}}]\n"+clus, noEnv)
	h, ok := def.Routes[0].Policies.Retry.HedgeConfig()
	check(t, cases{
		{"empty hedge: on", ok, true},
		{"empty hedge: defaults", h, retry.HedgeConfig{Delay: 0, Quantile: 0.95, MaxHedges: 1, Samples: 128, MaxAge: 60}},
	})
	set := mustParse(t, t.TempDir(), head+"routes: [{cluster: app, policies: {retry: {hedge: {delay: 50ms, max_hedges: 3}}}}]\n"+clus, noEnv)
	h, ok = set.Routes[0].Policies.Retry.HedgeConfig()
	check(t, cases{
		{"fixed delay: on", ok, true},
		{"fixed delay", h, retry.HedgeConfig{Delay: 0.05, Quantile: 0.95, MaxHedges: 3, Samples: 128, MaxAge: 60}},
		{"delay as a Duration", set.Routes[0].Policies.Retry.Hedge.Delay, Duration(50 * time.Millisecond)},
	})
}

// Bad hedge values name the value's line and column (counted by hand
// in the input).
func TestHedgeProblems(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"max_hedges 0", pl + "routes: [{cluster: app, policies: {retry: {hedge: {max_hedges: 0}}}}]\n" + clus,
			[]string{`f.yaml:3:64: routes[0].policies.retry.hedge.max_hedges: must be at least 1, got 0`}},
		{"max_hedges 11", pl + "routes: [{cluster: app, policies: {retry: {hedge: {max_hedges: 11}}}}]\n" + clus,
			[]string{`f.yaml:3:64: routes[0].policies.retry.hedge.max_hedges: must be at most 10, got 11`}},
		{"quantile 1", pl + "routes: [{cluster: app, policies: {retry: {hedge: {quantile: 1}}}}]\n" + clus,
			[]string{`f.yaml:3:62: routes[0].policies.retry.hedge.quantile: must be at most 0.999999, got 1`}},
		{"samples 10", pl + "routes: [{cluster: app, policies: {retry: {hedge: {samples: 10}}}}]\n" + clus,
			[]string{`f.yaml:3:61: routes[0].policies.retry.hedge.samples: must be at least 20, got 10`}},
		{"negative delay", pl + "routes: [{cluster: app, policies: {retry: {hedge: {delay: -1s}}}}]\n" + clus,
			[]string{`f.yaml:3:59: routes[0].policies.retry.hedge.delay: must not be negative, got "-1s"`}},
		{"quantile with a fixed delay", pl + "routes: [{cluster: app, policies: {retry: {hedge: {delay: 10ms, quantile: 0.5}}}}]\n" + clus,
			[]string{`f.yaml:3:75: routes[0].policies.retry.hedge.quantile: only with delay 0 (the tracked quantile)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, tc.in, noEnv)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}
