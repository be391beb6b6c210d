package balancerhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/discovery"
	"github.com/spillwayhq/spillway/health"
	"github.com/spillwayhq/spillway/retry"

	"go.uber.org/goleak"
)

func TestSpreadKeepsVirtualHost(t *testing.T) {
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	set := newSet(t, balancer.SetConfig{}, a, b, c)
	rt, err := New(Config{Set: set, Transport: inner(t)})
	if err != nil {
		t.Fatal(err)
	}
	for range 90 {
		get(t, rt, 200)
	}
	// Sequential requests see no load, so P2C picks uniformly: a backend
	// left out of 90 picks has probability 3·(2/3)^90 ≈ 4e-16.
	for i, n := range counts(a, b, c) {
		if n == 0 {
			t.Errorf("backend %d got no request of 90: %v", i, counts(a, b, c))
		}
	}
	for _, be := range []*backend{a, b, c} {
		be.mu.Lock()
		for _, h := range be.hosts {
			if h != "svc.example" {
				t.Errorf("%s saw Host %q, want the virtual host svc.example", be.name, h)
			}
		}
		be.mu.Unlock()
	}
}

func TestRequestNotModified(t *testing.T) {
	set := newSet(t, balancer.SetConfig{}, &backend{addr: "10.0.0.1:80"})
	var sent *http.Request
	rt, err := New(Config{Set: set, Scheme: "https", Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://svc.example/p?x=1", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := req.URL.String(); got != "http://svc.example/p?x=1" || req.Host != "svc.example" {
		t.Errorf("caller's request changed: URL %s Host %s", got, req.Host)
	}
	if got := sent.URL.String(); got != "https://10.0.0.1:80/p?x=1" || sent.Host != "svc.example" {
		t.Errorf("sent URL %s Host %s, want https://10.0.0.1:80/p?x=1 and Host svc.example", got, sent.Host)
	}
	if resp.Request != req {
		t.Error("resp.Request is not the caller's request")
	}
	// An empty Host: the caller's URL host is the virtual host.
	req = &http.Request{Method: "GET", URL: req.URL, Header: http.Header{}}
	if _, err := rt.RoundTrip(req.WithContext(context.Background())); err != nil {
		t.Fatal(err)
	}
	if sent.Host != "svc.example" {
		t.Errorf("Host %q for a request without Host, want svc.example", sent.Host)
	}
}

func TestSlowBackendGetsFewer(t *testing.T) {
	slow, f1, f2 := newBackend(t, "slow"), newBackend(t, "f1"), newBackend(t, "f2")
	slow.delay = 50 * time.Millisecond
	set := newSet(t, balancer.SetConfig{}, slow, f1, f2)
	rt, err := New(Config{Set: set, Transport: inner(t)})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 12, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				req, _ := http.NewRequest("GET", "http://svc.example/", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	n := counts(slow, f1, f2)
	if n[0]+n[1]+n[2] != workers*each {
		t.Fatalf("counts %v do not add up to %d", n, workers*each)
	}
	// Least request keeps the slow backend's in-flight count level with the
	// fast ones', so it serves far fewer; uniform picks would give it 100.
	t.Logf("counts slow, f1, f2 = %v", n)
	if 2*n[0] >= min(n[1], n[2]) {
		t.Errorf("slow backend got %d requests, fast ones %d and %d: want under half of either", n[0], n[1], n[2])
	}
}

func TestDrain(t *testing.T) {
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	for _, be := range []*backend{a, b, c} {
		be.entered = make(chan string, 64)
	}
	set := newSet(t, balancer.SetConfig{}, a, b, c)
	rt, err := New(Config{Set: set, Transport: inner(t)})
	if err != nil {
		t.Fatal(err)
	}
	epA := endpointOf(t, set, a.addr)
	// Park blocking requests until one sits on a.
	type result struct {
		status int
		body   string
		err    error
	}
	results := make(chan result, 64)
	parked := 0
	for parked < 30 {
		parked++
		go func() {
			req, _ := http.NewRequest("GET", "http://svc.example/?block", nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				results <- result{err: err}
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{status: resp.StatusCode, body: string(body), err: err}
		}()
		var who string
		select {
		case who = <-a.entered:
		case who = <-b.entered:
		case who = <-c.entered:
		case <-time.After(wait):
			t.Fatal("no blocking request arrived")
		}
		if who == "a" {
			break
		}
	}
	if epA.InFlight() != 1 {
		t.Fatalf("a has %d in flight, want 1", epA.InFlight())
	}
	set.Drain(1, a.addr, true)
	before := a.count.Load()
	for range 60 {
		get(t, rt, 200)
	}
	if got := a.count.Load() - before; got != 0 {
		t.Errorf("draining a got %d new requests", got)
	}
	if epA.InFlight() != 1 {
		t.Errorf("a has %d in flight while draining, want its parked request", epA.InFlight())
	}
	for _, be := range []*backend{a, b, c} {
		be.unblock()
	}
	for range parked {
		r := <-results
		if r.err != nil || r.status != 200 {
			t.Errorf("parked request: status %d err %v", r.status, r.err)
		}
	}
	if epA.InFlight() != 0 {
		t.Errorf("a has %d in flight after its requests finished", epA.InFlight())
	}
}

func TestConsistentHash(t *testing.T) {
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	bs := []*backend{a, b, c}
	for _, table := range []balancer.TableBuilder{nil, &balancer.RingConfig{}} {
		t.Run(fmt.Sprintf("%T", table), func(t *testing.T) {
			set := newSet(t, balancer.SetConfig{}, a, b, c)
			rt, err := New(Config{Set: set, Transport: inner(t), Hash: &balancer.HashPolicy{Header: "X-User"}, Table: table})
			if err != nil {
				t.Fatal(err)
			}
			first := get(t, rt, 200, "X-User", "alice")
			for range 99 {
				if got := get(t, rt, 200, "X-User", "alice"); got != first {
					t.Fatalf("alice went to %s after %s", got, first)
				}
			}
			per := map[string]int{}
			for i := range 300 {
				per[get(t, rt, 200, "X-User", fmt.Sprint("user-", i))]++
			}
			for _, be := range bs {
				if per[be.name] < 30 {
					t.Errorf("300 keys: %v, want at least 30 on each", per)
					break
				}
			}
			// Without a key the picker decides: each backend gets some.
			per = map[string]int{}
			for range 90 {
				per[get(t, rt, 200)]++
			}
			if len(per) != 3 {
				t.Errorf("90 requests without key: %v, want all three", per)
			}
			// Draining alice's backend moves her, consistently, elsewhere.
			var firstAddr string
			for _, be := range bs {
				if be.name == first {
					firstAddr = be.addr
				}
			}
			set.Drain(1, firstAddr, true)
			moved := get(t, rt, 200, "X-User", "alice")
			if moved == first {
				t.Fatalf("alice still on draining %s", first)
			}
			for range 20 {
				if got := get(t, rt, 200, "X-User", "alice"); got != moved {
					t.Fatalf("alice went to %s after %s", got, moved)
				}
			}
		})
	}
}

func TestOutlierEjectionAndReturn(t *testing.T) {
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	b.status.Store(503)
	clk := &clock.Manual{}
	set := newSet(t, balancer.SetConfig{}, a, b, c)
	d, err := health.NewDetector(health.OutlierConfig{ConsecutiveGatewayFailure: 3, BaseEjectionTime: 10})
	if err != nil {
		t.Fatal(err)
	}
	d.SetHosts([]string{a.addr, b.addr, c.addr})
	rt, err := New(Config{Set: set, Transport: inner(t), Clock: clk, Outlier: d})
	if err != nil {
		t.Fatal(err)
	}
	send := func() {
		req, _ := http.NewRequest("GET", "http://svc.example/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := 0; b.count.Load() < 3; i++ {
		if i == 500 {
			t.Fatalf("b got %d of 500 requests", b.count.Load())
		}
		clk.Advance(0.001)
		send()
	}
	until, ejected := d.Ejected(b.addr)
	if !ejected {
		t.Fatal("b not ejected after 3 consecutive 503s")
	}
	if st, _ := set.State(clk.Now(), b.addr); st != balancer.Ejected {
		t.Fatalf("b is %v in the set, want ejected", st)
	}
	b.status.Store(0) // b recovers; only time lets it back
	for clk.Now()+0.05 < until {
		clk.Advance(0.05)
		send()
	}
	if n := b.count.Load(); n != 3 {
		t.Errorf("b got %d requests while ejected, want none after its 3 failures", n-3)
	}
	clk.T = until + 0.5
	for range 60 {
		clk.Advance(0.001)
		send()
	}
	if b.count.Load() == 3 {
		t.Error("b got no traffic after its ejection ended")
	}
	if _, ej := d.Ejected(b.addr); ej {
		t.Error("the Detector still holds b ejected: no Tick ran")
	}
}

func TestFollowWithChecker(t *testing.T) {
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	clk := clock.NewReal()
	set, err := balancer.NewSet(balancer.SetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	check := health.CheckFunc(func(ctx context.Context, addr string) error {
		if addr == c.addr {
			return errors.New("c is sick")
		}
		return nil
	})
	checker, err := health.NewChecker(check, health.ActiveConfig{Interval: 0.01, Jitter: -1},
		health.CheckerOptions{OnChange: HealthCallback(set, clk), Logger: quiet, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	d, err := health.NewDetector(health.OutlierConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan error, 1)
	go func() {
		followed <- Follow(ctx, set, discovery.Static(
			balancer.Endpoint{Addr: a.addr}, balancer.Endpoint{Addr: b.addr}, balancer.Endpoint{Addr: c.addr}), checker, d, clk)
	}()
	checker.Start()
	defer checker.Stop()
	eventually(t, "a and b healthy, c out", func() bool {
		s := set.Snapshot()
		return s.Members() == 3 && s.Healthy() == 2 && !s.Panic()
	})
	if st := d.Stats(); st.Hosts != 3 {
		t.Errorf("Detector watches %d hosts, want 3", st.Hosts)
	}
	rt, err := New(Config{Set: set, Transport: inner(t), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for range 60 {
		get(t, rt, 200)
	}
	if n := counts(a, b, c); n[2] != 0 || n[0] == 0 || n[1] == 0 {
		t.Errorf("counts a, b, c = %v: want c none, a and b some", n)
	}
	cancel()
	select {
	case err := <-followed:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	case <-time.After(wait):
		t.Fatal("Follow did not return after cancel")
	}
}

func TestBodyInFlight(t *testing.T) {
	clk := &clock.Manual{}
	set, _ := balancer.NewSet(balancer.SetConfig{PanicThreshold: -1})
	set.Update(0, []balancer.Endpoint{{Addr: "10.0.0.1:80"}})
	ep := endpointOf(t, set, "10.0.0.1:80")
	var next func(*http.Request) (*http.Response, error)
	rt, err := New(Config{Set: set, Clock: clk, Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
		clk.Advance(0.25) // the answer takes 250 ms
		return next(r)
	})})
	if err != nil {
		t.Fatal(err)
	}
	body := newBody("hello world")
	next = func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: body}, nil
	}
	req, _ := http.NewRequest("GET", "http://svc/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if ep.InFlight() != 1 {
		t.Fatalf("in flight %d with the body unread, want 1", ep.InFlight())
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if ep.InFlight() != 1 {
		t.Fatalf("in flight %d with the body half read, want 1", ep.InFlight())
	}
	if rest, _ := io.ReadAll(resp.Body); string(buf)+string(rest) != "hello world" {
		t.Fatalf("body %q", string(buf)+string(rest))
	}
	if ep.InFlight() != 0 {
		t.Fatalf("in flight %d after EOF, want 0", ep.InFlight())
	}
	resp.Body.Close()
	resp.Body.Close()
	if ep.InFlight() != 0 || body.closed.Load() != 2 {
		t.Fatalf("after two Closes: in flight %d (want 0), inner closes %d (want 2)", ep.InFlight(), body.closed.Load())
	}
	if got := ep.Latency(clk.Now()); got < 0.2499 || got > 0.2501 {
		t.Errorf("latency estimate %v, want 0.25 (time to the answer)", got)
	}

	// Closed unread; no body; a 101's body (the connection, unwrapped).
	for _, tc := range []struct {
		name   string
		status int
		body   io.ReadCloser
	}{{"unread", 200, newBody("x")}, {"NoBody", 204, http.NoBody}, {"nil", 204, nil}, {"101", 101, newBody("")}} {
		next = func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: tc.status, Body: tc.body}, nil
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(1)
		if tc.name != "unread" {
			want = 0
			if resp.Body != tc.body {
				t.Errorf("%s: body wrapped", tc.name)
			}
		}
		if got := ep.InFlight(); int64(got) != want {
			t.Errorf("%s: in flight %d before Close, want %d", tc.name, got, want)
		}
		if resp.Body != nil {
			resp.Body.Close()
		}
		if ep.InFlight() != 0 {
			t.Errorf("%s: in flight %d after Close", tc.name, ep.InFlight())
		}
	}
}

func TestTransportErrorsAndOutlier(t *testing.T) {
	set, _ := balancer.NewSet(balancer.SetConfig{PanicThreshold: -1})
	set.Update(0, []balancer.Endpoint{{Addr: "10.0.0.1:80"}})
	ep := endpointOf(t, set, "10.0.0.1:80")
	d, _ := health.NewDetector(health.OutlierConfig{ConsecutiveGatewayFailure: 2, MaxEjectionPercent: 100})
	d.SetHosts([]string{"10.0.0.1:80"})
	clk := &clock.Manual{T: 1}
	boom := errors.New("connection refused")
	rt, err := New(Config{Set: set, Clock: clk, Outlier: d, Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
		if err := r.Context().Err(); err != nil {
			return nil, err
		}
		return nil, boom
	})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 5 { // the caller's cancel is no evidence
		body := newBody("payload")
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://svc/", body)
		if _, err := rt.RoundTrip(req); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	}
	if _, ej := d.Ejected("10.0.0.1:80"); ej || ep.InFlight() != 0 {
		t.Fatalf("after cancelled requests: ejected %v, in flight %d", ej, ep.InFlight())
	}
	for range 2 {
		req, _ := http.NewRequest("GET", "http://svc/", nil)
		if _, err := rt.RoundTrip(req); err != boom {
			t.Fatalf("err %v, want the inner error as it is", err)
		}
	}
	if st, _ := set.State(1, "10.0.0.1:80"); st != balancer.Ejected {
		t.Fatalf("state %v after 2 transport errors, want ejected", st)
	}
	// Nothing eligible (panic mode off): ErrNoEndpoints, body closed.
	body := newBody("payload")
	req, _ := http.NewRequest("POST", "http://svc/", body)
	_, err = rt.RoundTrip(req)
	if err != ErrNoEndpoints || !errors.Is(err, balancer.ErrNoEndpoints) {
		t.Fatalf("err %v, want ErrNoEndpoints wrapping balancer.ErrNoEndpoints", err)
	}
	if body.closed.Load() != 1 {
		t.Errorf("request body closed %d times, want 1", body.closed.Load())
	}
}

func TestUnderClientTransport(t *testing.T) {
	policy := &retry.Policy{MaxAttempts: 3, Backoff: retry.Backoff{Base: 0.001, Cap: 0.002}}

	t.Run("outlier ejects the failing backend", func(t *testing.T) {
		good, bad := newBackend(t, "good"), newBackend(t, "bad")
		bad.status.Store(503)
		set := newSet(t, balancer.SetConfig{}, good, bad)
		d, _ := health.NewDetector(health.OutlierConfig{ConsecutiveGatewayFailure: 1})
		d.SetHosts([]string{good.addr, bad.addr})
		bt, err := New(Config{Set: set, Transport: inner(t), Outlier: d})
		if err != nil {
			t.Fatal(err)
		}
		ct, err := client.New(client.Config{Transport: bt, Retry: policy})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; bad.count.Load() == 0; i++ {
			if i == 200 {
				t.Fatal("bad got none of 200 calls")
			}
			if body := get(t, ct, 200); body != "good" {
				t.Fatalf("body %q", body)
			}
		}
		for range 20 {
			get(t, ct, 200)
		}
		if n := bad.count.Load(); n != 1 {
			t.Errorf("bad got %d calls, want 1 (ejected after its first 503)", n)
		}
	})

	t.Run("each attempt picks afresh", func(t *testing.T) {
		good, bad := newBackend(t, "good"), newBackend(t, "bad")
		bad.status.Store(503)
		set := newSet(t, balancer.SetConfig{}, good, bad)
		// Draws that make P2C alternate between the two endpoints: a
		// retry can only succeed if it picks again.
		alt := &seq{u: []float64{0.25, 0.25, 0.75, 0.75}}
		bt, err := New(Config{Set: set, Transport: inner(t), Picker: &balancer.LeastRequest{Rand: alt}})
		if err != nil {
			t.Fatal(err)
		}
		ct, err := client.New(client.Config{Transport: bt, Retry: policy})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if body := get(t, ct, 200); body != "good" {
				t.Fatalf("body %q", body)
			}
		}
		if n := bad.count.Load(); n < 5 {
			t.Errorf("bad got %d calls of 20, want about 10 retried ones", n)
		}
	})
}

// seq is a Rand that repeats u; safe for concurrent use.
type seq struct {
	mu sync.Mutex
	u  []float64
	i  int
}

func (s *seq) Float64() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.u[s.i%len(s.u)]
	s.i++
	return v
}

func TestNewConfigErrors(t *testing.T) {
	set, _ := balancer.NewSet(balancer.SetConfig{})
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{}, "balancerhttp.Config.Set"},
		{Config{Set: set, Scheme: "ftp"}, "balancerhttp.Config.Scheme"},
		{Config{Set: set, OutlierTick: -1}, "balancerhttp.Config.OutlierTick"},
		{Config{Set: set, Picker: &balancer.LeastRequest{Choices: -1}}, "LeastRequest.Choices"},
		{Config{Set: set, Hash: &balancer.HashPolicy{}, Table: &balancer.MaglevConfig{TableSize: 100}}, "MaglevConfig.TableSize"},
	} {
		_, err := New(tc.cfg)
		var ce *balancer.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, balancer.ErrConfig) {
			t.Errorf("New(%+v) = %v, want a ConfigError on %s", tc.cfg, err, tc.field)
		}
	}
	if err := Follow(context.Background(), nil, discovery.Static(), nil, nil, nil); !errors.Is(err, balancer.ErrConfig) {
		t.Errorf("Follow with a nil set: %v", err)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	func() {
		a, b := newBackend(t, "a"), newBackend(t, "b")
		clk := clock.NewReal()
		set, _ := balancer.NewSet(balancer.SetConfig{})
		checker, _ := health.NewChecker(health.CheckFunc(func(context.Context, string) error { return nil }),
			health.ActiveConfig{Interval: 0.01}, health.CheckerOptions{OnChange: HealthCallback(set, clk), Logger: quiet, Clock: clk})
		d, _ := health.NewDetector(health.OutlierConfig{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = Follow(ctx, set, discovery.Static(balancer.Endpoint{Addr: a.addr}, balancer.Endpoint{Addr: b.addr}), checker, d, clk)
		}()
		checker.Start()
		eventually(t, "both healthy", func() bool { return set.Snapshot().Healthy() == 2 })
		tr := &http.Transport{}
		rt, _ := New(Config{Set: set, Transport: tr, Clock: clk, Outlier: d})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					if _, err := tryGet(rt, 200); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		<-done
		checker.Stop()
		rt.CloseIdleConnections()
		a.unblock()
		b.unblock()
		a.srv.Close()
		b.srv.Close()
	}()
	goroutinesBack(t, ignore)
}

func TestMisbehavingInnerAndPicker(t *testing.T) {
	set, _ := balancer.NewSet(balancer.SetConfig{})
	set.Update(0, []balancer.Endpoint{{Addr: "10.0.0.1:80"}})
	ep := endpointOf(t, set, "10.0.0.1:80")
	rt, _ := New(Config{Set: set, Transport: rtFunc(func(*http.Request) (*http.Response, error) { return nil, nil })})
	req, _ := http.NewRequest("GET", "http://svc/", nil)
	if resp, err := rt.RoundTrip(req); err == nil || resp != nil {
		t.Errorf("inner (nil, nil): got (%v, %v), want an error", resp, err)
	}
	if ep.InFlight() != 0 {
		t.Errorf("in flight %d after a failed send", ep.InFlight())
	}
	rt, _ = New(Config{Set: set, Picker: badPicker{}, Transport: rtFunc(func(*http.Request) (*http.Response, error) {
		t.Fatal("sent despite a bad pick")
		return nil, nil
	})})
	if _, err := rt.RoundTrip(req); err == nil {
		t.Error("an out-of-range pick was not an error")
	}
	if _, err := rt.RoundTrip(&http.Request{Method: "GET"}); err == nil {
		t.Error("a request without URL was not an error")
	}
}

type badPicker struct{}

func (badPicker) Pick(*balancer.Snapshot, float64) (int, error) { return 7, nil }
