package shed

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

func mustLimiter(t *testing.T, limits ...int) *ClassLimiter {
	t.Helper()
	l, err := NewClassLimiter(ClassConfig{Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Priority shedding with a small budget: Critical up to 3 in flight, Default
// up to 1. Each step admits (class >= 0) or releases the token admitted at
// step `release`.
func TestClassLimiterSteps(t *testing.T) {
	l := mustLimiter(t, 3, 1)
	const rel = -1
	steps := []struct {
		class    Class
		op       int // 0 admit, rel release
		release  int // step whose token to release
		ok       bool
		inFlight int
	}{
		{class: Default, ok: true, inFlight: 1},
		{class: Default, ok: false, inFlight: 1},
		{class: Critical, ok: true, inFlight: 2},
		{class: Default, ok: false, inFlight: 2},
		{class: Critical, ok: true, inFlight: 3},
		{class: Critical, ok: false, inFlight: 3},
		{op: rel, release: 0, inFlight: 2},
		{op: rel, release: 0, inFlight: 2}, // second release of the same token: no effect
		{class: Default, ok: false, inFlight: 2},
		{op: rel, release: 2, inFlight: 1},
		{class: Default, ok: false, inFlight: 1}, // 1 in flight is Default's limit
		{op: rel, release: 4, inFlight: 0},
		{class: Default, ok: true, inFlight: 1},
		{class: Sheddable, ok: false, inFlight: 1}, // unconfigured class counts as the last one (limit 1)
		{class: Critical, ok: true, inFlight: 2},
	}
	toks := make([]Token, len(steps))
	for i, s := range steps {
		if s.op == rel {
			toks[s.release].Release()
		} else {
			var ok bool
			toks[i], ok = l.Admit(s.class)
			if ok != s.ok {
				t.Fatalf("step %d: Admit(%v) = %v, want %v", i, s.class, ok, s.ok)
			}
			if toks[i].Admitted() != ok {
				t.Fatalf("step %d: Admitted() = %v, want %v", i, toks[i].Admitted(), ok)
			}
		}
		if got := l.InFlight(); got != s.inFlight {
			t.Fatalf("step %d: InFlight = %d, want %d", i, got, s.inFlight)
		}
	}
}

func TestTokenReleaseIdempotent(t *testing.T) {
	l := mustLimiter(t, 5)
	a, _ := l.Admit(Critical)
	b, _ := l.Admit(Critical)
	if l.InFlight() != 2 {
		t.Fatalf("InFlight = %d, want 2", l.InFlight())
	}
	for range 3 {
		a.Release()
	}
	if l.InFlight() != 1 {
		t.Fatalf("after releasing a three times: InFlight = %d, want 1", l.InFlight())
	}
	b.Release()
	b.Release()
	if l.InFlight() != 0 {
		t.Fatalf("InFlight = %d, want 0", l.InFlight())
	}
	var zero Token
	zero.Release() // must not panic or change anything
	refused, ok := mustLimiter(t, 0).Admit(Critical)
	if ok || refused.Admitted() {
		t.Fatal("limit 0 admitted a request")
	}
	refused.Release()
}

// Two goroutines releasing the same token (a timeout path and a completion
// path) release it once.
func TestTokenConcurrentRelease(t *testing.T) {
	l := mustLimiter(t, NoLimit)
	toks := make([]Token, 1000)
	for i := range toks {
		toks[i], _ = l.Admit(Default)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range toks {
				toks[i].Release()
			}
		})
	}
	wg.Wait()
	if got := l.InFlight(); got != 0 {
		t.Fatalf("InFlight = %d after releasing every token from 4 goroutines, want 0", got)
	}
}

func TestNoLimitAdmitsEverything(t *testing.T) {
	l := mustLimiter(t, NoLimit, NoLimit)
	for i := range 10000 {
		if tok, ok := l.Admit(Class(i % 2)); !ok || tok.Class() != Class(i%2) {
			t.Fatalf("request %d refused or wrong class", i)
		}
	}
	if l.InFlight() != 10000 || l.Limit(Critical) != NoLimit || l.Limit(Default) != NoLimit {
		t.Fatalf("InFlight %d, limits %d %d", l.InFlight(), l.Limit(Critical), l.Limit(Default))
	}
}

func TestClassConfigErrors(t *testing.T) {
	tests := []struct {
		limits []int
		field  string
	}{
		{nil, "Limits"},
		{[]int{1, 1, 1, 1, 1, 1, 1, 1, 1}, "Limits"},
		{[]int{-2}, "Limits[0]"},
		{[]int{10, 20}, "Limits[1]"},
		{[]int{10, NoLimit}, "Limits[1]"},
		{[]int{NoLimit, 5, 6}, "Limits[2]"},
		{[]int{5, -5}, "Limits[1]"},
	}
	for _, tt := range tests {
		_, err := NewClassLimiter(ClassConfig{Limits: tt.limits})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || !errors.Is(err, ErrConfig) {
			t.Errorf("limits %v: err = %v, want a ConfigError for %s", tt.limits, err, tt.field)
		}
	}
	for _, ok := range [][]int{{0}, {NoLimit}, {NoLimit, NoLimit, 0}, {50, 50}, {50, 20, 20, 0}} {
		if _, err := NewClassLimiter(ClassConfig{Limits: ok}); err != nil {
			t.Errorf("limits %v: %v", ok, err)
		}
	}
}

func TestSetLimits(t *testing.T) {
	l := mustLimiter(t, 4, 2)
	var toks [4]Token
	for i := range toks {
		toks[i], _ = l.Admit(Critical)
	}
	if err := l.SetLimits([]int{2, 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Admit(Critical); ok {
		t.Fatal("admitted above the lowered limit")
	}
	for i := range 3 {
		toks[i].Release()
	}
	if _, ok := l.Admit(Default); ok {
		t.Fatal("Default admitted with 1 in flight and limit 1")
	}
	if _, ok := l.Admit(Critical); !ok {
		t.Fatal("Critical refused with 1 in flight and limit 2")
	}
	if err := l.SetLimits([]int{3}); !errors.Is(err, ErrConfig) {
		t.Errorf("changing the number of classes: err = %v", err)
	}
	if err := l.SetLimits([]int{1, 3}); !errors.Is(err, ErrConfig) {
		t.Errorf("increasing limits: err = %v", err)
	}
	if l.Limit(Critical) != 2 || l.Limit(Default) != 1 || l.Limit(7) != 1 || l.Classes() != 2 {
		t.Errorf("limits after failed updates: %d %d %d", l.Limit(Critical), l.Limit(Default), l.Limit(7))
	}
}

// A seeded random walk of admits and releases against a plain model.
func TestClassLimiterModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		limits := []int{1 + r.IntN(20)}
		for c := 1; c < 1+r.IntN(MaxClasses); c++ {
			limits = append(limits, r.IntN(limits[c-1]+1))
		}
		l := mustLimiter(t, limits...)
		var held []*Token
		for step := range 500 {
			if len(held) > 0 && r.IntN(3) == 0 {
				i := r.IntN(len(held))
				held[i].Release()
				held[i].Release()
				held = append(held[:i], held[i+1:]...)
				continue
			}
			c := Class(r.IntN(MaxClasses))
			eff := min(int(c), len(limits)-1)
			want := len(held) < limits[eff]
			tok := new(Token)
			var ok bool
			*tok, ok = l.Admit(c)
			if ok != want {
				t.Fatalf("trial %d step %d: limits %v, %d held, Admit(%d) = %v", trial, step, limits, len(held), c, ok)
			}
			if ok {
				held = append(held, tok)
			}
			if l.InFlight() != len(held) {
				t.Fatalf("trial %d step %d: InFlight %d, model %d", trial, step, l.InFlight(), len(held))
			}
		}
	}
}

// Many goroutines hammer Admit and Release; the number of requests inside at
// once, measured independently of the limiter, never exceeds the limit.
func TestClassLimiterRace(t *testing.T) {
	const limit, workers, rounds = 8, 16, 5000
	l := mustLimiter(t, limit, limit/2, 1)
	var inside, maxInside, maxCount, admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				tok, ok := l.Admit(Class((w + i) % 3))
				if !ok {
					continue
				}
				admitted.Add(1)
				n := inside.Add(1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				if c := int64(l.InFlight()); c > maxCount.Load() {
					maxCount.Store(c) // racy max, but only ever set to a value that was seen
				}
				inside.Add(-1)
				tok.Release()
				tok.Release()
			}
		})
	}
	wg.Wait()
	if m := maxInside.Load(); m > limit || m < 1 {
		t.Errorf("max inside at once = %d, want 1..%d", m, limit)
	}
	if m := maxCount.Load(); m > limit {
		t.Errorf("InFlight() read %d, above the limit %d", m, limit)
	}
	if admitted.Load() == 0 {
		t.Error("nothing admitted")
	}
	if l.InFlight() != 0 {
		t.Errorf("InFlight = %d at the end, want 0", l.InFlight())
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{Critical: "critical", Default: "default", Sheddable: "sheddable", 5: "class 5"} {
		if c.String() != want {
			t.Errorf("Class(%d).String() = %q, want %q", c, c.String(), want)
		}
	}
}

func TestAdmitN(t *testing.T) {
	l, err := NewClassLimiter(ClassConfig{Limits: []int{5, 3}})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := l.AdmitN(Critical, 3)
	if !ok || l.InFlight() != 3 || a.Cost() != 3 {
		t.Fatalf("AdmitN(3): ok %v, in flight %d, cost %d", ok, l.InFlight(), a.Cost())
	}
	if _, ok := l.AdmitN(Default, 1); ok {
		t.Fatal("class limit 3 with 3 in flight admitted one more")
	}
	if _, ok := l.AdmitN(Critical, 3); ok {
		t.Fatal("3 + 3 > 5 admitted")
	}
	b, ok := l.AdmitN(Critical, 2)
	if !ok || l.InFlight() != 5 {
		t.Fatalf("3 + 2 = 5 refused (ok %v, in flight %d)", ok, l.InFlight())
	}
	a.Release()
	a.Release()
	b.Release()
	if l.InFlight() != 0 {
		t.Fatalf("in flight %d after releases, want 0", l.InFlight())
	}
	big, ok := l.AdmitN(Default, 9)
	if !ok || l.InFlight() != 9 {
		t.Fatalf("oversize on an idle limiter: ok %v in flight %d, want it admitted alone", ok, l.InFlight())
	}
	if _, ok := l.Admit(Critical); ok {
		t.Fatal("admitted beside an oversize request")
	}
	big.Release()
	if z, ok := l.AdmitN(Critical, 0); !ok || z.Cost() != 1 {
		t.Fatalf("AdmitN(0) = cost %d ok %v, want cost 1", z.Cost(), ok)
	}
	zero, _ := NewClassLimiter(ClassConfig{Limits: []int{0}})
	if _, ok := zero.AdmitN(Critical, 1); ok {
		t.Fatal("limit 0 admitted on an idle limiter")
	}
}
