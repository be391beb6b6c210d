package limit

import (
	"testing"

	"github.com/spillwayhq/spillway/shed"
)

// TestPin: a pinned limit applies in place of the algorithm's, below or
// above it, whatever samples arrive meanwhile (the algorithm keeps
// learning from them); Unpin returns to the algorithm's current limit.
func TestPin(t *testing.T) {
	alg, err := NewAIMD(AIMDConfig{InitialLimit: 4, MaxLimit: 100, Baseline: 0.040, Backoff: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLimiter(alg, LimiterConfig{Shares: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	l.Pin(0, 1)
	if l.Limit() != 1 || l.Pinned() != 1 {
		t.Fatalf("after Pin(1): limit %d, pinned %d", l.Limit(), l.Pinned())
	}
	a, ok := l.Acquire(0, shed.Critical)
	if !ok {
		t.Fatal("first request refused under a pinned limit of 1")
	}
	if _, ok := l.Acquire(0, shed.Critical); ok {
		t.Fatal("second request admitted under a pinned limit of 1")
	}
	a.Done(0.010, Dropped) // AIMD backs off (4 × 0.5 = 2); the pin holds
	if l.Limit() != 1 {
		t.Fatalf("a sample moved the pinned limit to %d", l.Limit())
	}
	l.Pin(1, 6) // above the algorithm's: six at once
	var held [6]Ticket
	for i := range held {
		var ok bool
		if held[i], ok = l.Acquire(1, shed.Critical); !ok {
			t.Fatalf("request %d refused under a pinned limit of 6", i)
		}
	}
	if _, ok := l.Acquire(1, shed.Critical); ok {
		t.Fatal("a seventh request admitted under a pinned limit of 6")
	}
	for i := range held {
		held[i].Done(1.010, Ignore)
	}
	l.Unpin(2)
	if l.Pinned() != 0 || l.Limit() != 2 {
		t.Fatalf("after Unpin: limit %d (want the algorithm's 2), pinned %d", l.Limit(), l.Pinned())
	}
}
