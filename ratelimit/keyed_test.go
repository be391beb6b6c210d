package ratelimit

import (
	"errors"
	"strings"
	"testing"
)

func TestSpecDefaultsAndForms(t *testing.T) {
	s := Spec{Rate: 100, Per: 60, Burst: 20}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if l := s.Limit(); l.Burst != 20 || l.Rate != 100.0/60 {
		t.Errorf("Limit() = %+v, want rate 100/60, burst 20", l)
	}
	// Burst 0 means a full period's quota: ⌈Rate⌉.
	if l := (Spec{Rate: 2.5, Per: 1}).Limit(); l.Burst != 3 {
		t.Errorf("default burst for rate 2.5 = %d, want 3", l.Burst)
	}
	w := Spec{Algorithm: AlgSlidingLog, Rate: 3, Per: 600}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	if q := w.Quota(); q.Limit != 3 || q.Window != 600 {
		t.Errorf("Quota() = %+v", q)
	}
	if q, win := w.Policy(); q != 3 || win != 600 {
		t.Errorf("Policy() = %d, %v", q, win)
	}
}

func TestSpecValidateNamesTheField(t *testing.T) {
	for _, c := range []struct {
		s     Spec
		field string
	}{
		{Spec{Rate: 0, Per: 1}, "Rate"},
		{Spec{Rate: 1, Per: -1}, "Per"},
		{Spec{Rate: 1, Per: 1, Burst: -1}, "Burst"},
		{Spec{Algorithm: 99, Rate: 1, Per: 1}, "Algorithm"},
		{Spec{Algorithm: AlgFixedWindow, Rate: 1.5, Per: 1}, "whole number"},
		{Spec{Algorithm: AlgFixedWindow, Rate: 10, Per: 1, Burst: 5}, "Burst must be 0"},
		{Spec{Algorithm: AlgSlidingLog, Rate: MaxLogLimit + 1, Per: 1}, "at most"},
	} {
		err := c.s.Validate()
		if !errors.Is(err, ErrInvalidLimit) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: error %v, want ErrInvalidLimit naming %q", c.s, err, c.field)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for a := AlgTokenBucket; a <= AlgGCRA; a++ {
		got, err := ParseAlgorithm(strings.ToUpper(a.Name()))
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a.Name(), got, err)
		}
	}
	for in, want := range map[string]Algorithm{"sliding_counter": AlgSlidingCounter, "leaky bucket": AlgLeakyMeter, " GCRA ": AlgGCRA} {
		if got, err := ParseAlgorithm(in); err != nil || got != want {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseAlgorithm("magic"); err == nil || !strings.Contains(err.Error(), "gcra") {
		t.Errorf("unknown name: error %v, want the list of names", err)
	}
}
