package leakcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// recorder catches the failure instead of stopping the test.
type recorder struct {
	msgs []string
}

func (r *recorder) Error(args ...any) { r.msgs = append(r.msgs, fmt.Sprint(args...)) }

func leakyHelperForTest(stop, done chan struct{}) { <-stop; close(done) }

func TestVerifyNamesALeakAndWaitsForAnEnd(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	stop := make(chan struct{})
	done := make(chan struct{})
	go leakyHelperForTest(stop, done)
	r := &recorder{}
	Verify(r, 50*time.Millisecond, ignore)
	if len(r.msgs) == 0 {
		t.Fatal("Verify passed while a goroutine was still running")
	}
	if !strings.Contains(strings.Join(r.msgs, "\n"), "leakyHelperForTest") {
		t.Errorf("report does not name the leaked goroutine's function:\n%s", r.msgs)
	}
	// A goroutine that ends while Verify waits is not a leak.
	go func() { time.Sleep(100 * time.Millisecond); close(stop) }()
	r = &recorder{}
	Verify(r, 10*time.Second, ignore)
	<-done
	if len(r.msgs) != 0 {
		t.Fatalf("Verify failed although the goroutine ended within the wait: %s", r.msgs)
	}
}
