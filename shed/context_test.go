package shed

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func TestClassHeaderNames(t *testing.T) {
	if got := http.CanonicalHeaderKey(ClassHeader); got != ClassHeader {
		t.Errorf("ClassHeader %q is not canonical (%q)", ClassHeader, got)
	}
	if got := strings.ToLower(ClassHeader); got != ClassMetadataKey {
		t.Errorf("ClassMetadataKey = %q, want %q", ClassMetadataKey, got)
	}
}

func TestParseClass(t *testing.T) {
	ok := []struct {
		in   string
		want Class
	}{
		{"critical", Critical},
		{"default", Default},
		{"sheddable", Sheddable},
		{"CRITICAL", Critical},
		{"Default", Default},
		{"sHeDdAbLe", Sheddable},
		{" critical\t", Critical},
		{"critical_plus", Critical},
		{"CRITICAL_PLUS", Critical},
		{"sheddable_plus", Default},
		{"SHEDDABLE_PLUS", Default},
		{"0", 0},
		{"2", 2},
		{"7", 7},
		{" 5 ", 5},
		{"class 0", 0},
		{"class 3", 3},
		{"class 7", 7},
		{"CLASS 4", 4},
		{"\tclass 6 ", 6},
	}
	for _, c := range ok {
		if got, isOK := ParseClass(c.in); got != c.want || !isOK {
			t.Errorf("ParseClass(%q) = %v, %v; want %v, true", c.in, got, isOK, c.want)
		}
	}
	bad := []string{
		"", " ", "8", "9", "-1", "+1", "07", "10", "a",
		"class 8", "class", "class ", "class  3", "class\t3", "class3", "class 03", "class -1", "class x",
		"critica", "criticall", "critical plus", "critical-plus", "critical_plus_", "sheddableplus",
		"normal", "low", "high", "critical,default", "\"critical\"", "critical\r",
		"crit\u0130cal", "\u017fheddable", "cla\u017f\u017f 3", // non-ASCII letters never fold onto ASCII ones
	}
	for _, in := range bad {
		if got, isOK := ParseClass(in); isOK {
			t.Errorf("ParseClass(%q) = %v, true; want false", in, got)
		}
	}
}

// Every class a ClassLimiter supports survives String → ParseClass, and
// SetClassHeader → ParseClass, so forwarding keeps the priority.
func TestClassRoundTrip(t *testing.T) {
	for c := Class(0); c < MaxClasses; c++ {
		if got, ok := ParseClass(c.String()); got != c || !ok {
			t.Errorf("ParseClass(%q) = %v, %v; want %d, true", c.String(), got, ok, c)
		}
		h := http.Header{}
		if !SetClassHeader(h, WithClass(context.Background(), c)) {
			t.Fatalf("class %d: SetClassHeader wrote nothing", c)
		}
		if got, ok := ParseClass(h.Get(ClassHeader)); got != c || !ok {
			t.Errorf("class %d forwarded as %q, parsed back as %v, %v", c, h.Get(ClassHeader), got, ok)
		}
	}
}

func TestWithClass(t *testing.T) {
	bg := context.Background()
	if c, ok := ClassFrom(bg); ok || c != 0 {
		t.Errorf("ClassFrom(Background) = %v, %v; want 0, false", c, ok)
	}
	ctx := WithClass(bg, Critical) // the zero Class is present, not absent
	if c, ok := ClassFrom(ctx); !ok || c != Critical {
		t.Errorf("ClassFrom = %v, %v; want critical, true", c, ok)
	}
	type otherKey struct{}
	inner := context.WithValue(WithClass(ctx, Sheddable), otherKey{}, Default)
	if c, ok := ClassFrom(inner); !ok || c != Sheddable {
		t.Errorf("ClassFrom after replacing = %v, %v; want sheddable, true", c, ok)
	}
	if c, _ := ClassFrom(ctx); c != Critical {
		t.Errorf("parent changed to %v", c)
	}
	// A value of another key, even of type Class, is not the class.
	if c, ok := ClassFrom(context.WithValue(bg, otherKey{}, Sheddable)); ok {
		t.Errorf("ClassFrom found %v under another key", c)
	}
}

func TestSetClassHeader(t *testing.T) {
	h := http.Header{}
	h.Add(ClassHeader, "critical")
	if SetClassHeader(h, context.Background()) {
		t.Error("SetClassHeader without a class returned true")
	}
	if got := h.Values(ClassHeader); len(got) != 1 || got[0] != "critical" {
		t.Errorf("without a class the header changed to %q", got)
	}

	h.Add(ClassHeader, "default")
	if !SetClassHeader(h, WithClass(context.Background(), Sheddable)) {
		t.Error("SetClassHeader returned false")
	}
	if got := h.Values(ClassHeader); len(got) != 1 || got[0] != "sheddable" {
		t.Errorf("header = %q, want [sheddable] (replaced)", got)
	}

	// A class beyond MaxClasses is forwarded as the least important one a
	// callee can have, never as something it would refuse to parse.
	for _, c := range []Class{MaxClasses, 200, 255} {
		SetClassHeader(h, WithClass(context.Background(), c))
		if got := h.Get(ClassHeader); got != "class 7" {
			t.Errorf("class %d forwarded as %q, want \"class 7\"", c, got)
		}
	}
}

func TestContextNoAllocations(t *testing.T) {
	ctx := WithClass(context.Background(), Sheddable)
	for name, f := range map[string]func(){
		"ParseClass(name)":    func() { _, _ = ParseClass(" Sheddable_Plus ") },
		"ParseClass(class N)": func() { _, _ = ParseClass("class 5") },
		"ClassFrom":           func() { _, _ = ClassFrom(ctx) },
		"ClassFrom(no class)": func() { _, _ = ClassFrom(context.Background()) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

// FuzzParseClass: never panics; whatever it accepts is a supported class
// whose String parses back to it.
func FuzzParseClass(f *testing.F) {
	for _, s := range []string{
		"critical", "default", "sheddable", "critical_plus", "sheddable_plus",
		"CRITICAL", " 3 ", "class 5", "class 8", "9", "", "\xff", "class\u00a05", "\u017fheddable",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := ParseClass(s)
		if !ok {
			if c != 0 {
				t.Fatalf("ParseClass(%q) = %v, false; want 0 with false", s, c)
			}
			return
		}
		if c >= MaxClasses {
			t.Fatalf("ParseClass(%q) = %d, beyond MaxClasses", s, c)
		}
		if back, ok := ParseClass(c.String()); back != c || !ok {
			t.Fatalf("ParseClass(%q) = %v, but %q parses to %v, %v", s, c, c.String(), back, ok)
		}
	})
}

func BenchmarkParseClass(b *testing.B) {
	in := []string{"critical", "Sheddable_Plus", "class 5", "unknown"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ParseClass(in[i&3])
	}
}

func BenchmarkClassFrom(b *testing.B) {
	type k struct{}
	ctx := context.WithValue(WithClass(context.Background(), Default), k{}, 1) // one layer above it
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ClassFrom(ctx); !ok {
			b.Fatal("no class")
		}
	}
}
