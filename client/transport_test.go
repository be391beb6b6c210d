package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/balancer/balancerhttp"
	"github.com/spillwayhq/spillway/breaker"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/deadline"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/retry"
	"github.com/spillwayhq/spillway/shed"
	"github.com/spillwayhq/spillway/throttle"
	"go.uber.org/goleak"
)

// script is a loopback server answering from a list of statuses (the last
// one repeats), recording what it received.
type script struct {
	mu       sync.Mutex
	statuses []int
	headers  map[string]string // extra response headers
	n        int
	bodies   []string
	reqHdrs  []http.Header
	block    chan struct{} // if set, requests wait on it
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := min(s.n, len(s.statuses)-1)
	status := s.statuses[i]
	s.n++
	s.bodies = append(s.bodies, string(b))
	s.reqHdrs = append(s.reqHdrs, r.Header.Clone())
	block := s.block
	s.mu.Unlock()
	if block != nil {
		<-block
	}
	for k, v := range s.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "answer")
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func serve(t *testing.T, s *script) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

func newTransport(t *testing.T, cfg client.Config) (*client.Transport, *http.Client) {
	t.Helper()
	if cfg.Transport == nil {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		cfg.Transport = tr
	}
	tr, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, &http.Client{Transport: tr}
}

func fastPolicy(t *testing.T, attempts int, budget *retry.Budget) *retry.Policy {
	t.Helper()
	p, err := retry.NewPolicy(retry.Policy{MaxAttempts: attempts, Backoff: retry.Backoff{Base: 0.001, Cap: 0.002}, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func do(t *testing.T, c *http.Client, req *http.Request) (int, error) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestRetriesUntilSuccess(t *testing.T) {
	s := &script{statuses: []int{503, 502, 200}}
	url := serve(t, s)
	tr, c := newTransport(t, client.Config{Retry: fastPolicy(t, 3, nil)})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	status, err := do(t, c, req)
	if err != nil || status != 200 || s.count() != 3 {
		t.Fatalf("status %d err %v after %d attempts; want 200 after 3", status, err, s.count())
	}
	if st := tr.Stats(); st.Sent != 3 || st.Retried != 2 {
		t.Fatalf("stats %+v, want 3 sent, 2 retried", st)
	}
}

func TestLastAnswerReturnedWhenAttemptsRunOut(t *testing.T) {
	s := &script{statuses: []int{503}}
	url := serve(t, s)
	tr, c := newTransport(t, client.Config{Retry: fastPolicy(t, 3, nil)})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	status, err := do(t, c, req)
	if err != nil || status != 503 || s.count() != 3 {
		t.Fatalf("status %d err %v after %d attempts; want the last 503 after 3", status, err, s.count())
	}
	if st := tr.Stats(); st.Stops[retry.StopAttempts] != 1 {
		t.Fatalf("stops %v, want one StopAttempts", st.Stops)
	}
}

func TestNonIdempotentPostIsNotRetried(t *testing.T) {
	s := &script{statuses: []int{503, 200}}
	url := serve(t, s)
	_, c := newTransport(t, client.Config{Retry: fastPolicy(t, 3, nil)})
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("order #1"))
	if status, _ := do(t, c, req); status != 503 || s.count() != 1 {
		t.Fatalf("POST: status %d after %d attempts; want 503 after 1 (not retried)", status, s.count())
	}
	// With an Idempotency-Key it is, with its body replayed.
	req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader("order #2"))
	req.Header.Set("Idempotency-Key", "k-2")
	s.mu.Lock()
	s.n, s.statuses, s.bodies = 0, []int{503, 200}, nil
	s.mu.Unlock()
	if status, _ := do(t, c, req); status != 200 || s.count() != 2 {
		t.Fatalf("POST with Idempotency-Key: status %d after %d attempts; want 200 after 2", status, s.count())
	}
	if s.bodies[0] != "order #2" || s.bodies[1] != "order #2" {
		t.Fatalf("bodies %q, want the body sent twice", s.bodies)
	}
}

func TestBodyReplayedOnRetry(t *testing.T) {
	s := &script{statuses: []int{502, 503, 200}}
	url := serve(t, s)
	_, c := newTransport(t, client.Config{Retry: fastPolicy(t, 3, nil)})
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(strings.Repeat("x", 100000)))
	if status, err := do(t, c, req); status != 200 || err != nil {
		t.Fatalf("status %d err %v", status, err)
	}
	for i, b := range s.bodies {
		if len(b) != 100000 {
			t.Fatalf("attempt %d received %d bytes of body, want 100000", i+1, len(b))
		}
	}
	// A body without GetBody cannot be replayed: no retry.
	s.mu.Lock()
	s.n, s.bodies = 0, nil
	s.mu.Unlock()
	req, _ = http.NewRequest(http.MethodPut, url, io.NopCloser(strings.NewReader("once")))
	req.GetBody = nil
	if status, _ := do(t, c, req); status != 502 || s.count() != 1 {
		t.Fatalf("unreplayable body: status %d after %d attempts; want 502 after 1", status, s.count())
	}
}

// Retry-After is honoured: the retry is never sent earlier than asked.
func TestRetryAfterRespected(t *testing.T) {
	s := &script{statuses: []int{503, 200}, headers: map[string]string{"Retry-After": "1"}}
	url := serve(t, s)
	_, c := newTransport(t, client.Config{Retry: fastPolicy(t, 3, nil)})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	start := time.Now()
	if status, _ := do(t, c, req); status != 200 {
		t.Fatalf("status %d", status)
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("retried after %v, before the 1 s the server asked for", el)
	}
}

// A retry that cannot finish before the caller's deadline is not made.
func TestNoRetryPastDeadline(t *testing.T) {
	s := &script{statuses: []int{503, 200}, headers: map[string]string{"Retry-After": "5"}}
	url := serve(t, s)
	tr, c := newTransport(t, client.Config{Retry: fastPolicy(t, 3, nil)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if status, _ := do(t, c, req); status != 503 || s.count() != 1 {
		t.Fatalf("status %d after %d attempts; want the 503 at once (a 5 s wait cannot fit a 2 s deadline)", status, s.count())
	}
	if st := tr.Stats(); st.Stops[retry.StopDeadline] != 1 {
		t.Fatalf("stops %v, want one StopDeadline", st.Stops)
	}
}

// Under a flood of failures retries stay within the budget.
func TestRetriesNeverExceedBudget(t *testing.T) {
	s := &script{statuses: []int{503}}
	url := serve(t, s)
	budget, err := retry.NewBudget(retry.BudgetConfig{Max: 2, Ratio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	tr, c := newTransport(t, client.Config{Retry: fastPolicy(t, 5, budget)})
	const calls = 200
	for i := 0; i < calls; i++ {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		do(t, c, req)
	}
	retries := s.count() - calls
	if bound := 2 + 0.1*calls; float64(retries) > bound {
		t.Fatalf("%d retries for %d calls, above the budget's %v", retries, calls, bound)
	}
	if retries < 10 {
		t.Fatalf("%d retries: the budget's ratio should allow about 20", retries)
	}
	if st := tr.Stats(); st.Stops[retry.StopBudget] == 0 {
		t.Fatalf("no StopBudget counted: %v", st.Stops)
	}
}

func TestBreakerOpensAndRefusesLocally(t *testing.T) {
	s := &script{statuses: []int{500}}
	url := serve(t, s)
	b, err := breaker.New(breaker.Config{Threshold: 3, Recovery: 60})
	if err != nil {
		t.Fatal(err)
	}
	_, c := newTransport(t, client.Config{Breaker: b})
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if status, _ := do(t, c, req); status != 500 {
			t.Fatalf("call %d: %d", i, status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	_, err = do(t, c, req)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Reason != client.BreakerOpen || !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("after 3 failures: %v, want a local BreakerOpen refusal", err)
	}
	if s.count() != 3 {
		t.Fatalf("server saw %d calls, want 3 (the 4th refused locally)", s.count())
	}
	// 4xx never counts as a failure.
	b2, _ := breaker.New(breaker.Config{Threshold: 1, Recovery: 60})
	s404 := &script{statuses: []int{404}}
	url404 := serve(t, s404)
	_, c2 := newTransport(t, client.Config{Breaker: b2})
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodGet, url404, nil)
		if status, err := do(t, c2, req); status != 404 || err != nil {
			t.Fatalf("404 #%d: %d %v (a 4xx must not open the breaker)", i, status, err)
		}
	}
}

func TestBulkheadBoundsCallsInFlight(t *testing.T) {
	s := &script{statuses: []int{200}, block: make(chan struct{})}
	url := serve(t, s)
	bh, err := client.NewBulkhead(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, c := newTransport(t, client.Config{Bulkhead: bh})
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		st, _ := do(t, c, req)
		done <- st
	}()
	for s.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	_, err = do(t, c, req)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Reason != client.BulkheadFull {
		t.Fatalf("second call: %v, want BulkheadFull", err)
	}
	close(s.block)
	if st := <-done; st != 200 {
		t.Fatalf("first call %d", st)
	}
	// The place came back when the first body was read and closed.
	if n := bh.Limiter().InFlight(); n != 0 {
		t.Fatalf("bulkhead in flight %d after the body was closed, want 0", n)
	}
	req, _ = http.NewRequest(http.MethodGet, url, nil)
	if st, err := do(t, c, req); st != 200 || err != nil {
		t.Fatalf("third call: %d %v", st, err)
	}
}

// A backend that rejects everything is soon throttled locally.
func TestThrottleDropsLocally(t *testing.T) {
	s := &script{statuses: []int{503}}
	url := serve(t, s)
	th, err := throttle.New(throttle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, c := newTransport(t, client.Config{Throttle: th})
	local := 0
	const calls = 200
	for i := 0; i < calls; i++ {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if _, err := do(t, c, req); err != nil {
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Reason != client.Throttled {
				t.Fatalf("call %d: %v", i, err)
			}
			local++
		}
	}
	// With no accepts p = n/(n+1): after a few calls nearly every call is
	// dropped locally.
	if local < calls/2 || s.count()+local != calls {
		t.Fatalf("%d of %d dropped locally, server saw %d; want most dropped locally", local, calls, s.count())
	}
}

func TestForwardsClassAndDeadline(t *testing.T) {
	s := &script{statuses: []int{503, 200}}
	url := serve(t, s)
	_, c := newTransport(t, client.Config{Retry: fastPolicy(t, 3, nil), DeadlineReserve: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(shed.WithClass(context.Background(), shed.Sheddable), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if st, _ := do(t, c, req); st != 200 {
		t.Fatalf("status %d", st)
	}
	for i, h := range s.reqHdrs {
		if got := h.Get(shed.ClassHeader); got != "sheddable" {
			t.Errorf("attempt %d: class header %q, want sheddable", i+1, got)
		}
		d, ok, err := deadline.FromHeader(h)
		if !ok || err != nil || d <= 0 || d > 5*time.Second-10*time.Millisecond {
			t.Errorf("attempt %d: budget %v %v %v, want within (0, 4.99s]", i+1, d, ok, err)
		}
	}
	if req.Header.Get(shed.ClassHeader) != "" {
		t.Fatal("the caller's request was modified")
	}
}

// No goroutine outlives the calls: a bulkhead wait that times out, a retry
// sleep cut by the context, bodies released.
func TestNoGoroutineLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	func() {
		s := &script{statuses: []int{503}, headers: map[string]string{"Retry-After": "30"}}
		srv := httptest.NewServer(s)
		defer srv.Close()
		inner := &http.Transport{}
		defer inner.CloseIdleConnections()
		bh, _ := client.NewBulkhead(2, 20*time.Millisecond)
		tr, _ := client.New(client.Config{Transport: inner, Retry: fastPolicy(t, 3, nil), Bulkhead: bh})
		c := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		var errs atomic.Int32
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				if resp, err := c.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				} else {
					errs.Add(1)
				}
			}()
		}
		wg.Wait()
		inner.CloseIdleConnections()
	}()
	leakcheck.Verify(t, 10*time.Second, ignore)
}

// A slow first attempt is raced by a hedge after the hedging delay; the
// hedge's answer wins and the slow attempt is cancelled.
func TestHedgeWinsOverSlowAttempt(t *testing.T) {
	var calls atomic.Int32
	cancelled := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select { // the slow replica: answers after 10 s unless cancelled
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
				cancelled <- struct{}{}
				return
			}
		}
		_, _ = io.WriteString(w, "fast")
	}))
	defer srv.Close()
	h, err := retry.NewHedger(retry.HedgeConfig{Delay: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	tr, c := newTransport(t, client.Config{Hedge: h})
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "fast" || time.Since(start) > 5*time.Second {
		t.Fatalf("body %q after %v; want the hedge's answer, long before the slow one", body, time.Since(start))
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the losing attempt was not cancelled")
	}
	if st := tr.Stats(); st.Hedges != 1 || calls.Load() != 2 {
		t.Fatalf("hedges %d, server calls %d; want 1 and 2", st.Hedges, calls.Load())
	}
}

// Hedges are paid from the budget: an empty budget sends none.
func TestHedgeNeedsBudget(t *testing.T) {
	s := &script{statuses: []int{200}, block: make(chan struct{})}
	url := serve(t, s)
	budget, _ := retry.NewBudget(retry.BudgetConfig{Max: 1, Ratio: 0.001})
	budget.TryRetry(0) // spend the only token
	h, _ := retry.NewHedger(retry.HedgeConfig{Delay: 0.01, Budget: budget})
	tr, c := newTransport(t, client.Config{Hedge: h})
	go func() { time.Sleep(200 * time.Millisecond); close(s.block) }()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if st, err := do(t, c, req); st != 200 || err != nil {
		t.Fatalf("%d %v", st, err)
	}
	if st := tr.Stats(); st.Hedges != 0 || s.count() != 1 {
		t.Fatalf("hedges %d, server calls %d; want none beyond the budget", st.Hedges, s.count())
	}
}

// An open breaker refuses the retry locally; the retry after the next
// backoff finds it half-open and its trial succeeds. The refused attempt
// is not paid from the budget.
func TestBreakerRefusalIsRetriedAfterBackoff(t *testing.T) {
	s := &script{statuses: []int{503, 200}}
	url := serve(t, s)
	b, _ := breaker.New(breaker.Config{Threshold: 1, Recovery: 0.05})
	budget, _ := retry.NewBudget(retry.BudgetConfig{Max: 1, Ratio: 0.001})
	pol, _ := retry.NewPolicy(retry.Policy{MaxAttempts: 6, Budget: budget,
		Backoff: retry.Backoff{Base: 0.02, Cap: 0.03, Jitter: retry.NoJitter}})
	tr, c := newTransport(t, client.Config{Retry: pol, Breaker: b})
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if st, err := do(t, c, req); st != 200 || err != nil {
		t.Fatalf("%d %v, want 200 once the breaker lets a trial through", st, err)
	}
	st := tr.Stats()
	if s.count() != 2 || st.Refused == 0 {
		t.Fatalf("server saw %d, %d refused locally; want 2 sent and at least one refusal between", s.count(), st.Refused)
	}
}

// seqPicker returns its script's endpoint addresses in turn (cycling).
type seqPicker struct {
	mu     sync.Mutex
	script []string
	n      int
}

func (p *seqPicker) Pick(s *balancer.Snapshot, _ float64) (int, error) {
	p.mu.Lock()
	addr := p.script[p.n%len(p.script)]
	p.n++
	p.mu.Unlock()
	for i := 0; i < s.Len(); i++ {
		if s.Endpoint(i).Addr() == addr {
			return i, nil
		}
	}
	return 0, nil
}

// Over a balancing transport, a retry goes to an endpoint the call has not
// tried, even when the picker would choose the failing one again.
func TestRetryGoesToAnotherEndpoint(t *testing.T) {
	bad := &script{statuses: []int{503}}
	good := &script{statuses: []int{200}}
	badSrv, goodSrv := httptest.NewServer(bad), httptest.NewServer(good)
	defer badSrv.Close()
	defer goodSrv.Close()
	badAddr, goodAddr := strings.TrimPrefix(badSrv.URL, "http://"), strings.TrimPrefix(goodSrv.URL, "http://")
	set, err := balancer.NewSet(balancer.SetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	set.Update(0, []balancer.Endpoint{{Addr: badAddr}, {Addr: goodAddr}})
	// The picker's first two answers are the bad endpoint: without the
	// tried set both attempts would land there.
	lb, err := balancerhttp.New(balancerhttp.Config{Set: set, Picker: &seqPicker{script: []string{badAddr, badAddr, goodAddr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.CloseIdleConnections()
	_, c := newTransport(t, client.Config{Transport: lb, Retry: fastPolicy(t, 2, nil)})
	req, _ := http.NewRequest(http.MethodGet, "http://service.local/", nil)
	if st, err := do(t, c, req); st != 200 || err != nil {
		t.Fatalf("%d %v, want the retry served by the other endpoint", st, err)
	}
	if bad.count() != 1 || good.count() != 1 {
		t.Fatalf("bad endpoint saw %d, good %d; want 1 and 1", bad.count(), good.count())
	}
}
