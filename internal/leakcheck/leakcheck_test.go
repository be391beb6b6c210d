package leakcheck

import (
	"testing"
	"time"
)

// recorder catches Fatalf instead of stopping the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestSettleWaitsForGoroutinesToEnd(t *testing.T) {
	base := Baseline()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	r := &recorder{TB: t}
	Settle(r, base, 50*time.Millisecond)
	if !r.failed {
		t.Fatal("Settle passed while a goroutine was still running")
	}
	close(stop)
	<-done
	r = &recorder{TB: t}
	Settle(r, base, 5*time.Second)
	if r.failed {
		t.Fatal("Settle failed after the goroutine ended")
	}
}
