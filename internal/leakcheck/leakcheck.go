// Package leakcheck lets tests assert that the goroutines they started have
// ended, with go.uber.org/goleak doing the finding and the reporting (it
// names each leaked goroutine with its stack).
//
// It adds one thing to goleak: a bounded wait. goleak.VerifyNone retries
// for about 0.4 s and v1.3.0 offers no option to wait longer, while under
// -race and competing CPU load an httptest server's or a gRPC connection's
// goroutines can take seconds to wind down after Close. Verify polls
// goleak.Find until it reports nothing or the wait is over, then lets
// goleak.VerifyNone give its verdict and report.
//
// Take the snapshot before the test starts its goroutines:
//
//	ignore := goleak.IgnoreCurrent()
//	... start servers, make calls, close everything ...
//	leakcheck.Verify(t, 10*time.Second, ignore)
package leakcheck

import (
	"time"

	"go.uber.org/goleak"
)

// Verify waits up to within for every goroutine not excluded by opts to
// end, then fails t through goleak.VerifyNone if any is still running.
func Verify(t goleak.TestingT, within time.Duration, opts ...goleak.Option) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	deadline := time.Now().Add(within)
	for goleak.Find(opts...) != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	goleak.VerifyNone(t, opts...)
}
