package loadgen

import (
	"math"
	"net/http"
	"testing"
	"time"
)

// Coordinated omission: at a constant 100 req/s against a server that
// stalls 500 ms every 5 s (a request arriving in a stall waits until it
// ends), 10% of the requests wait 0–500 ms, evenly spread, so the p99
// measured from the intended send is 450 ms. A generator that waited for
// answers before sending would see about 1% of its requests slow.
func TestCoordinatedOmission(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s")
	}
	defer noLeaks(t)()
	const period, stall = 5 * time.Second, 500 * time.Millisecond
	// The stalls begin 2.5 s into the run and every 5 s after: four in
	// 20 s, 200 of the 2000 requests.
	t0 := time.Now().Add(-2500 * time.Millisecond)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if in := time.Since(t0) % period; in < stall {
			time.Sleep(stall - in)
		}
	})
	defer srv.Close()
	res := run(t, Config{
		Targets: []Target{{URL: srv.URL}},
		Steps:   []Step{{Rate: 100, Duration: 20 * time.Second}},
		Timeout: 2 * time.Second,
	})
	s := res.Steps[0]
	p99 := s.Latency.P99
	if math.Abs(p99.Seconds()-0.450) > 0.045 {
		t.Errorf("p99 %v, want 450 ms ± 10%%", p99)
	}
	if s.Good < 1980 || s.Latency.Max > 600*time.Millisecond {
		t.Errorf("Good %d of %d, max %v; want all good, none above the stall", s.Good, s.Offered, s.Latency.Max)
	}
	t.Logf("latency %+v; send lag %+v", s.Latency, s.SendLag)
}

// With MaxInFlight 5 against a server slower than Timeout, arrivals that
// find the pool full are unsent: failed, timed out, at latency Timeout.
func TestUnsent(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, slow(2*time.Second))
	defer srv.Close()
	const timeout = 200 * time.Millisecond
	res := run(t, Config{
		Targets:     []Target{{URL: srv.URL}},
		Steps:       []Step{{Rate: 100, Duration: time.Second}},
		Timeout:     timeout,
		MaxInFlight: 5,
	})
	s := res.Steps[0]
	if s.Offered != 100 || s.Unsent == 0 || s.Sent+s.Unsent != 100 || s.Sent > 40 {
		t.Errorf("Offered %d, Sent %d, Unsent %d; want 100 offered, about 25 sent, the rest unsent", s.Offered, s.Sent, s.Unsent)
	}
	if s.Failed != 100 || s.Timeouts != 100 || s.Good != 0 || s.Statuses[0] != 100 {
		t.Errorf("Failed %d, Timeouts %d, Good %d, statuses %v; want every arrival a timeout", s.Failed, s.Timeouts, s.Good, s.Statuses)
	}
	if s.Latency.Max != timeout || s.Latency.P50 < timeout*999/1000 {
		t.Errorf("latency %+v, want every one at the timeout %v", s.Latency, timeout)
	}
	if n := srv.count(); n != s.Sent {
		t.Errorf("server saw %d requests, Sent %d", n, s.Sent)
	}
}
