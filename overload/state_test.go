package overload

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// quiet drops log lines.
var quiet = slog.New(slog.DiscardHandler)

// newGuard returns a Guard of cfg logging into the returned buffer.
func newGuard(t *testing.T, cfg Config) (*Guard, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, &buf
}

// sample is one step: the measures at now and the state expected after.
type sample struct {
	now        float64
	heap       uint64
	goroutines int
	want       State
}

func runSamples(t *testing.T, g *Guard, steps []sample) {
	t.Helper()
	for i, s := range steps {
		if got := g.Sample(s.now, s.heap, s.goroutines); got != s.want {
			t.Fatalf("step %d: Sample(%v, %d, %d) = %v, want %v", i, s.now, s.heap, s.goroutines, got, s.want)
		}
	}
}

func TestSampleHysteresis(t *testing.T) {
	// Heap: soft 1000 (left below 900), hard 2000 (left below 1800).
	g, logs := newGuard(t, Config{HeapSoft: 1000, HeapHard: 2000})
	var hooks []bool
	g.OnKeepAlive(func(on bool) { hooks = append(hooks, on) })
	runSamples(t, g, []sample{
		{1, 999, 0, Normal},
		{2, 1000, 0, KeepAliveOff}, // at the soft threshold
		{3, 950, 0, KeepAliveOff},  // below soft, above 90%
		{4, 900, 0, KeepAliveOff},  // exactly 90%: stays
		{5, 899, 0, Normal},        // below 90%
		{6, 2500, 0, Refuse},       // straight up two states
		{7, 1850, 0, Refuse},       // in the hard band
		{8, 1799, 0, KeepAliveOff}, // below 90% of hard, above soft
		{9, 1999, 0, KeepAliveOff}, // just under hard again: no way back up
		{10, 2000, 0, Refuse},
		{11, 100, 0, Normal}, // straight down two states
	})
	if want := []bool{false, true, false, true}; !equalBools(hooks, want) {
		t.Errorf("hooks got %v, want %v", hooks, want)
	}
	st := g.Stats()
	if st.Transitions != [3]uint64{2, 2, 2} {
		t.Errorf("Transitions = %v, want [2 2 2] (entries into normal, keepalive-off, refuse)", st.Transitions)
	}
	if st.State != Normal || st.Since != 11 || st.Heap != 100 {
		t.Errorf("Stats state %v since %v heap %d, want normal since 11 heap 100", st.State, st.Since, st.Heap)
	}
	if up, down := strings.Count(logs.String(), "overload: state up"), strings.Count(logs.String(), "overload: state down"); up != 3 || down != 3 {
		t.Errorf("logged %d ups and %d downs, want 3 and 3:\n%s", up, down, logs)
	}
}

func TestSampleTwoMeasures(t *testing.T) {
	// Goroutines: soft 100 (left below 90), hard 200 (below 180); heap
	// soft 1000 only. Each measure leaves its own level.
	g, _ := newGuard(t, Config{HeapSoft: 1000, GoroutinesSoft: 100, GoroutinesHard: 200})
	runSamples(t, g, []sample{
		{1, 0, 99, Normal},
		{2, 1000, 99, KeepAliveOff}, // heap
		{3, 1000, 250, Refuse},      // goroutines hard
		{4, 950, 150, KeepAliveOff}, // goroutines below 180 (at soft level); heap in its band
		{5, 0, 95, KeepAliveOff},    // heap normal; goroutines in the soft band
		{6, 0, 89, Normal},
		{7, 5000, 0, KeepAliveOff}, // the heap has no hard threshold
		{8, 1 << 40, 0, KeepAliveOff},
		{9, 899, 0, Normal},
	})
}

func TestSampleOff(t *testing.T) {
	g, logs := newGuard(t, Config{})
	runSamples(t, g, []sample{{1, 1 << 50, 1 << 30, Normal}, {2, 0, 0, Normal}})
	if logs.Len() != 0 {
		t.Errorf("no threshold, yet logged:\n%s", logs)
	}
	if st := g.Stats(); st.Transitions != [3]uint64{} {
		t.Errorf("Transitions = %v, want none", st.Transitions)
	}
}

func TestKeepAliveHookOnlyOnChange(t *testing.T) {
	g, _ := newGuard(t, Config{GoroutinesSoft: 10, GoroutinesHard: 20})
	var calls []bool
	g.OnKeepAlive(func(on bool) { calls = append(calls, on) })
	g.OnKeepAlive(func(on bool) { calls = append(calls, !on) }) // a second hook, after the first
	runSamples(t, g, []sample{
		{1, 0, 10, KeepAliveOff}, // off: false, then the second hook's true
		{2, 0, 20, Refuse},       // keep-alive stays off: no call
		{3, 0, 10, KeepAliveOff}, // still off
		{4, 0, 0, Normal},        // on: true, then false
	})
	if want := []bool{false, true, true, false}; !equalBools(calls, want) {
		t.Errorf("hook calls %v, want %v", calls, want)
	}
	if !g.KeepAlive() {
		t.Error("KeepAlive false in state normal")
	}
}

func TestRefuseStateRefuses(t *testing.T) {
	g, _ := newGuard(t, Config{MaxConns: -1, GoroutinesHard: 10})
	gt := g.Gate("a")
	g.Sample(1, 0, 10)
	if _, r := gt.Admit(1, false); r != ReasonOverload {
		t.Fatalf("in state refuse: Admit reason %v, want overload", r)
	}
	g.Sample(2, 0, 8) // below 9 (90%)
	tk, r := gt.Admit(2, false)
	if r != ReasonNone {
		t.Fatalf("back to normal: Admit reason %v", r)
	}
	tk.Release()
	if st := g.Stats(); st.Refused[ReasonOverload] != 1 || st.Admitted != 1 {
		t.Errorf("Stats refused[overload] %d admitted %d, want 1 and 1", st.Refused[ReasonOverload], st.Admitted)
	}
}

func TestRunSamples(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	// One goroutine at least always runs: soft 1 is crossed at the first
	// sample, which Run takes at once.
	runtime.GC() // so that the live heap has been measured
	clk := &clock.Manual{T: 42}
	g, _ := newGuard(t, Config{GoroutinesSoft: 1, Interval: time.Millisecond, Clock: clk})
	off := make(chan bool, 1)
	g.OnKeepAlive(func(on bool) { off <- !on })
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); g.Run(ctx) }()
	select {
	case v := <-off:
		if !v {
			t.Error("hook said keep-alive on")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run took no sample in 30 s")
	}
	cancel()
	<-ran
	st := g.Stats()
	if st.State != KeepAliveOff || st.Since != 42 || st.Goroutines < 1 || st.Heap == 0 {
		t.Errorf("after Run: state %v since %v goroutines %d heap %d; want keepalive-off since 42, ≥ 1 goroutine, a heap", st.State, st.Since, st.Goroutines, st.Heap)
	}
	leakcheck.Verify(t, 5*time.Second, ignore)
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{HandshakeRate: -1}, "HandshakeRate"},
		{Config{HeapSoft: 10, HeapHard: 9}, "HeapHard"},
		{Config{GoroutinesSoft: -1}, "GoroutinesSoft"},
		{Config{GoroutinesHard: -1}, "GoroutinesHard"},
		{Config{GoroutinesSoft: 10, GoroutinesHard: 9}, "GoroutinesHard"},
		{Config{Interval: -time.Second}, "Interval"},
	} {
		_, err := New(c.cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Config."+c.field+":") {
			t.Errorf("New(%+v) = %v, want ErrConfig naming %s", c.cfg, err, c.field)
		}
	}
}

func TestDefaultMaxConns(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	g, _ := newGuard(t, Config{})
	if got, want := g.MaxConns(), int(rl.Cur/2); got != want {
		t.Errorf("MaxConns() = %d with RLIMIT_NOFILE %d, want %d", got, rl.Cur, want)
	}
	if g, _ := newGuard(t, Config{MaxConns: -1}); g.MaxConns() != 0 {
		t.Errorf("MaxConns -1: MaxConns() = %d, want 0 (none)", g.MaxConns())
	}
}

func TestNames(t *testing.T) {
	want := map[Reason]string{ReasonNone: "", ReasonMaxConns: "max-connections", ReasonListenerMaxConns: "listener-max-connections",
		ReasonPerIP: "per-ip", ReasonHandshakeRate: "handshake-rate", ReasonOverload: "overload", Reason(9): "Reason(9)"}
	for r, s := range want {
		if r.String() != s {
			t.Errorf("Reason %d: %q, want %q", r, r.String(), s)
		}
	}
	for s, name := range map[State]string{Normal: "normal", KeepAliveOff: "keepalive-off", Refuse: "refuse", State(7): "State(7)"} {
		if s.String() != name {
			t.Errorf("State %d: %q, want %q", s, s.String(), name)
		}
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
