// Command admit is a small HTTP service protected by adaptive admission
// control (package admit over limit.Limiter): the service has a hidden
// capacity — it works on at most -capacity requests at once, each taking
// -work, and queues the rest internally, as a real server's thread pool
// and CPU would — and the gradient limit finds that capacity from latency
// alone, then refuses the excess with 503 + Retry-After, sheddable traffic
// first.
//
//	go run ./examples/admit                        # serve on 127.0.0.1:8080
//	go run ./examples/admit -selftest -load 2      # serve, offer 2× capacity for 5 s, print what happened
//
// Requests may carry Spillway-Criticality (critical, default, sheddable) and
// Spillway-Timeout (the caller's budget, grpc-timeout syntax: 250m = 250 ms).
// GET /metrics serves the Prometheus metrics. With -selftest the program
// offers open-loop Poisson load over real loopback HTTP for -duration,
// prints per-class results and the limit it learned, and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/brownout"
	"github.com/spillwayhq/spillway/httpserver"
	"github.com/spillwayhq/spillway/limit"
	"github.com/spillwayhq/spillway/shed"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed; not a failure
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "admit:", err)
		os.Exit(1)
	}
}

type options struct {
	addr     string
	capacity int
	work     time.Duration
	queue    string
	maxWait  time.Duration
	selftest bool
	load     float64
	duration time.Duration
	timeout  time.Duration
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("admit", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address (with -selftest, 127.0.0.1:0 is used)")
	fs.IntVar(&o.capacity, "capacity", 8, "the service's hidden capacity: requests worked on at once")
	fs.DurationVar(&o.work, "work", 20*time.Millisecond, "time one request takes when the service is not overloaded")
	fs.StringVar(&o.queue, "queue", "codel", "what to do when the limit is full: reject, fifo, adaptive-lifo, codel")
	fs.DurationVar(&o.maxWait, "max-wait", 50*time.Millisecond, "longest wait in the admission queue")
	fs.BoolVar(&o.selftest, "selftest", false, "offer load to the service over loopback HTTP, print the results, exit")
	fs.Float64Var(&o.load, "load", 2, "selftest: offered load as a multiple of capacity (capacity ÷ work per second)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "selftest: how long to offer load (at most 60s)")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "selftest: client timeout, sent as Spillway-Timeout")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.capacity < 1 || o.capacity > 10000:
		return o, fmt.Errorf("-capacity: want 1 to 10000, got %d", o.capacity)
	case o.work <= 0 || o.work > 10*time.Second:
		return o, fmt.Errorf("-work: want (0, 10s], got %v", o.work)
	case o.load <= 0 || o.load > 20:
		return o, fmt.Errorf("-load: want (0, 20], got %v", o.load)
	case o.duration <= 0 || o.duration > time.Minute:
		return o, fmt.Errorf("-duration: want (0, 60s], got %v", o.duration)
	case o.timeout <= 0:
		return o, fmt.Errorf("-timeout: want > 0, got %v", o.timeout)
	case o.maxWait <= 0:
		return o, fmt.Errorf("-max-wait: want > 0, got %v", o.maxWait)
	}
	if float64(o.capacity)/o.work.Seconds()*o.load > 5000 {
		return o, errors.New("-load × capacity ÷ work above 5000 requests/s: too much for a loopback self-test")
	}
	if _, ok := limit.ParseDiscipline(o.queue); !ok {
		return o, fmt.Errorf("-queue: want reject, fifo, adaptive-lifo or codel, got %q", o.queue)
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	gate, err := newGate(o)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(gate.Collector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", gate.Handler(service(o.capacity, o.work), admit.HTTPOptions{}))

	addr := o.addr
	if o.selftest {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := httpserver.New(httpserver.Config{Handler: mux}) // header, idle, body and send timeouts
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	if o.selftest {
		return selftest(o, "http://"+ln.Addr().String()+"/", gate, out)
	}
	fmt.Fprintf(out, "serving on http://%s/ (capacity %d × %v; queue %s)\n", ln.Addr(), o.capacity, o.work, o.queue)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// newGate is the protection: a gradient limit found from latency, a
// bounded wait queue, brownout of optional work.
func newGate(o options) (*admit.Gate, error) {
	alg, err := limit.NewGradient(limit.GradientConfig{InitialLimit: 4, MaxLimit: 1000})
	if err != nil {
		return nil, err
	}
	d, _ := limit.ParseDiscipline(o.queue)
	lim, err := limit.NewLimiter(alg, limit.LimiterConfig{
		Queue: limit.QueueConfig{Discipline: d, MaxWait: o.maxWait.Seconds()},
	})
	if err != nil {
		return nil, err
	}
	dim, err := brownout.New(brownout.Config{TargetP99: 4 * o.work.Seconds(), Period: 0.5})
	if err != nil {
		return nil, err
	}
	return admit.New(admit.Config{Limiter: lim, Dimmer: dim})
}

// service works on at most capacity requests at once, each for work; the
// others wait their turn inside the service (as on a real server's CPU),
// so latency grows with the load beyond capacity. Optional work (a second,
// shorter step) is skipped when brownout says so.
func service(capacity int, work time.Duration) http.Handler {
	cpu := make(chan struct{}, capacity)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case cpu <- struct{}{}:
		case <-r.Context().Done():
			http.Error(w, "gave up", http.StatusServiceUnavailable)
			return
		}
		time.Sleep(work)
		if brownout.OptionalFrom(r.Context()) {
			time.Sleep(work / 4) // recommendations, thumbnails: nice to have
		}
		<-cpu
		_, _ = io.WriteString(w, "done\n")
	})
}

type classStats struct {
	sent, ok, refused, late atomic.Int64
	mu                      sync.Mutex
	lat                     []float64 // seconds, successful requests
}

// selftest offers open-loop Poisson load at o.load × capacity for
// o.duration, a fifth of it critical, two fifths sheddable, and prints
// per-class results.
func selftest(o options, url string, gate *admit.Gate, out io.Writer) error {
	capacity := float64(o.capacity) / o.work.Seconds()
	rate := o.load * capacity
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 0}}
	defer client.CloseIdleConnections()
	classes := []string{"critical", "default", "sheddable"}
	var stats [3]classStats
	var wg sync.WaitGroup
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	next := start
	budget := fmt.Sprintf("%dm", o.timeout.Milliseconds())
	for next.Sub(start) < o.duration {
		time.Sleep(time.Until(next))
		next = next.Add(time.Duration(r.ExpFloat64() / rate * float64(time.Second)))
		ci := 1
		switch u := r.Float64(); {
		case u < 0.2:
			ci = 0
		case u >= 0.6:
			ci = 2
		}
		st := &stats[ci]
		st.sent.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header.Set(shed.ClassHeader, classes[ci])
			req.Header.Set("Spillway-Timeout", budget)
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				st.late.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				st.refused.Add(1)
				return
			}
			st.ok.Add(1)
			st.mu.Lock()
			st.lat = append(st.lat, time.Since(t0).Seconds())
			st.mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	fmt.Fprintf(out, "capacity %.0f req/s (%d × %v), offered %.0f req/s (%.1f×) for %v, queue %s\n\n",
		capacity, o.capacity, o.work, rate, o.load, o.duration, o.queue)
	fmt.Fprintf(out, "%-10s %7s %7s %8s %9s %9s %9s\n", "class", "sent", "ok", "refused", "timed out", "ok %", "p99 ms")
	var good int64
	for i := range stats {
		st := &stats[i]
		good += st.ok.Load()
		sort.Float64s(st.lat)
		p99 := 0.0
		if n := len(st.lat); n > 0 {
			p99 = st.lat[(n*99+99)/100-1] * 1000
		}
		pct := 0.0
		if s := st.sent.Load(); s > 0 {
			pct = 100 * float64(st.ok.Load()) / float64(s)
		}
		fmt.Fprintf(out, "%-10s %7d %7d %8d %9d %8.1f%% %9.1f\n", classes[i], st.sent.Load(), st.ok.Load(), st.refused.Load(), st.late.Load(), pct, p99)
	}
	lim := gate.Limiter()
	fmt.Fprintf(out, "\ngoodput %.0f req/s of %.0f capacity (%.0f%%); learned limit %d (capacity %d), brownout level %.2f\n",
		float64(good)/elapsed, capacity, 100*float64(good)/elapsed/capacity, lim.Limit(), o.capacity, gate.Dimmer().Stats().Level)
	return nil
}
