package balancergrpc

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	gbal "google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"go.uber.org/goleak"
)

// wait is the generous bound for anything polled: far above what a busy
// 2-core machine needs, reached only when a test is failing.
const wait = 10 * time.Second

// fakeSC is a SubConn for picker tests; only its identity matters.
type fakeSC struct {
	gbal.SubConn
	name string
}

func build(pb *pickerBuilder, scs ...*fakeSC) gbal.Picker {
	ready := map[gbal.SubConn]base.SubConnInfo{}
	for _, sc := range scs {
		ready[sc] = base.SubConnInfo{Address: resolver.Address{Addr: sc.name}}
	}
	return pb.Build(base.PickerBuildInfo{ReadySCs: ready})
}

func TestRegistered(t *testing.T) {
	if b := gbal.Get(Name); b == nil || b.Name() != "spillway_least_request" {
		t.Fatalf("gbal.Get(%q) = %v", Name, b)
	}
}

func TestPickerPrefersFewerInFlight(t *testing.T) {
	a, b := &fakeSC{name: "a:1"}, &fakeSC{name: "b:1"}
	pb := &pickerBuilder{choices: 2}
	p := build(pb, a, b)
	held, err := p.Pick(gbal.PickInfo{})
	if err != nil {
		t.Fatal(err)
	}
	other := gbal.SubConn(a)
	if held.SubConn == a {
		other = b
	}
	// With two connections P2C compares both every time: while one RPC is
	// held on one, every other pick goes to the other.
	for i := range 100 {
		r, err := p.Pick(gbal.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if r.SubConn != other {
			t.Fatalf("pick %d went to the busy connection", i)
		}
		r.Done(gbal.DoneInfo{})
	}
	// A rebuild (a third connection became ready) keeps the counts of the
	// connections that stayed ready.
	c := &fakeSC{name: "c:1"}
	p = build(pb, a, b, c)
	heldC := 0
	for range 300 {
		r, _ := p.Pick(gbal.PickInfo{})
		if r.SubConn == held.SubConn {
			heldC++
		}
		r.Done(gbal.DoneInfo{})
	}
	// P2C compares two distinct connections and the other one always has
	// fewer in flight (0 < 1): the busy one is never picked.
	if heldC != 0 {
		t.Errorf("busy connection got %d of 300 picks after a rebuild, want 0", heldC)
	}
	held.Done(gbal.DoneInfo{})
	for _, sc := range []*fakeSC{a, b, c} {
		if n := pb.subs[sc].n.Load(); n != 0 {
			t.Errorf("%s: %d in flight after every Done, want 0", sc.name, n)
		}
	}
	// Once free it gets its share again.
	heldC = 0
	for range 300 {
		r, _ := p.Pick(gbal.PickInfo{})
		if r.SubConn == held.SubConn {
			heldC++
		}
		r.Done(gbal.DoneInfo{})
	}
	if heldC < 50 {
		t.Errorf("freed connection got %d of 300 picks, want about 100", heldC)
	}
}

func TestNoReadySubConns(t *testing.T) {
	p := build(&pickerBuilder{choices: 2})
	if _, err := p.Pick(gbal.PickInfo{}); !errors.Is(err, gbal.ErrNoSubConnAvailable) {
		t.Fatalf("Pick with nothing ready: %v, want ErrNoSubConnAvailable", err)
	}
}

func TestChoiceCount(t *testing.T) {
	scs := make([]*fakeSC, 8)
	for i := range scs {
		scs[i] = &fakeSC{name: "s" + strconv.Itoa(i)}
	}
	// d = 64 draws with replacement over 8 idle connections: a pick lands
	// on a busy one only if all 64 draws do.
	p := build(&pickerBuilder{choices: 64}, scs...)
	busy := make([]gbal.PickResult, 0, 7)
	seen := map[gbal.SubConn]bool{}
	for range 7 {
		r, _ := p.Pick(gbal.PickInfo{})
		if seen[r.SubConn] {
			t.Fatalf("d = 64 picked busy %v again", r.SubConn)
		}
		seen[r.SubConn] = true
		busy = append(busy, r)
	}
	for _, r := range busy {
		r.Done(gbal.DoneInfo{})
	}
}

func TestParseConfig(t *testing.T) {
	bld := gbal.Get(Name).(gbal.ConfigParser)
	for _, tc := range []struct {
		js   string
		want int
	}{{`{}`, 2}, {``, 2}, {`{"choiceCount":3}`, 3}, {`{"choiceCount":1,"other":true}`, 1}} {
		c, err := bld.ParseConfig([]byte(tc.js))
		if err != nil {
			t.Errorf("ParseConfig(%s): %v", tc.js, err)
			continue
		}
		if got := c.(*LBConfig).ChoiceCount; got != tc.want {
			t.Errorf("ParseConfig(%s).ChoiceCount = %d, want %d", tc.js, got, tc.want)
		}
	}
	for _, js := range []string{`{"choiceCount":-1}`, `{"choiceCount":65}`, `{"choiceCount":"x"}`, `[`} {
		if _, err := bld.ParseConfig([]byte(js)); err == nil {
			t.Errorf("ParseConfig(%s) accepted", js)
		}
	}
	if _, err := bld.ParseConfig([]byte(`{"choiceCount":65}`)); !errors.Is(err, balancer.ErrConfig) {
		t.Errorf("out of range: %v, want a balancer.ConfigError", err)
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	scs := make([]*fakeSC, 10)
	for i := range scs {
		scs[i] = &fakeSC{name: "s" + strconv.Itoa(i)}
	}
	p := build(&pickerBuilder{choices: 2}, scs...)
	allocs := testing.AllocsPerRun(1000, func() {
		r, _ := p.Pick(gbal.PickInfo{})
		r.Done(gbal.DoneInfo{})
	})
	if allocs != 0 {
		t.Errorf("Pick and Done allocate %v times, want 0", allocs)
	}
}

// counting is a health service that counts its Check calls.
type counting struct {
	grpc_health_v1.UnimplementedHealthServer
	calls atomic.Int64
}

func (s *counting) Check(context.Context, *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	s.calls.Add(1)
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

type server struct {
	svc  *counting
	addr string
	stop func()
}

func serve(t *testing.T) *server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{svc: &counting{}, addr: lis.Addr().String()}
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, s.svc)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	var once sync.Once
	s.stop = func() { once.Do(func() { srv.Stop(); <-done }) }
	t.Cleanup(s.stop)
	return s
}

// dial connects to the servers through a manual resolver with the policy
// selected by the service config.
func dial(t *testing.T, cfg string, ss ...*server) *grpc.ClientConn {
	t.Helper()
	r := manual.NewBuilderWithScheme("spillway-test")
	addrs := make([]resolver.Address, len(ss))
	for i, s := range ss {
		addrs[i] = resolver.Address{Addr: s.addr}
	}
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpc.NewClient(r.Scheme()+":///svc",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func check(ctx context.Context, c grpc_health_v1.HealthClient) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	return err
}

func TestLoopback(t *testing.T) {
	for _, cfg := range []string{
		`{"loadBalancingConfig":[{"spillway_least_request":{}}]}`,
		`{"loadBalancingConfig":[{"spillway_least_request":{"choiceCount":3}}]}`,
	} {
		t.Run(cfg, func(t *testing.T) {
			ss := []*server{serve(t), serve(t), serve(t)}
			conn := dial(t, cfg, ss...)
			hc := grpc_health_v1.NewHealthClient(conn)
			ctx := context.Background()
			// The first call waits for a ready connection; the others may
			// still be connecting: wait until all three have served one.
			deadline := time.Now().Add(wait)
			for ss[0].svc.calls.Load() == 0 || ss[1].svc.calls.Load() == 0 || ss[2].svc.calls.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("calls %d %d %d: not all servers reached", ss[0].svc.calls.Load(), ss[1].svc.calls.Load(), ss[2].svc.calls.Load())
				}
				if err := check(ctx, hc); err != nil {
					t.Fatal(err)
				}
			}
			before := []int64{ss[0].svc.calls.Load(), ss[1].svc.calls.Load(), ss[2].svc.calls.Load()}
			for range 90 {
				if err := check(ctx, hc); err != nil {
					t.Fatal(err)
				}
			}
			for i, s := range ss {
				if s.svc.calls.Load() == before[i] {
					t.Errorf("server %d got none of 90 calls", i)
				}
			}

			// Stop one: once its connection has left READY, calls go to
			// the other two, all succeeding.
			ss[1].stop()
			deadline = time.Now().Add(wait)
			for ok := 0; ok < 20; {
				if time.Now().After(deadline) {
					t.Fatal("calls kept failing after a server stopped")
				}
				if check(ctx, hc) == nil {
					ok++
				} else {
					ok = 0
				}
			}
			a0, c0 := ss[0].svc.calls.Load(), ss[2].svc.calls.Load()
			for range 60 {
				if err := check(ctx, hc); err != nil {
					t.Fatalf("call failed with one server stopped: %v", err)
				}
			}
			if ss[0].svc.calls.Load() == a0 || ss[2].svc.calls.Load() == c0 {
				t.Errorf("remaining servers got %d and %d of 60 calls, want some each",
					ss[0].svc.calls.Load()-a0, ss[2].svc.calls.Load()-c0)
			}
		})
	}
}

func TestLoopbackNoGoroutineLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	func() {
		ss := []*server{serve(t), serve(t)}
		r := manual.NewBuilderWithScheme("spillway-leak")
		r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: ss[0].addr}, {Addr: ss[1].addr}}})
		conn, err := grpc.NewClient(r.Scheme()+":///svc", grpc.WithResolvers(r),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"spillway_least_request":{}}]}`))
		if err != nil {
			t.Fatal(err)
		}
		hc := grpc_health_v1.NewHealthClient(conn)
		for range 20 {
			if err := check(context.Background(), hc); err != nil {
				t.Fatal(err)
			}
		}
		_ = conn.Close()
		for _, s := range ss {
			s.stop()
		}
	}()
	leakcheck.Verify(t, wait, ignore)
}
