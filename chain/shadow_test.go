package chain

import (
	"reflect"
	"testing"

	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

// reportOf is what one ShadowReport of c calls its function with.
func reportOf(c *Chain) []ShadowCount {
	var out []ShadowCount
	c.ShadowReport(func(s ShadowCount) { out = append(out, s) })
	return out
}

// checkReport fails t unless c's next ShadowReport is want.
func checkReport(t *testing.T, name string, c *Chain, want ...ShadowCount) {
	t.Helper()
	if got := reportOf(c); !reflect.DeepEqual(got, want) {
		t.Errorf("%s: report %+v; want %+v", name, got, want)
	}
}

// ShadowReport gives each route the admission would-refusals it counted
// since its last report, by class and reason, and nothing when there were
// none; two routes on one guard count apart.
func TestShadowReportAdmission(t *testing.T) {
	clk := newClock(0)
	gate := newGate(t, &recAlg{n: 1}, oneClass, clk)
	g := &Guard{Gate: gate, AdmitShadow: true}
	g.Init()
	def := New(Config{Route: "def", Guard: g, Class: shed.Default})
	shd := New(Config{Route: "shd", Guard: g, Class: shed.Sheddable})
	checkReport(t, "before any request", def)
	a := admitOK(t, def, clk, 0, get(false)) // holds the only place
	checkReport(t, "one admitted", def)
	var held []*Pass
	for _, c := range []*Chain{shd, shd, def} {
		held = append(held, admitOK(t, c, clk, 0, get(false)))
	}
	checkReport(t, "def", def, ShadowCount{Class: shed.Default, Reason: limit.ReasonLimit, N: 1})
	checkReport(t, "shd", shd, ShadowCount{Class: shed.Sheddable, Reason: limit.ReasonLimit, N: 2})
	checkReport(t, "def again", def)
	checkReport(t, "shd again", shd)
	held = append(held, admitOK(t, shd, clk, 0, get(false)))
	checkReport(t, "shd after one more", shd, ShadowCount{Class: shed.Sheddable, Reason: limit.ReasonLimit, N: 1})
	for _, p := range held {
		p.End(1, Success)
	}
	a.End(1, Ignore)
}

// ShadowReport gives the attempts a shadow breaker let through while
// open, since the last report.
func TestShadowReportBreaker(t *testing.T) {
	g := breakerGuard(t)
	g.BreakerShadow = true
	c := New(Config{Guard: g, Class: shed.Critical})
	for _, at := range []float64{1, 2, 3} {
		fail(t, c, at)
	}
	checkReport(t, "closed", c)
	if g.Breaker.Snapshot().State != breaker.Open {
		t.Fatal("not open")
	}
	for i := 0; i < 3; i++ {
		p := admitOK(t, c, newClock(4), 4, get(false))
		if ref, _ := p.Attempt(4); ref != nil {
			t.Fatalf("shadow breaker refused: %s", ref.Reason)
		}
		p.End(4, Success)
	}
	checkReport(t, "open", c, ShadowCount{Breaker: true, Class: shed.Critical, N: 3})
	checkReport(t, "open, nothing since", c)
}
