package discovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"go.uber.org/goleak"
)

// guard bounds how long a test waits for something that should happen at
// once; it only fires when the code under test hangs.
const guard = 10 * time.Second

// stepper replaces a source's sleep: each call hands the delay asked for to
// the test and blocks until the test releases it (or ctx ends).
type stepper struct {
	waits   chan time.Duration
	release chan struct{}
}

func newStepper() *stepper {
	return &stepper{waits: make(chan time.Duration), release: make(chan struct{})}
}

func (s *stepper) sleep(ctx context.Context, d time.Duration) error {
	select {
	case s.waits <- d:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next waits until the source has finished a round and asks to sleep, and
// returns the delay it asked for.
func (s *stepper) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-s.waits:
		return d
	case <-time.After(guard):
		t.Fatal("the source did not finish its round")
		return 0
	}
}

// step lets the source start its next round.
func (s *stepper) step() { s.release <- struct{}{} }

// recorder collects the lists and errors a source reports.
type recorder struct {
	mu    sync.Mutex
	lists [][]balancer.Endpoint
	errs  []error
}

func (r *recorder) update(l []balancer.Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists = append(r.lists, l)
}

func (r *recorder) onError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// take returns and forgets what was recorded so far.
func (r *recorder) take() ([][]balancer.Endpoint, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, e := r.lists, r.errs
	r.lists, r.errs = nil, nil
	return l, e
}

// run starts src.Run and returns a function that cancels it and returns
// Run's error; the test fails if Run does not return.
func run(t *testing.T, src Source, update func([]balancer.Endpoint)) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, update) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(guard):
				t.Fatal("Run did not return after its context was cancelled")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func ep(addr string, weight int) balancer.Endpoint {
	return balancer.Endpoint{Addr: addr, Weight: weight}
}

func TestStaticSendsSortedOnceAndWaits(t *testing.T) {
	meta := map[string]string{"zone": "a"}
	in := []balancer.Endpoint{ep("10.0.0.3:80", 2), {Addr: "10.0.0.1:80", Meta: meta}, ep("10.0.0.2:80", 1)}
	src := Static(in...)
	in[0].Addr = "changed-after-Static" // Static copied the slice
	got := make(chan []balancer.Endpoint, 4)
	stop := run(t, src, func(l []balancer.Endpoint) { got <- l })
	want := []balancer.Endpoint{{Addr: "10.0.0.1:80", Meta: meta}, ep("10.0.0.2:80", 1), ep("10.0.0.3:80", 2)}
	select {
	case l := <-got:
		if !reflect.DeepEqual(l, want) {
			t.Fatalf("sent %v, want %v", l, want)
		}
	case <-time.After(guard):
		t.Fatal("nothing sent")
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want context.Canceled", err)
	}
	if len(got) != 0 {
		t.Fatalf("sent %d more lists, want exactly one", len(got))
	}
}

func TestStaticEmptyIsSentAsEmpty(t *testing.T) {
	got := make(chan []balancer.Endpoint, 1)
	run(t, Static(), func(l []balancer.Endpoint) { got <- l })
	select {
	case l := <-got:
		if l == nil || len(l) != 0 {
			t.Fatalf("sent %#v, want an empty non-nil list", l)
		}
	case <-time.After(guard):
		t.Fatal("nothing sent")
	}
}

func TestStaticConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		eps   []balancer.Endpoint
		field string
	}{
		{[]balancer.Endpoint{ep("a:1", 1), ep("", 1)}, "Static[1].Addr"},
		{[]balancer.Endpoint{ep("a:1", -1)}, "Static[0].Weight"},
		{[]balancer.Endpoint{ep("a:1", MaxWeight+1)}, "Static[0].Weight"},
		{[]balancer.Endpoint{ep("a:1", 1), ep("b:1", 1), ep("a:1", 2)}, "Static[2].Addr"},
	} {
		sent := false
		err := Static(tc.eps...).Run(context.Background(), func([]balancer.Endpoint) { sent = true })
		var ce *ConfigError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%v: Run = %v, want a *ConfigError for %s", tc.eps, err, tc.field)
		}
		if sent {
			t.Errorf("%v: sent a list despite the error", tc.eps)
		}
	}
	if err := Static().Run(context.Background(), nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil update: Run = %v, want ErrConfig", err)
	}
}

func TestStaticCancelledBeforeRunSendsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sent := false
	if err := Static(ep("a:1", 1)).Run(ctx, func([]balancer.Endpoint) { sent = true }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if sent {
		t.Fatal("sent a list after the context ended")
	}
}

func TestEmitterSortsAndSkipsRepeats(t *testing.T) {
	var r recorder
	em := emitter{update: r.update}
	steps := []struct {
		in   []balancer.Endpoint
		sent bool
	}{
		{[]balancer.Endpoint{ep("b:1", 1), ep("a:1", 1)}, true},
		{[]balancer.Endpoint{ep("a:1", 1), ep("b:1", 1)}, false},                                               // same set, other order
		{[]balancer.Endpoint{ep("a:1", 1), ep("b:1", 2)}, true},                                                // weight changed
		{[]balancer.Endpoint{ep("a:1", 1), {Addr: "b:1", Weight: 2, Meta: map[string]string{"z": "1"}}}, true}, // meta changed
		{[]balancer.Endpoint{ep("a:1", 1), {Addr: "b:1", Weight: 2, Meta: map[string]string{"z": "1"}}}, false},
		{nil, true},
		{[]balancer.Endpoint{}, false},
	}
	for i, s := range steps {
		if got := em.send(s.in); got != s.sent {
			t.Fatalf("step %d: send = %v, want %v", i, got, s.sent)
		}
	}
	lists, _ := r.take()
	if len(lists) != 4 {
		t.Fatalf("%d lists sent, want 4", len(lists))
	}
	if want := []balancer.Endpoint{ep("a:1", 1), ep("b:1", 1)}; !reflect.DeepEqual(lists[0], want) {
		t.Fatalf("first list %v, want %v", lists[0], want)
	}
	if lists[3] == nil || len(lists[3]) != 0 {
		t.Fatalf("last list %#v, want empty non-nil", lists[3])
	}
	// The consumer owns what it was given: changing it does not fool the
	// emitter into skipping a real change.
	lists[2][0].Addr = "scribbled"
	if !em.send([]balancer.Endpoint{ep("a:1", 1)}) {
		t.Fatal("a changed list was not sent")
	}
}

// TestNoGoroutineLeaks runs every source with real timers and checks that
// cancelling them leaves no goroutine behind.
func TestNoGoroutineLeaks(t *testing.T) {
	srv := startDNSServer(t, testZone())
	path := filepath.Join(t.TempDir(), "eps.yaml")
	if err := os.WriteFile(path, []byte("- addr: 10.0.0.1:80\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ignore := goleak.IgnoreCurrent()
	sources := []Source{
		Static(ep("a:1", 1)),
		&DNS{Name: "svc.test", Port: 80, Resolver: &Client{Servers: []string{srv.addr}}, MinTTL: time.Millisecond, MaxTTL: time.Millisecond},
		&DNS{Name: "_http._tcp.svc.test", SRV: true, Resolver: &Client{Servers: []string{srv.addr}}, MinTTL: time.Millisecond, MaxTTL: time.Millisecond},
		&File{Path: path, Poll: time.Millisecond},
	}
	for _, src := range sources {
		got := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- src.Run(ctx, func([]balancer.Endpoint) {
				select {
				case got <- struct{}{}:
				default:
				}
			})
		}()
		select {
		case <-got:
		case <-time.After(guard):
			t.Fatalf("%T sent nothing", src)
		}
		time.Sleep(5 * time.Millisecond) // let it go round a few refreshes
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%T: Run = %v, want context.Canceled", src, err)
			}
		case <-time.After(guard):
			t.Fatalf("%T: Run did not return after cancel", src)
		}
	}
	leakcheck.Verify(t, guard, ignore)
}
