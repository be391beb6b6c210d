// Package leakcheck lets tests assert that the goroutines they started
// have ended: take a Baseline before, Settle after.
package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// Baseline returns the lowest goroutine count seen over about 200 ms, so
// that goroutines of earlier tests still winding down do not count against
// the test that calls it.
func Baseline() int {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(10 * time.Millisecond)
		n = min(n, runtime.NumGoroutine())
	}
	return n
}

// Settle waits up to within for the number of goroutines to fall to at
// most limit, and fails t, with every goroutine's stack, if it does not.
func Settle(t testing.TB, limit int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for runtime.NumGoroutine() > limit {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.NumGoroutine()
			t.Fatalf("%d goroutines after %v, want at most %d:\n%s", n, within, limit, buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
