package chain

import (
	"context"
	"testing"
)

// A budget spent between admission and an attempt (a stall, a backoff) is
// refused at the attempt — 503 deadline, no Retry-After — instead of going
// upstream with nothing left; within the budget the attempt goes.
func TestAttemptAfterDeadline(t *testing.T) {
	c := New(Config{Deadline: Deadline{Default: 2, Forward: true}})
	var p Pass
	if ref := c.Admit(context.Background(), newClock(100), 100, get(false), &p); ref != nil {
		t.Fatalf("refused at admission: %s", ref.Reason)
	}
	if ref, fb := p.Attempt(101.5); ref != nil || fb {
		t.Fatalf("attempt within the budget: %v %v; want it to go", ref, fb)
	}
	ref, fb := p.Attempt(102)
	if ref == nil || ref.Reason != ReasonDeadline || ref.Status != 503 || ref.Retry || fb || p.RetryAfter != -1 {
		t.Fatalf("attempt at the deadline: %+v %v RetryAfter %d; want 503 deadline without Retry-After", ref, fb, p.RetryAfter)
	}
	var none Pass // no deadline: never refused for it
	if ref := New(Config{}).Admit(context.Background(), newClock(100), 100, get(false), &none); ref != nil {
		t.Fatal(ref.Reason)
	}
	if ref, _ := none.Attempt(1e9); ref != nil {
		t.Fatalf("no budget, attempt refused: %s", ref.Reason)
	}
}
