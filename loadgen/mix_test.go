package loadgen

import (
	"math"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// A run over two weighted targets with a variable and a class mix: the
// server sees every {{user}} value in range and spread, the classes' and
// targets' shares within a few percent of those asked, and the result's
// class counts and refusals match what the server saw and answered.
func TestMix(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Spillway-Criticality") == "sheddable" {
			w.Header().Set("Spillway-Reason", "ratelimit:per-ip")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	defer srv.Close()
	res := run(t, Config{
		Targets: []Target{
			{URL: srv.URL + "/users/{{user}}?n={{seq}}", Weight: 3},
			{Method: http.MethodPut, URL: srv.URL + "/orders", Body: []byte(`{"user": {{user}}}`),
				Header: http.Header{"X-User": {"u{{user}}"}}},
		},
		Steps:   []Step{{Rate: 1000, Duration: 2 * time.Second}},
		Vars:    map[string]int{"user": 50},
		Classes: []Class{{"critical", 0.3}, {"sheddable", 0.5}},
		Seed:    7,
	})
	s := res.Steps[0]
	seen := srv.seenAll()
	if s.Offered != 2000 || len(seen) != s.Sent || s.Sent < 1950 {
		t.Fatalf("Offered %d, Sent %d, server saw %d; want 2000 offered, nearly all sent", s.Offered, s.Sent, len(seen))
	}
	users := map[int]int{}
	classes := map[string]int{}
	var orders int
	for _, r := range seen {
		classes[r.header.Get("Spillway-Criticality")]++
		var u string
		switch r.path[:7] {
		case "/users/":
			u = r.path[7:]
		case "/orders":
			orders++
			u = r.body[len(`{"user": `) : len(r.body)-1]
			if r.header.Get("X-User") != "u"+u {
				t.Fatalf("order body %q with X-User %q: one arrival, one value", r.body, r.header.Get("X-User"))
			}
		}
		n, err := strconv.Atoi(u)
		if err != nil || n < 0 || n >= 50 {
			t.Fatalf("request %s %q: user %q, want 0 to 49", r.path, r.body, u)
		}
		users[n]++
	}
	if len(users) < 48 {
		t.Errorf("%d distinct users of 50 in %d requests", len(users), len(seen))
	}
	near := func(what string, got int, share float64) {
		t.Helper()
		if f := float64(got) / float64(len(seen)); math.Abs(f-share) > 0.04 {
			t.Errorf("%s: %.3f of the requests, want %.2f", what, f, share)
		}
	}
	near("critical", classes["critical"], 0.3)
	near("sheddable", classes["sheddable"], 0.5)
	near("no class", classes[""], 0.2)
	near("orders", orders, 0.25)
	for name, n := range classes {
		if c := s.Classes[name]; c.Offered != n {
			t.Errorf("Classes[%q] = %+v, server saw %d", name, c, n)
		}
	}
	want := map[string]map[string]int{"sheddable": {"ratelimit:per-ip": classes["sheddable"]}}
	if !reflect.DeepEqual(s.Refusals, want) || s.Statuses[429] != classes["sheddable"] {
		t.Errorf("Refusals %v, statuses %v; want %v", s.Refusals, s.Statuses, want)
	}
	if s.Classes["sheddable"].Good != 0 || s.Classes["critical"].Good != classes["critical"] {
		t.Errorf("Classes %+v: sheddable refused, critical all good", s.Classes)
	}
}

// The same Seed draws the same targets, classes and values, whichever
// worker sends each arrival.
func TestSeedRepeats(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, nil)
	defer srv.Close()
	cfg := Config{
		Targets:  []Target{{URL: srv.URL + "/a/{{seq}}/{{user}}"}, {URL: srv.URL + "/b/{{seq}}/{{user}}"}},
		Steps:    []Step{{Rate: 200, Duration: 500 * time.Millisecond}},
		Vars:     map[string]int{"user": 1000},
		Classes:  []Class{{"critical", 0.5}},
		Arrivals: Poisson,
		Seed:     42,
	}
	draws := func() map[string]string {
		before := len(srv.seenAll())
		run(t, cfg)
		m := map[string]string{}
		for _, r := range srv.seenAll()[before:] {
			seq := r.path[3:]
			m[seq] = r.path[:3] + r.header.Get("Spillway-Criticality")
		}
		return m
	}
	a, b := draws(), draws()
	if len(a) < 50 || !reflect.DeepEqual(a, b) {
		t.Errorf("two runs with one seed drew differently (%d and %d arrivals)", len(a), len(b))
	}
	cfg.Seed = 43
	if c := draws(); reflect.DeepEqual(a, c) {
		t.Error("seeds 42 and 43 drew the same")
	}
}
