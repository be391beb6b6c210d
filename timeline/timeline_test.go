package timeline

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func route(req, good, refused, retries uint64) Snapshot {
	return Snapshot{Metrics: true, Routes: []RouteSnap{{Name: "api", Cluster: "app",
		Requests: req, Good: good, Refused: refused, Retries: retries}}}
}

func near(a float32, want float64) bool { return math.Abs(float64(a)-want) < 1e-3 }

// TestRates: counters become rates over the time since the previous
// sample, late ticks included; a counter that went down restarted.
func TestRates(t *testing.T) {
	steps := []struct {
		at                    float64
		req, good, ref, retr  uint64
		offered, admitted, gp float64
		retries               float64
	}{
		{0, 0, 0, 0, 0, math.NaN(), math.NaN(), math.NaN(), math.NaN()},
		{1, 50, 35, 10, 4, 50, 40, 35, 4},
		{3, 150, 135, 10, 10, 50, 50, 50, 3}, // a late tick: 2 s
		{3.5, 175, 150, 40, 2, 50, 0, 30, 4}, // retries restarted (a reload): 2 in 0.5 s; refused > offered: admitted 0
		{4.5, 175, 150, 40, 2, 0, 0, 0, 0},   // nothing happened
	}
	tl := New()
	for _, s := range steps {
		if !tl.Sample(at(s.at), route(s.req, s.good, s.ref, s.retr)) {
			t.Fatalf("sample at %v refused", s.at)
		}
	}
	r := tl.Data(0).Routes[0]
	for i, s := range steps {
		for _, c := range []struct {
			name string
			got  float32
			want float64
		}{{"offered", r.Offered[i], s.offered}, {"admitted", r.Admitted[i], s.admitted}, {"goodput", r.Goodput[i], s.gp}, {"retries", r.Retries[i], s.retries}} {
			if math.IsNaN(c.want) != math.IsNaN(float64(c.got)) || !math.IsNaN(c.want) && !near(c.got, c.want) {
				t.Errorf("at %vs %s = %v, want %v", s.at, c.name, c.got, c.want)
			}
		}
	}
}

func TestQuantiles(t *testing.T) {
	bounds := []float64{0.1, 0.2, 0.5}
	tl := New()
	snap := func(sec float64, cum ...uint64) {
		s := route(0, 0, 0, 0)
		s.Routes[0].Bounds, s.Routes[0].Latency = bounds, cum
		tl.Sample(at(sec), s)
	}
	snap(0, 10, 10, 10, 10)    // 10 fast ones before: not in the next second's quantiles
	snap(1, 10, 110, 110, 110) // 100 between 0.1 and 0.2 s
	snap(2, 10, 110, 110, 112) // 2 above 0.5 s (the +Inf bucket)
	snap(3, 10, 110, 110, 112) // none
	r := tl.Data(0).Routes[0]
	want := []struct{ p50, p99 float64 }{{math.NaN(), math.NaN()}, {150, 199}, {500, 500}, {math.NaN(), math.NaN()}}
	for i, w := range want {
		for _, c := range []struct {
			got  float32
			want float64
		}{{r.P50[i], w.p50}, {r.P99[i], w.p99}} {
			if math.IsNaN(c.want) != math.IsNaN(float64(c.got)) || !math.IsNaN(c.want) && !near(c.got, c.want) {
				t.Errorf("second %d: quantile %v, want %v", i, c.got, c.want)
			}
		}
	}
}

// TestSinceAndWrap: Data gives only the points after since, and the ring
// keeps the last Points.
func TestSinceAndWrap(t *testing.T) {
	tl := New()
	if d := tl.Data(0); d.Now != 0 || len(d.T) != 0 {
		t.Fatalf("empty timeline: now %d, %d points", d.Now, len(d.T))
	}
	for i := range Points + 5 {
		tl.Sample(at(float64(i)), route(uint64(i), 0, 0, 0))
	}
	d := tl.Data(0)
	if len(d.T) != Points || d.T[0] != at(5).UnixMilli() || d.Now != at(Points+4).UnixMilli() {
		t.Fatalf("%d points from %d to now %d, want %d from %d to %d", len(d.T), d.T[0], d.Now, Points, at(5).UnixMilli(), at(Points+4).UnixMilli())
	}
	d = tl.Data(at(Points + 2).UnixMilli())
	if len(d.T) != 2 || len(d.Routes[0].Offered) != 2 || d.T[1] != d.Now {
		t.Fatalf("since the third last: %d times, %d values, want 2", len(d.T), len(d.Routes[0].Offered))
	}
	if d = tl.Data(d.Now); len(d.T) != 0 || len(d.Routes[0].Offered) != 0 {
		t.Fatalf("since now: %d points, want 0", len(d.T))
	}
	if tl.Sample(at(Points+4), route(0, 0, 0, 0)) || tl.Sample(at(3), route(0, 0, 0, 0)) {
		t.Error("a sample not after the last one was taken")
	}
}

func TestBounds(t *testing.T) {
	s := Snapshot{Metrics: true}
	for i := range MaxRoutes + 3 {
		s.Routes = append(s.Routes, RouteSnap{Name: fmt.Sprintf("r%02d", i)})
	}
	rej := map[string]uint64{}
	for i := range 10 {
		rej[fmt.Sprintf("reason%d none", i)] = 0
	}
	s.Routes[0].Rejects = rej
	c := ClusterSnap{Name: "app"}
	for i := range MaxEndpoints + 2 {
		c.Endpoints = append(c.Endpoints, EndpointSnap{Address: fmt.Sprintf("10.0.0.%d:80", i), State: "healthy"})
	}
	s.Clusters = []ClusterSnap{c}
	tl := New()
	tl.Sample(at(0), s)
	for i := range 10 {
		rej[fmt.Sprintf("reason%d none", i)] = 2 // 2 a second each
	}
	tl.Sample(at(1), s)
	d := tl.Data(0)
	if len(d.Routes) != MaxRoutes || d.Untracked != (Untracked{Routes: 3, Endpoints: 2}) || len(d.Clusters[0].Endpoints) != MaxEndpoints {
		t.Fatalf("%d routes, %d endpoints, untracked %+v", len(d.Routes), len(d.Clusters[0].Endpoints), d.Untracked)
	}
	got := d.Routes[0].Rejects
	if len(got) != MaxRejectKeys || got["reason0 none"][1] != 2 || got["reason6 none"][1] != 2 || got["other"][1] != 6 || got["reason7 none"] != nil {
		t.Errorf("rejects %v, want reason0..6 at 2/s and other at 6/s", got)
	}
}

// TestEndpointStates: the states string, a drain, an endpoint removed and
// a cluster forgotten after Points samples without it.
func TestEndpointStates(t *testing.T) {
	tl := New()
	eps := func(states ...string) Snapshot {
		c := ClusterSnap{Name: "app", HasAdmission: true, Limit: 20, InFlight: 3, QueueLength: 2, QueueWait: 0.015, Breaker: "half-open"}
		for i, s := range states {
			if s == "-" {
				continue // absent
			}
			c.Endpoints = append(c.Endpoints, EndpointSnap{Address: fmt.Sprintf("e%d", i), State: s})
		}
		return Snapshot{Clusters: []ClusterSnap{c}}
	}
	tl.Sample(at(0), eps("healthy", "slow-starting"))
	tl.Sample(at(1), eps("healthy", "healthy"))
	tl.Sample(at(2), eps("draining", "ejected"))
	tl.Sample(at(3), eps("draining", "-", "state(9)"))
	c := tl.Data(0).Clusters[0]
	if got := fmt.Sprintf("%s=%s:%s %s=%s:%s %s=%s:%s", c.Endpoints[0].Address, c.Endpoints[0].State, c.Endpoints[0].States,
		c.Endpoints[1].Address, c.Endpoints[1].State, c.Endpoints[1].States,
		c.Endpoints[2].Address, c.Endpoints[2].State, c.Endpoints[2].States); got != "e0=draining:hhdd e1=:she- e2=unknown:---?" {
		t.Errorf("endpoints %s", got)
	}
	if !near(c.Limit[3], 20) || !near(c.InFlight[3], 3) || !near(c.QueueLength[3], 2) || !near(c.QueueWait[3], 15) ||
		!near(c.Breaker[3], 0.5) || !math.IsNaN(float64(c.Brownout[3])) {
		t.Errorf("guard series limit %v in flight %v queue %v wait %v breaker %v brownout %v", c.Limit, c.InFlight, c.QueueLength, c.QueueWait, c.Breaker, c.Brownout)
	}
	for i := range Points - 1 {
		tl.Sample(at(float64(4+i)), Snapshot{})
	}
	if d := tl.Data(0); len(d.Clusters) != 1 {
		t.Fatalf("%d clusters after %d samples without it, want 1", len(d.Clusters), Points-1)
	}
	tl.Sample(at(4+Points), Snapshot{})
	if d := tl.Data(0); len(d.Clusters) != 0 {
		t.Errorf("cluster kept after %d samples without it", Points)
	}
}

func TestJSON(t *testing.T) {
	tl := New()
	tl.Sample(at(0), Snapshot{Metrics: false, Routes: []RouteSnap{{Name: "api", Cluster: "app", HasBudget: true, Budget: 7.5}}})
	b, err := json.Marshal(tl.Data(0))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"now":1777636800000,"step_ms":1000,"metrics":false,"t":[1777636800000],"routes":[{"name":"api","cluster":"app",` +
		`"offered":[null],"admitted":[null],"goodput":[null],"p50_ms":[null],"p99_ms":[null],"retries":[null],"retry_budget":[7.5],"rejects":{}}],` +
		`"clusters":[],"untracked":{"routes":0,"clusters":0,"endpoints":0}}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
	if got, _ := json.Marshal(Values{1, 0.25, float32(math.Inf(1)), 12345678}); !strings.EqualFold(string(got), "[1,0.25,null,1.2346e+07]") {
		t.Errorf("values %s", got)
	}
}
