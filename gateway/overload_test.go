package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	service "github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/deadline"
)

// The overload test's numbers. The backend's hidden capacity is
// ovWorkers / ovService = 160 requests a second; the load is twice that,
// 30% of it critical, for ovWarm + ovMeasure.
const (
	ovWorkers   = 8
	ovService   = 50 * time.Millisecond
	ovLoad      = 2.0
	ovCritical  = 0.3
	ovDeadline  = time.Second
	ovWarm      = 2 * time.Second
	ovMeasure   = 7 * time.Second
	ovClientTTL = 2 * time.Second // client timeout: past the deadline, so the gateway answers first
)

// ovCapacity is the backend's capacity in requests a second.
const ovCapacity = float64(ovWorkers) / (float64(ovService) / float64(time.Second))

// TestOverloadTwiceCapacity: a backend of hidden capacity behind the
// gateway with adaptive admission (gradient2, the default algorithm),
// classes by route (30% critical) and a 1 s deadline, offered twice its
// capacity open loop. After a warm-up, goodput (200s within the deadline)
// stays at ≥ 80% of capacity, ≥ 95% of critical requests are served,
// sheddable requests are refused with admit:* reason codes, and the
// backend never receives a request whose budget was spent: every request
// arrives with a forwarded Spillway-Timeout in (0, 1 s], and none is
// finished past its budget (backend Stats.Late).
func TestOverloadTwiceCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("an overload run of about 10 s")
	}
	noLeaks(t)
	be, arr := stampedBackend(t, service.Config{Workers: ovWorkers, Queue: 64,
		Service: service.Dist{Kind: service.Constant, Mean: ovService}, CountHeader: "Spillway-Criticality"})
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {match: {prefix: /critical}, cluster: app, policies: {class: critical, deadline: {default: 1s}}}
  - {match: {prefix: /sheddable}, cluster: app, policies: {class: sheddable, deadline: {default: 1s}}}
clusters:
  - name: app
    endpoints: ["`+be.addr+`"]
    admission:
      algorithm: gradient2
      initial_limit: 20
      min_limit: 4
      max_limit: 200
      shares: {critical: 1, default: 0.9, sheddable: 0.5}
      queue: {discipline: fifo, max_wait: 100ms}
`)
	rec := &recorder{t0: time.Now()}
	base := "http://" + g.Addr("web")
	crit := startLoad(base+"/critical/x", ovLoad*ovCapacity*ovCritical, nil, rec.client(t, 0))
	shed := startLoad(base+"/sheddable/x", ovLoad*ovCapacity*(1-ovCritical), nil, rec.client(t, 1))
	time.Sleep(ovWarm + ovMeasure)
	crit.Stop()
	shed.Stop()

	f := rec.figures(ovWarm, ovWarm+ovMeasure)
	st := be.b.Stats()
	t.Logf("goodput %.1f%% of capacity (%.1f/s of %.0f/s), critical ok %.2f%% (%d of %d), sheddable ok %.1f%% (%d of %d)",
		100*f.goodput/ovCapacity, f.goodput, ovCapacity, 100*f.ratio(0), f.ok[0], f.total[0], 100*f.ratio(1), f.ok[1], f.total[1])
	t.Logf("answers not 200 by class and reason: critical %v, sheddable %v; transport errors %v", f.reasons[0], f.reasons[1], f.errs)
	t.Logf("backend: arrived %d, served %d, late %d, rejected %d, max in flight %d, by class %v; arrival budgets: none %d, spent %d, over 1s %d; oldest arrival %v after the client sent it",
		st.Arrived, st.Served, st.Late, st.Rejected, st.MaxInFlight, st.ByHeader, arr.none.Load(), arr.spent.Load(), arr.over.Load(), time.Duration(arr.maxAge.Load()))
	t.Logf("load: critical sent %d skipped %d, sheddable sent %d skipped %d", crit.sent.Load(), crit.skipped.Load(), shed.sent.Load(), shed.skipped.Load())

	if f.goodput < 0.8*ovCapacity {
		t.Errorf("goodput %.1f/s, want at least 80%% of the capacity %.0f/s", f.goodput, ovCapacity)
	}
	if r := f.ratio(0); r < 0.95 {
		t.Errorf("critical served %.3f, want at least 0.95", r)
	}
	admitted := 0
	for reason, n := range f.reasons[1] {
		if !strings.HasPrefix(reason, "503 admit:") {
			t.Errorf("sheddable: %d answers %q, want only 503 admit:* refusals", n, reason)
		}
		admitted += n
	}
	if min := int(0.25 * float64(f.total[1])); admitted < min {
		t.Errorf("sheddable refused %d of %d, want at least %d at twice the capacity", admitted, f.total[1], min)
	}
	if n := arr.none.Load() + arr.spent.Load() + arr.over.Load(); n != 0 || arr.n.Load() != st.Arrived {
		t.Errorf("backend: %d of %d requests arrived without a budget in (0, 1s] (%d seen)", n, st.Arrived, arr.n.Load())
	}
	if st.Late != 0 {
		t.Errorf("backend finished %d requests past their budget, want 0", st.Late)
	}
}

// stampedSrv is a backend.Backend on a loopback port, and what its
// requests carried on arrival.
type stampedSrv struct {
	b    *service.Backend
	addr string
}

// arrivalChecks counts, at each request's arrival at the backend, the
// budget the gateway forwarded: none, spent (≤ 0) or over the route's
// deadline; and the request's age since the client sent it (X-Sent-At).
type arrivalChecks struct {
	n, none, spent, over atomic.Int64
	maxAge               atomic.Int64 // nanoseconds
}

func (a *arrivalChecks) check(r *http.Request, now time.Time) {
	a.n.Add(1)
	switch v := r.Header.Get("Spillway-Timeout"); {
	case v == "":
		a.none.Add(1)
	default:
		d, err := deadline.ParseTimeout(v)
		switch {
		case err != nil || d <= 0:
			a.spent.Add(1)
		case d > ovDeadline:
			a.over.Add(1)
		}
	}
	if sent, err := strconv.ParseInt(r.Header.Get("X-Sent-At"), 10, 64); err == nil {
		age := now.UnixNano() - sent
		for old := a.maxAge.Load(); age > old && !a.maxAge.CompareAndSwap(old, age); old = a.maxAge.Load() {
		}
	}
}

// stampedBackend starts a backend.Backend from cfg on a loopback port
// whose requests are checked on arrival (health checks aside).
func stampedBackend(t *testing.T, cfg service.Config) (*stampedSrv, *arrivalChecks) {
	t.Helper()
	b, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	arr := new(arrivalChecks)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			arr.check(r, time.Now())
		}
		b.ServeHTTP(w, r)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { b.Close(); _ = srv.Close(); <-done })
	return &stampedSrv{b: b, addr: ln.Addr().String()}, arr
}

// result is one request as the client saw it.
type result struct {
	class      int           // 0 critical, 1 sheddable
	start, end time.Duration // since the recorder's t0
	status     int           // 0: a transport error
	reason     string        // Spillway-Reason
}

// recorder is a RoundTripper wrapper that stamps X-Sent-At on each
// request and records each answer, for figures per class and window.
type recorder struct {
	t0  time.Time
	mu  sync.Mutex
	res []result
}

type recordingRT struct {
	rec   *recorder
	class int
	base  http.RoundTripper
}

func (rt recordingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r := rt.rec
	began := time.Now()
	req = req.Clone(req.Context())
	req.Header.Set("X-Sent-At", strconv.FormatInt(began.UnixNano(), 10))
	resp, err := rt.base.RoundTrip(req)
	res := result{class: rt.class, start: began.Sub(r.t0), end: time.Since(r.t0)}
	if err == nil {
		res.status, res.reason = resp.StatusCode, resp.Header.Get("Spillway-Reason")
	}
	r.mu.Lock()
	r.res = append(r.res, res)
	r.mu.Unlock()
	return resp, err
}

// client is an HTTP/1.1 keep-alive client recording as class.
func (r *recorder) client(t *testing.T, class int) *http.Client {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	tr := &http.Transport{Protocols: p, MaxIdleConnsPerHost: maxInFlight}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: recordingRT{rec: r, class: class, base: tr}, Timeout: ovClientTTL}
}

// figures are the recorder's counts over a window.
type figures struct {
	goodput   float64 // 200s within the deadline ended in the window, per second
	ok, total [2]int  // by class, of the requests started in the window
	reasons   [2]map[string]int
	errs      int
}

func (f *figures) ratio(class int) float64 {
	if f.total[class] == 0 {
		return 0
	}
	return float64(f.ok[class]) / float64(f.total[class])
}

// figures counts the answers of the window [from, to) after t0.
func (r *recorder) figures(from, to time.Duration) figures {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := figures{reasons: [2]map[string]int{{}, {}}}
	good := 0
	for _, x := range r.res {
		fine := x.status == http.StatusOK && x.end-x.start <= ovDeadline
		if fine && x.end >= from && x.end < to {
			good++
		}
		if x.start < from || x.start >= to {
			continue
		}
		f.total[x.class]++
		switch {
		case fine:
			f.ok[x.class]++
		case x.status == 0:
			f.errs++
		default:
			f.reasons[x.class][fmt.Sprintf("%d %s", x.status, x.reason)]++
		}
	}
	f.goodput = float64(good) / (to - from).Seconds()
	return f
}

// holdDesc is a unary service registered by hand (its server always has
// an interceptor): test.Hold/Wait tells arrived, then answers its request
// back once release is closed (or the call ends).
var holdDesc = grpc.ServiceDesc{
	ServiceName: "test.Hold",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Wait",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			h := srv.(*holder)
			wait := func(ctx context.Context, req any) (any, error) {
				h.arrived <- struct{}{}
				select {
				case <-h.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return req, nil
			}
			return icpt(ctx, &in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Hold/Wait"}, wait)
		},
	}},
}

// holder is test.Hold's state, and the calls that reached the server by
// method.
type holder struct {
	arrived chan struct{}
	release chan struct{}
	mu      sync.Mutex
	calls   map[string]int
}

func (h *holder) count(method string) int { h.mu.Lock(); defer h.mu.Unlock(); return h.calls[method] }

// countingGRPCBackend starts a grpc-go server with the health service
// (service "" SERVING) and test.Hold, counting every call that reaches it.
func countingGRPCBackend(t *testing.T) (string, *holder) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{arrived: make(chan struct{}, 4), release: make(chan struct{}), calls: map[string]int{}}
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		h.mu.Lock()
		h.calls[info.FullMethod]++
		h.mu.Unlock()
		return next(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, grpchealth.NewServer())
	gs.RegisterService(&holdDesc, h)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return ln.Addr().String(), h
}

// grpcDial connects a grpc-go client to addr (h2c prior knowledge).
func grpcDial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// pushback checks a gRPC refusal: code want, the reason code, and a
// positive grpc-retry-pushback-ms (or none, when !withPushback).
func pushback(t *testing.T, what string, err error, tr metadata.MD, want codes.Code, reason string, withPushback bool) {
	t.Helper()
	if status.Code(err) != want {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
	if got := tr.Get("spillway-reason"); len(got) != 1 || got[0] != reason {
		t.Fatalf("%s: spillway-reason %q, want %q (trailer %v)", what, got, reason, tr)
	}
	p := tr.Get("grpc-retry-pushback-ms")
	if !withPushback {
		if len(p) != 0 {
			t.Fatalf("%s: grpc-retry-pushback-ms %q, want none", what, p)
		}
		return
	}
	if len(p) != 1 {
		t.Fatalf("%s: grpc-retry-pushback-ms %q, want one value (trailer %v)", what, p, tr)
	}
	if ms, err := strconv.ParseInt(p[0], 10, 64); err != nil || ms <= 0 {
		t.Fatalf("%s: grpc-retry-pushback-ms %q, want a positive number of milliseconds", what, p[0])
	}
}

const healthCheck = "/grpc.health.v1.Health/Check"

// TestGRPCRouteRefused: on grpc routes the chain's refusals reach a real
// grpc-go client as gRPC statuses, trailers-only, and the backend never
// sees the refused calls: a spent budget from a trusted peer
// (Spillway-Timeout metadata, or a raw grpc-timeout of 0) is
// DEADLINE_EXCEEDED without pushback and costs no rate-limit token; the
// same from an untrusted peer is ignored; past a rule's burst the call is
// RESOURCE_EXHAUSTED, and past a cluster's admission limit UNAVAILABLE,
// both with grpc-retry-pushback-ms.
func TestGRPCRouteRefused(t *testing.T) {
	noLeaks(t)
	be, h := countingGRPCBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: edge, address: "127.0.0.1:0"}
  - {name: inner, address: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]}
routes:
  - name: limited
    match: {prefix: /grpc.health.v1.Health/}
    cluster: grpc
    grpc: true
    policies:
      ratelimit: {rules: [{id: per-ip, key: [ip], rate: 1, per: 1m, burst: 1}]}
  - {name: held, match: {prefix: /test.Hold/}, cluster: held, grpc: true, policies: {class: critical}}
clusters:
  - {name: grpc, protocol: h2c, endpoints: ["`+be+`"]}
  - name: held
    protocol: h2c
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 1}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	edge, inner := grpcDial(t, g.Addr("edge")), grpcDial(t, g.Addr("inner"))
	spent := metadata.AppendToOutgoingContext(ctx, "spillway-timeout", "0n")
	var tr metadata.MD
	_, err := healthpb.NewHealthClient(inner).Check(spent, &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
	pushback(t, "spent budget from a trusted peer", err, tr, codes.DeadlineExceeded, "deadline", false)
	rawGRPCTimeout(t, g.Addr("inner"), "0n")

	resp, err := healthpb.NewHealthClient(edge).Check(spent, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("untrusted spent budget, within the burst: %v %v, want SERVING", resp, err)
	}
	tr = nil
	_, err = healthpb.NewHealthClient(edge).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
	pushback(t, "past the burst", err, tr, codes.ResourceExhausted, "ratelimit:per-ip", true)
	if n := h.count(healthCheck); n != 1 {
		t.Fatalf("the backend saw %d health checks, want the 1 admitted", n)
	}

	held := make(chan error, 1)
	go func() {
		in, out := []byte("first"), []byte(nil)
		held <- edge.Invoke(ctx, "/test.Hold/Wait", &in, &out, grpc.CallContentSubtype("raw"))
	}()
	select {
	case <-h.arrived:
	case <-ctx.Done():
		t.Fatal("the first held call never reached the backend")
	}
	tr = nil
	in, out := []byte("second"), []byte(nil)
	err = edge.Invoke(ctx, "/test.Hold/Wait", &in, &out, grpc.CallContentSubtype("raw"), grpc.Trailer(&tr))
	pushback(t, "past the admission limit", err, tr, codes.Unavailable, "admit:limit", true)
	close(h.release)
	if err := <-held; err != nil {
		t.Fatalf("held call: %v", err)
	}
	if n := h.count("/test.Hold/Wait"); n != 1 {
		t.Fatalf("the backend saw %d held calls, want the 1 admitted", n)
	}
}

// rawGRPCTimeout sends a gRPC health check with grpc-timeout v over raw
// h2c (grpc-go never sends a spent timeout: it fails the call itself) and
// expects a trailers-only DEADLINE_EXCEEDED.
func rawGRPCTimeout(t *testing.T, addr, v string) {
	t.Helper()
	c := &http.Client{Transport: h2cTransport(t, func() string { return addr }), Timeout: 10 * time.Second}
	req, err := http.NewRequest("POST", "http://"+addr+healthCheck, strings.NewReader("\x00\x00\x00\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}, "Grpc-Timeout": {v}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != strconv.Itoa(int(codes.DeadlineExceeded)) ||
		resp.Header.Get("Spillway-Reason") != "deadline" || len(body) != 0 {
		t.Fatalf("grpc-timeout %s from a trusted peer: %d %v %q, want a trailers-only DEADLINE_EXCEEDED", v, resp.StatusCode, resp.Header, body)
	}
}

// TestSpoofedCriticality: under admission pressure (one sheddable request
// holding sheddable's whole share), Spillway-Criticality: critical from an
// untrusted peer changes nothing — refused as the route's sheddable, never
// reaching the backend — while from a trusted peer it sets the class: the
// request passes and the backend sees critical. The trusted peer without
// the header is the route's sheddable again.
func TestSpoofedCriticality(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	var seen seenList
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {
		seen.add(r.URL.Path + "=" + r.Header.Get("Spillway-Criticality"))
		if r.URL.Path == "/hold" {
			<-release
		}
	})
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: edge, address: "127.0.0.1:0"}
  - {name: inner, address: "127.0.0.1:0", trusted_proxies: ["127.0.0.1/32"]}
routes: [{cluster: app, policies: {class: sheddable}}]
clusters:
  - name: app
    endpoints: ["`+be+`"]
    admission: {algorithm: fixed, initial_limit: 2, shares: {critical: 1, default: 1, sheddable: 0.5}}
`)
	c := h1Client(t)
	done := make(chan int, 1)
	go func() {
		code, _, _ := fetch(t, c, "GET", "http://"+g.Addr("edge")+"/hold", nil)
		done <- code
	}()
	eventually(t, 5*time.Second, "the held request reaches the backend", func() bool { return seen.has("/hold=sheddable") })
	crit := http.Header{"Spillway-Criticality": {"critical"}}
	if code, h, _ := fetch(t, c, "GET", "http://"+g.Addr("edge")+"/spoofed", crit); code != 503 || h.Get("Spillway-Reason") != "admit:limit" {
		t.Errorf("untrusted peer claiming critical: %d %v, want 503 admit:limit", code, h)
	}
	if code, h, _ := fetch(t, c, "GET", "http://"+g.Addr("inner")+"/plain", nil); code != 503 || h.Get("Spillway-Reason") != "admit:limit" {
		t.Errorf("trusted peer without a class: %d %v, want 503 admit:limit", code, h)
	}
	if code, _, _ := fetch(t, c, "GET", "http://"+g.Addr("inner")+"/trusted", crit); code != 200 {
		t.Errorf("trusted peer claiming critical: %d, want 200", code)
	}
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("held request: %d", code)
	}
	if l := seen.list(); !slices.Equal(l, []string{"/hold=sheddable", "/trusted=critical"}) {
		t.Fatalf("backend saw %q, want the held sheddable request and the trusted critical one only", l)
	}
}
