package gateway

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The load and the machine meter of TestRedisBlackHoledThenKilled.

// faultShot is one HTTP request of faultLoad: when it was sent and
// answered (since the load began) and the answer.
type faultShot struct {
	sent, done time.Duration
	pay        bool
	status     int
	reason     string
	err        string
}

// faultLoad sends GET requests open loop at rate per second, alternating
// /api/x from 127.0.0.1 and /pay from 127.0.0.2 (each with a user of its
// own), at
// most 100 in flight (a request due while they are all busy is skipped
// and counted), and records every answer.
type faultLoad struct {
	base     string
	rate     float64
	api, pay *http.Client
	began    time.Time
	stop     chan struct{}
	wg       sync.WaitGroup
	skipped  atomic.Int64

	mu    sync.Mutex
	shots []faultShot
}

// startFaultLoad starts the load; its times count from began.
func startFaultLoad(t *testing.T, base string, rate float64, began time.Time) *faultLoad {
	l := &faultLoad{base: base, rate: rate, api: h1Client(t), pay: fromClient(t, "127.0.0.2"),
		began: began, stop: make(chan struct{})}
	l.wg.Add(1)
	go l.run()
	return l
}

// fromClient is an HTTP/1.1 client whose connections come from local
// address ip (a loopback address).
func fromClient(t *testing.T, ip string) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{Protocols: p, MaxIdleConnsPerHost: 128, DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (l *faultLoad) since() time.Duration { return time.Since(l.began) }

func (l *faultLoad) run() {
	defer l.wg.Done()
	sem := make(chan struct{}, 100)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for issued := int64(0); ; {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		for due := int64(l.since().Seconds() * l.rate); issued < due; issued++ {
			select {
			case sem <- struct{}{}:
			default:
				l.skipped.Add(1)
				continue
			}
			l.wg.Add(1)
			go func(pay bool) {
				defer l.wg.Done()
				defer func() { <-sem }()
				l.one(pay)
			}(issued%2 == 1)
		}
	}
}

func (l *faultLoad) one(pay bool) {
	s := faultShot{sent: l.since(), pay: pay}
	c, path := l.api, "/api/x"
	if pay {
		c, path = l.pay, "/pay"
	}
	req, _ := http.NewRequest("GET", l.base+path, nil)
	req.Header.Set("X-User-Id", "load"+path) // 150/s each: under open-user's floor
	resp, err := c.Do(req)
	if err == nil {
		s.status, s.reason = resp.StatusCode, resp.Header.Get("Spillway-Reason")
		resp.Body.Close()
	} else {
		s.err = err.Error()
	}
	s.done = l.since()
	l.mu.Lock()
	l.shots = append(l.shots, s)
	l.mu.Unlock()
}

// Stop stops sending and waits for the requests in flight.
func (l *faultLoad) Stop() {
	close(l.stop)
	l.wg.Wait()
}

// check fails t unless the answers are as TestRedisBlackHoledThenKilled
// says, marks being the phases' starts and the load's end.
// healthyFail and lateFail are the store's fail-mode decisions while
// Redis was up (healthy phase) and after its return (from 2 × breaker open
// time): with any, the 99% served checks of that window are logged, not
// enforced — Redis itself was late, not the gateway.
func (l *faultLoad) check(t *testing.T, marks [numPhases + 1]time.Duration, stalls *stallMeter, healthyFail, lateFail float64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var byPhase [numPhases]map[string]int
	for i := range byPhase {
		byPhase[i] = map[string]int{}
	}
	out, back := marks[phaseBlackHole], marks[phaseBack]
	var apiOK, healthy, healthyOK, late, lateOK int
	for _, s := range l.shots {
		ph := phaseHealthy
		for p := range numPhases {
			if s.sent >= marks[p] {
				ph = p
			}
		}
		path := "/api/x"
		if s.pay {
			path = "/pay"
		}
		byPhase[ph][fmt.Sprintf("%s %d %s", path, s.status, s.reason)]++
		if msg := badAnswer(s); msg != "" {
			t.Errorf("%s, %s sent at %v: %s", phaseNames[ph], path, s.sent, msg)
			continue
		}
		switch {
		case s.sent < marks[phaseHealthy]:
			// Sent while settle waited for a warm gateway: counted in
			// no phase's share (the store's fail-mode decisions of that
			// time are not in healthyFail either).
		case ph == phaseHealthy && s.done < out:
			healthy++
			if s.status == 200 {
				healthyOK++
			}
		case s.sent >= out && s.done < back && s.pay && s.status == 200:
			t.Errorf("%s, /pay sent at %v: 200; the fail-closed rule must refuse while Redis is away", phaseNames[ph], s.sent)
		case s.sent >= out && s.done < back && s.status == 200:
			apiOK++
		case s.sent >= back+2*faultRecovery:
			late++
			if s.status == 200 {
				lateOK++
			}
		}
	}
	for ph := range byPhase {
		t.Logf("HTTP, %s (from %v): %v", phaseNames[ph], marks[ph].Round(time.Millisecond), byPhase[ph])
	}
	t.Logf("HTTP: %d requests, %d skipped (100 in flight)", len(l.shots), l.skipped.Load())
	span := (back - out).Seconds()
	bound := float64(floorBurst) + floorRate*span
	t.Logf("/api/x served while Redis was away (%.2f s): %d; the floor's bound %.0f", span, apiOK, bound)
	if float64(apiOK) > bound || float64(apiOK) < floorRate*span/2 {
		t.Errorf("/api/x served while Redis was away: %d, want from %.0f (half the floor's rate) to the floor's bound %.0f",
			apiOK, floorRate*span/2, bound)
	}
	for _, ph := range []int{phaseBlackHole, phaseKilled} {
		if byPhase[ph]["/pay 503 ratelimit-unavailable:closed-pay"] == 0 {
			t.Errorf("%s: no 503 ratelimit-unavailable:closed-pay", phaseNames[ph])
		}
	}
	if healthy < 200 || late < 200 {
		stalls.enforce(t, 0, marks[numPhases], "HTTP requests answered while healthy: %d, from 2 × breaker open time after Redis returned: %d; want ≥ 200 each", healthy, late)
	}
	switch {
	case float64(healthyOK) >= 0.99*float64(healthy):
	case healthyFail > 0:
		t.Logf("not enforced, the store decided %.0f times by its fail mode while Redis was up (Redis answered late): healthy: %d of %d HTTP requests served", healthyFail, healthyOK, healthy)
	default:
		stalls.enforce(t, 0, out, "healthy: %d of %d HTTP requests served, want ≥ 99%%", healthyOK, healthy)
	}
	switch {
	case float64(lateOK) >= 0.99*float64(late):
	case lateFail > 0:
		t.Logf("not enforced, the store decided %.0f times by its fail mode after Redis returned (Redis answered late): %d of %d HTTP requests served", lateFail, lateOK, late)
	default:
		stalls.enforce(t, back+2*faultRecovery, marks[numPhases], "from 2 × breaker open time after Redis returned: %d of %d HTTP requests served, want ≥ 99%%", lateOK, late)
	}
}

// badAnswer says what is wrong with s's answer whatever the phase: a
// transport error, a status other than 200, 429 and 503, or a refusal
// without its rule's reason code.
func badAnswer(s faultShot) string {
	switch {
	case s.err != "":
		return "transport error: " + s.err
	case s.status == 503 && (!s.pay || s.reason != "ratelimit-unavailable:closed-pay"):
		return fmt.Sprintf("503 %q; want only /pay refused 503, by ratelimit-unavailable:closed-pay", s.reason)
	case s.status == 429 && !strings.HasPrefix(s.reason, "ratelimit:open-"):
		return fmt.Sprintf("429 %q; want an open rule's reason", s.reason)
	case s.status != 200 && s.status != 429 && s.status != 503:
		return fmt.Sprintf("status %d %q", s.status, s.reason)
	}
	return ""
}

// stallMeter measures the machine rather than the code: a goroutine that
// sleeps 1 ms at a time records every wake-up more than 2 ms late (CPU
// hogs, other processes, this process's own load).
type stallMeter struct {
	began      time.Time
	stop, done chan struct{}

	pinging sync.WaitGroup // watchRedis's goroutine

	mu        sync.Mutex
	stalls    []stall
	redisLate []stall // PINGs of watchRedis that took the store timeout or more
}

// stall is one late wake-up: when (since began) and how late.
type stall struct{ at, late time.Duration }

func startStallMeter() *stallMeter {
	m := &stallMeter{began: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *stallMeter) run() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		if late := time.Since(t0) - time.Millisecond; late > 2*time.Millisecond {
			m.mu.Lock()
			m.stalls = append(m.stalls, stall{at: time.Since(m.began), late: late})
			m.mu.Unlock()
		}
	}
}

// Stop ends the meter's goroutine.
func (m *stallMeter) Stop() {
	close(m.stop)
	<-m.done
	m.pinging.Wait()
}

// worstIn returns the longest stall that overlapped [from, to].
func (m *stallMeter) worstIn(from, to time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return worstOf(m.stalls, from, to)
}

// worstOf returns the latest of the stalls that overlapped [from, to].
func worstOf(stalls []stall, from, to time.Duration) time.Duration {
	var worst time.Duration
	for _, s := range stalls {
		if s.at >= from && s.at-s.late <= to {
			worst = max(worst, s.late)
		}
	}
	return worst
}

// sumIn returns the total lateness of the stalls that overlapped [from, to].
func (m *stallMeter) sumIn(from, to time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum time.Duration
	for _, s := range m.stalls {
		if s.at >= from && s.at-s.late <= to {
			sum += s.late
		}
	}
	return sum
}

// enforce fails t with the message unless a stall of at least the store
// timeout overlapped [from, to]; then it only logs it.
func (m *stallMeter) enforce(t *testing.T, from, to time.Duration, format string, args ...any) {
	t.Helper()
	if w := m.worstIn(from, to); w >= faultTimeout {
		t.Logf("not enforced, the machine stalled a sleeping goroutine %v (≥ the store timeout) in that window: "+format,
			append([]any{w}, args...)...)
		return
	}
	t.Errorf(format, args...)
}

func (m *stallMeter) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var over10, overTimeout int
	var worst time.Duration
	for _, s := range m.stalls {
		if s.late > 10*time.Millisecond {
			over10++
		}
		if s.late >= faultTimeout {
			overTimeout++
		}
		worst = max(worst, s.late)
	}
	return fmt.Sprintf("%d over 2ms, %d over 10ms, %d ≥ %v; worst %v", len(m.stalls), over10, overTimeout, faultTimeout, worst)
}
