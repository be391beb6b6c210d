package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/internal/leakcheck"
	"github.com/spillwayhq/spillway/internal/maintest"
	"github.com/spillwayhq/spillway/internal/syncbuf"
)

var backendAddrRE = regexp.MustCompile(`spillway backend: serving http://(127\.0\.0\.1:\d+); `)

// The flags land in backend.Config as written: the defaults, and every
// flag set at once (durations, distributions, repeated and comma-listed
// values).
func TestBackendFlags(t *testing.T) {
	cases := []struct {
		args []string
		want backendOpts
	}{
		{nil, backendOpts{addr: "127.0.0.1:9001", cfg: backend.Config{Workers: 10, Queue: 1000,
			Service: backend.Dist{Kind: backend.Constant, Mean: 100 * time.Millisecond}, Costs: map[string]float64{},
			ErrorStatus: 503, SlowDown: 1, HealthPath: "/healthz", Seed: 1}}},
		{[]string{"--addr", "127.0.0.1:0", "--workers", "4", "--queue", "8", "--service", "lognormal:20ms:0.8",
			"--cost", "/a=2", "--cost", "/b=0.5", "--error-rate", "0.1", "--error-status", "500", "--hang-rate", "0.05",
			"--slow-down", "2.5", "--schedule", "1s-2s:1,3s-4s:0", "--schedule", "1m-90s:8", "--honor-cancel",
			"--health-path", "/h", "--name", "b1", "--count-header", "X-C", "--seed", "7", "--report", "2s"},
			backendOpts{addr: "127.0.0.1:0", report: 2 * time.Second, cfg: backend.Config{Name: "b1", Workers: 4, Queue: 8,
				Service: backend.Dist{Kind: backend.LogNormal, Mean: 20 * time.Millisecond, Sigma: 0.8},
				Costs:   map[string]float64{"/a": 2, "/b": 0.5}, ErrorRate: 0.1, ErrorStatus: 500, HangRate: 0.05, SlowDown: 2.5,
				Schedule: []backend.Window{{From: time.Second, To: 2 * time.Second, Workers: 1},
					{From: 3 * time.Second, To: 4 * time.Second}, {From: time.Minute, To: 90 * time.Second, Workers: 8}},
				HonorCancel: true, HealthPath: "/h", CountHeader: "X-C", Seed: 7}}},
	}
	for _, c := range cases {
		var stderr strings.Builder
		got, code, done := parseBackend(c.args, io.Discard, &stderr)
		if done || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v: done %v (exit %d, %q)\n got %+v\nwant %+v", c.args, done, code, stderr.String(), got, c.want)
		}
	}
	services := map[string]backend.Dist{
		"250ms":          {Kind: backend.Constant, Mean: 250 * time.Millisecond},
		"exp:5ms":        {Kind: backend.Exponential, Mean: 5 * time.Millisecond},
		"lognormal:20ms": {Kind: backend.LogNormal, Mean: 20 * time.Millisecond, Sigma: 0.5},
		"lognormal:1s:0": {Kind: backend.LogNormal, Mean: time.Second},
	}
	for spec, want := range services {
		got, _, done := parseBackend([]string{"--service", spec}, io.Discard, io.Discard)
		if done || got.cfg.Service != want {
			t.Errorf("--service %s: done %v, got %+v, want %+v", spec, done, got.cfg.Service, want)
		}
	}
}

// A bad value exits 2 with one line on stderr naming the flag and the
// problem, and nothing on stdout; -h prints the usage with the syntax of
// the structured flags and exits 0; an address in use exits 1.
func TestBackendBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "0"}, "--workers: must be at least 1, got 0"},
		{[]string{"--workers", "x"}, `--workers: parse error, got "x"`},
		{[]string{"--queue", "-1"}, "--queue: must be 0 or more, got -1"},
		{[]string{"--service", "0"}, "--service: the mean must be a duration above 0"},
		{[]string{"--service", "exp:"}, "--service: the mean must be a duration above 0"},
		{[]string{"--service", "fast:1ms"}, "--service: want DURATION, exp:DURATION or lognormal:DURATION[:SIGMA]"},
		{[]string{"--service", "exp:1ms:2"}, "--service: want DURATION, exp:DURATION"},
		{[]string{"--service", "lognormal:1ms:20"}, "--service: SIGMA must be a number from 0 to 10"},
		{[]string{"--cost", "report=2"}, "--cost: want PATH=FACTOR with PATH starting with /"},
		{[]string{"--cost", "/a=0"}, "--cost: FACTOR must be a finite number above 0"},
		{[]string{"--cost", "/a=1", "--cost", "/a=2"}, "--cost: /a given twice"},
		{[]string{"--cost", "/healthz=2"}, "--cost: /healthz is not served by the workers"},
		{[]string{"--cost", "/stats=2"}, "--cost: /stats is not served by the workers"},
		{[]string{"--error-rate", "1.5"}, "--error-rate: must be between 0 and 1, got 1.5"},
		{[]string{"--error-rate", "0.6", "--hang-rate", "0.5"}, "--error-rate 0.6 and --hang-rate 0.5: must add up to at most 1"},
		{[]string{"--hang-rate", "-0.1"}, "--hang-rate: must be between 0 and 1"},
		{[]string{"--error-status", "404"}, "--error-status: must be a 5xx, got 404"},
		{[]string{"--slow-down", "0"}, "--slow-down: must be a finite factor above 0, got 0"},
		{[]string{"--schedule", "60s-30s:5"}, `--schedule: "60s-30s:5": want 0 ≤ FROM < TO`},
		{[]string{"--schedule", "1s-2s:-1"}, "--schedule: \"1s-2s:-1\": WORKERS must be a whole number, 0 or more"},
		{[]string{"--schedule", "30s:5"}, "--schedule: \"30s:5\": want FROM-TO:WORKERS"},
		{[]string{"--schedule", "1s-x:5"}, "FROM and TO must be durations"},
		{[]string{"--schedule", "1s-5s:1,2s-3s:1"}, `--schedule: "2s-3s:1" overlaps 1s-5s`},
		{[]string{"--health-path", "/stats"}, "--health-path: must start with / and not be /stats"},
		{[]string{"--health-path", "healthz"}, "--health-path: must start with /"},
		{[]string{"--report", "-1s"}, "--report: must be 0 or more, got -1s"},
		{[]string{"--addr", ""}, "--addr: must not be empty"},
		{[]string{"--nope"}, "unknown flag --nope"},
		{[]string{"--seed"}, "--seed: needs a value"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(t, append([]string{"backend"}, c.args...)...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", c.args, code, stdout, stderr, c.want)
		}
	}
	code, stdout, stderr := runCmd(t, "backend", "-h")
	if code != 0 || !strings.Contains(stdout, "usage: spillway backend [flags]") || !strings.Contains(stdout, "lognormal:DURATION[:SIGMA]") ||
		!strings.Contains(stdout, "FROM-TO:WORKERS") || !strings.Contains(stdout, "-cost PATH=FACTOR") || stderr != "" {
		t.Errorf("-h: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, stderr = runCmd(t, "backend", "--addr", ln.Addr().String())
	if code != 1 || !strings.Contains(stderr, "address already in use") {
		t.Errorf("address in use: exit %d, stderr %q", code, stderr)
	}
}

// backendRun is runBackend on a free port in a goroutine, stopped by a
// context.
type backendRun struct {
	addr   string
	out    syncbuf.Buffer
	errb   syncbuf.Buffer
	cancel context.CancelFunc
	done   chan int
	once   sync.Once
	code   int
}

// startBackend parses args (with --addr 127.0.0.1:0 first), runs the
// backend and waits for its start line; the test's end stops it.
func startBackend(t *testing.T, args ...string) *backendRun {
	t.Helper()
	o, code, done := parseBackend(append([]string{"--addr", "127.0.0.1:0"}, args...), io.Discard, io.Discard)
	if done {
		t.Fatalf("%v: exit %d", args, code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &backendRun{cancel: cancel, done: make(chan int, 1)}
	go func() { r.done <- runBackend(ctx, o, &r.out, &r.errb) }()
	t.Cleanup(func() { r.stop(t) })
	waitFor(t, 10*time.Second, "the start line", func() bool { return backendAddrRE.MatchString(r.out.String()) })
	r.addr = backendAddrRE.FindStringSubmatch(r.out.String())[1]
	return r
}

// stop cancels the run's context and returns its exit status, failing
// the test unless it returns within 10 s.
func (r *backendRun) stop(t *testing.T) int {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case r.code = <-r.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("runBackend did not return within 10s of its context's end")
		}
	})
	return r.code
}

// stats reads the run's GET /stats.
func (r *backendRun) stats(t *testing.T, c *http.Client) (s backendStats) {
	t.Helper()
	resp, err := c.Get("http://" + r.addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("/stats: %s, Content-Type %q", resp.Status, ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func newTestClient(t *testing.T, timeout time.Duration) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

// Two workers of 50 ms and 20 requests at once (5 critical): the start
// line says 40 req/s; all 20 are served (named b1), never more than 2 at
// once, and they take at least 20 × 50 ms / 2 = 0.5 s (timers, so never
// less) and, on a busy machine, well under 3 s (one worker would need
// 1 s, no worker at all forever); /stats and the summary printed on stop
// say so, the counts by Spillway-Criticality and the health check on /up
// included; the run ends with status 0 and no goroutine left.
func TestBackendServesAtCapacity(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
	r := startBackend(t, "--workers", "2", "--queue", "20", "--service", "50ms", "--name", "b1", "--health-path", "/up",
		"--count-header", "Spillway-Criticality")
	if want := "capacity 40 req/s (2 workers / 50ms mean service time), service 50ms, queue 20; health /up, stats /stats\n"; !strings.HasSuffix(r.out.String(), want) {
		t.Errorf("start line %q, want it to end %q", r.out.String(), want)
	}
	c := newTestClient(t, 10*time.Second)
	codes := make(chan int, 20)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+r.addr+"/work", nil)
			if i%4 == 0 {
				req.Header.Set("Spillway-Criticality", "critical")
			}
			resp, err := c.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.Header.Get("Backend-Name") != "b1" {
				t.Errorf("Backend-Name %q, want b1", resp.Header.Get("Backend-Name"))
			}
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("a request got %d, want 200", code)
		}
	}
	if elapsed < 475*time.Millisecond || elapsed > 3*time.Second {
		t.Errorf("20 requests took %v, want 0.5 s (at least 0.475 s, at most 3 s)", elapsed)
	}
	if code, body := get(c, "http://"+r.addr+"/up"); code != 200 || body != "ok\n" {
		t.Errorf("GET /up: %d %q", code, body)
	}
	s := r.stats(t, c)
	want := backendStats{Stats: backend.Stats{Arrived: 20, Served: 20, MaxInFlight: 2, Health: 1,
		ByHeader: map[string]int64{"": 15, "critical": 5}}, Capacity: 2}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("/stats %+v, want %+v", s, want)
	}
	if code := r.stop(t); code != 0 {
		t.Errorf("exit %d, stderr %q", code, r.errb.String())
	}
	last := r.out.String()[strings.LastIndex(strings.TrimSuffix(r.out.String(), "\n"), "\n")+1:]
	if !regexp.MustCompile(`^spillway backend: stopped after [0-9.]+m?s: arrived 20, served 20 \(late 0\), errors 0, hung 0, rejected 0, cancelled 0, max in flight 2; by Spillway-Criticality: \(none\) 15, critical 5\n$`).MatchString(last) {
		t.Errorf("last line %q", last)
	}
}

// get sends a GET of path and returns its status and body (0 and the
// error's text when it fails).
func get(c *http.Client, url string) (int, string) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// On stop, what the backend holds is answered at once: a request at work
// for a minute and one queued behind it (the queue's one place; a third
// request is refused), or one that hangs (--hang-rate 1). The run returns
// 0 within 4 s, though a connection that never sent a request is open.
func TestBackendStopEndsHeldRequests(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
	c := newTestClient(t, 30*time.Second)
	for _, args := range [][]string{{"--workers", "1", "--queue", "1", "--service", "1m"}, {"--hang-rate", "1"}} {
		r := startBackend(t, args...)
		held := 2
		if args[0] == "--hang-rate" {
			held = 1
		}
		answers := make(chan string, held)
		for sent := 1; sent <= held; sent++ {
			go func() { code, body := get(c, "http://"+r.addr+"/slow"); answers <- strconv.Itoa(code) + " " + body }()
			waitFor(t, 10*time.Second, "one more request held", func() bool {
				s := r.stats(t, c)
				return s.Arrived == int64(sent) && s.InFlight+s.Queued+int(s.Hung) == sent
			})
		}
		if held == 2 {
			if code, body := get(c, "http://"+r.addr+"/slow"); code != 503 || !strings.Contains(body, "queue full") {
				t.Errorf("%v: a third request got %d %q, want 503 (queue full)", args, code, body)
			}
		}
		// A connection that never sends a request: net/http's Shutdown
		// waits 5 s for one before it counts it idle.
		quiet, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer quiet.Close()
		stopped := time.Now()
		if code := r.stop(t); code != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, r.errb.String())
		}
		if d := time.Since(stopped); d > 4*time.Second {
			t.Errorf("%v: stopping took %v", args, d)
		}
		for range held {
			if a := <-answers; a != "503 backend closed\n" {
				t.Errorf("%v: a held request got %q, want 503 backend closed", args, a)
			}
		}
	}
}

// A client that gives up after 100 ms on a 300 ms request: by default the
// backend serves it anyway and counts it late; with --honor-cancel it
// stops and counts it cancelled.
func TestBackendLateAndHonorCancel(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 10*time.Second, ignore) })
	c := newTestClient(t, 10*time.Second)
	impatient := newTestClient(t, 100*time.Millisecond)
	for _, honor := range []bool{false, true} {
		args := []string{"--workers", "1", "--service", "300ms"}
		want := backendStats{Stats: backend.Stats{Arrived: 1, Served: 1, Late: 1, MaxInFlight: 1}, Capacity: 1}
		if honor {
			args = append(args, "--honor-cancel")
			want.Served, want.Late, want.Cancelled = 0, 0, 1
		}
		r := startBackend(t, args...)
		if got := strings.Contains(r.out.String(), "queue 1000, honor-cancel; health"); got != honor {
			t.Errorf("honor %v: start line %q", honor, r.out.String())
		}
		if code, _ := get(impatient, "http://"+r.addr+"/x"); code != 0 {
			t.Fatalf("honor %v: the impatient client got %d, want a timeout", honor, code)
		}
		var s backendStats
		waitFor(t, 10*time.Second, "the request done with", func() bool { s = r.stats(t, c); return s.Served+s.Cancelled == 1 })
		if !reflect.DeepEqual(s, want) {
			t.Errorf("honor %v: /stats %+v, want %+v", honor, s, want)
		}
		if code := r.stop(t); code != 0 {
			t.Errorf("honor %v: exit %d", honor, code)
		}
	}
}

// The real command in a child process: a --report line while it runs,
// and on SIGTERM the summary and exit status 0.
func TestBackendStopsOnSIGTERM(t *testing.T) {
	maintest.Child(t, main)
	p := maintest.Start(t, main, "backend", "--addr", "127.0.0.1:0", "--workers", "1", "--service", "10ms", "--report", "200ms")
	var addr string
	waitFor(t, 30*time.Second, "the start line", func() bool {
		m := backendAddrRE.FindStringSubmatch(p.Stdout())
		if m != nil {
			addr = m[1]
		}
		return m != nil || p.Exited()
	})
	if addr == "" {
		t.Fatalf("no start line; stdout %q, stderr %q", p.Stdout(), p.Stderr())
	}
	c := newTestClient(t, 10*time.Second)
	if code := status(c, "http://"+addr+"/"); code != 200 {
		t.Fatalf("GET / got %d", code)
	}
	report := regexp.MustCompile(`spillway backend: at [0-9.]+m?s: arrived 1, served 1 \(late 0\), errors 0, hung 0, rejected 0, cancelled 0, max in flight 1; served [0-9.]+ req/s over the last 200ms\n`)
	waitFor(t, 10*time.Second, "a report with the request", func() bool { return report.MatchString(p.Stdout()) })
	stoppedRE := regexp.MustCompile(`\nspillway backend: stopped after [0-9.]+m?s: arrived 1, served 1 \(late 0\), errors 0, hung 0, rejected 0, cancelled 0, max in flight 1\n$`)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, ok := p.Wait(10 * time.Second)
	if !ok || code != 0 || !stoppedRE.MatchString(p.Stdout()) {
		t.Errorf("after SIGTERM: exited %v, status %d, stdout %q, stderr %q", ok, code, p.Stdout(), p.Stderr())
	}
}

// The start line's capacity: workers over the mean service time with the
// slow-down, for the schedule's windows too, and the failures injected.
func TestDescribeBackend(t *testing.T) {
	o, _, done := parseBackend([]string{"--workers", "3", "--service", "exp:40ms", "--slow-down", "2.5", "--queue", "0",
		"--schedule", "10s-20s:1,30s-40s:0", "--error-rate", "0.25", "--hang-rate", "0.1", "--health-path", "/h"}, io.Discard, io.Discard)
	if done {
		t.Fatal("flags refused")
	}
	want := "capacity 30 req/s (3 workers / 100ms mean service time, slow-down 2.5 included), service exp:40ms, queue 0, " +
		"10s-20s: 1 workers, 10 req/s, 30s-40s: 0 workers, 0 req/s, errors 25% (503), hangs 10%; health /h, stats /stats"
	if got := describeBackend(&o.cfg); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got, want := rate(40.0/3), "13.3"; got != want {
		t.Errorf("rate(40/3) = %q, want %q", got, want)
	}
}
