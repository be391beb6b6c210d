package backend

import (
	"errors"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

var ms20 = Dist{Mean: 20 * time.Millisecond}

func TestConfigErrors(t *testing.T) {
	ok := Config{Workers: 1, Service: ms20}
	for name, edit := range map[string]func(*Config){
		"no workers":       func(c *Config) { c.Workers = 0 },
		"negative queue":   func(c *Config) { c.Queue = -1 },
		"no mean":          func(c *Config) { c.Service.Mean = 0 },
		"unknown kind":     func(c *Config) { c.Service.Kind = 7 },
		"negative sigma":   func(c *Config) { c.Service.Sigma = -1 },
		"NaN sigma":        func(c *Config) { c.Service.Sigma = math.NaN() },
		"status 404":       func(c *Config) { c.ErrorStatus = 404 },
		"shares above 1":   func(c *Config) { c.ErrorRate, c.HangRate = 0.6, 0.5 },
		"negative share":   func(c *Config) { c.HangRate = -0.1 },
		"negative slow":    func(c *Config) { c.SlowDown = -2 },
		"zero cost":        func(c *Config) { c.Costs = map[string]float64{"/x": 0} },
		"empty window":     func(c *Config) { c.Schedule = []Window{{From: time.Second, To: time.Second, Workers: 1}} },
		"negative workers": func(c *Config) { c.Schedule = []Window{{To: time.Second, Workers: -1}} },
	} {
		c := ok
		edit(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New returned %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
}

// sample draws n service times of the given cost and returns their mean,
// their standard deviation and their median, in seconds.
func sample(b *Backend, n int, cost float64) (mean, sd, median float64) {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = b.serviceLocked(cost).Seconds()
		mean += xs[i]
	}
	mean /= float64(n)
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	slices.Sort(xs)
	return mean, math.Sqrt(sd / float64(n-1)), xs[n/2]
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

// The distributions have the moments they claim (20,000 draws: the
// bounds are several standard errors wide); cost and slow-down multiply.
func TestServiceDistributions(t *testing.T) {
	const n, m = 20000, 0.02
	b := newBackend(t, Config{Workers: 1, Service: ms20, Seed: 1})
	if mean, sd, _ := sample(b, 100, 1); !within(mean, m, 1e-9) || sd > 1e-12 {
		t.Errorf("constant: mean %v sd %v, want %v and 0", mean, sd, m)
	}
	b = newBackend(t, Config{Workers: 1, Service: Dist{Kind: Exponential, Mean: 20 * time.Millisecond}, Seed: 2})
	if mean, sd, median := sample(b, n, 1); !within(mean, m, 0.05) || !within(sd, m, 0.05) || !within(median, m*math.Ln2, 0.05) {
		t.Errorf("exponential: mean %v sd %v median %v, want %v, %v and %v", mean, sd, median, m, m, m*math.Ln2)
	}
	const sigma = 0.5
	b = newBackend(t, Config{Workers: 1, Service: Dist{Kind: LogNormal, Mean: 20 * time.Millisecond, Sigma: sigma}, Seed: 3})
	wantSD := m * math.Sqrt(math.Exp(sigma*sigma)-1)
	wantMedian := m * math.Exp(-sigma*sigma/2)
	if mean, sd, median := sample(b, n, 1); !within(mean, m, 0.03) || !within(sd, wantSD, 0.1) || !within(median, wantMedian, 0.03) {
		t.Errorf("lognormal: mean %v sd %v median %v, want %v, %v and %v", mean, sd, median, m, wantSD, wantMedian)
	}
	b = newBackend(t, Config{Workers: 1, Service: ms20, SlowDown: 1.5})
	if mean, _, _ := sample(b, 10, 2); !within(mean, 0.06, 1e-9) {
		t.Errorf("cost 2, slow-down 1.5: mean %v, want 0.06", mean)
	}
	b.SetSlowDown(4)
	if mean, _, _ := sample(b, 10, 1); !within(mean, 0.08, 1e-9) {
		t.Errorf("slow-down set to 4: mean %v, want 0.08", mean)
	}
}

// Injected errors and hangs come in the shares asked for: with 2,000
// requests, each count lies within 5 standard deviations of its binomial
// mean. Hangs end when their client leaves.
func TestFailureShares(t *testing.T) {
	const n, errRate, hangRate = 2000, 0.1, 0.05
	b := newBackend(t, Config{Workers: 200, Queue: n, Service: Dist{Mean: 10 * time.Millisecond},
		ErrorRate: errRate, ErrorStatus: 500, HangRate: hangRate, Seed: 42})
	statuses := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			for range n / 40 {
				c := serve(b, "/")
				// A hang answers nothing until its client leaves; the
				// others are long done by then.
				select {
				case <-c.done:
				case <-time.After(200 * time.Millisecond):
				}
				c.cancel()
				<-c.done
				key := strconv.Itoa(c.rec.Code) + " " + c.rec.Body.String()
				mu.Lock()
				statuses[key]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s := b.Stats()
	for _, x := range []struct {
		what  string
		got   int
		share float64
	}{{"500 errors", statuses["500 injected error\n"], errRate}, {"hangs", statuses["200 "], hangRate}} {
		mean := n * x.share
		sd := math.Sqrt(mean * (1 - x.share))
		if math.Abs(float64(x.got)-mean) > 5*sd {
			t.Errorf("%s: %d of %d, want %v ± %.0f", x.what, x.got, n, mean, 5*sd)
		}
	}
	ok := statuses["200 ok\n"]
	if len(statuses) != 3 || ok+statuses["500 injected error\n"]+statuses["200 "] != n {
		t.Errorf("answers %v, want only 200 ok, 500 errors and hangs", statuses)
	}
	if s.Errors != int64(statuses["500 injected error\n"]) || s.Hung != int64(statuses["200 "]) ||
		s.Served != int64(ok) || s.Arrived != n || s.InFlight != 0 || s.Queued != 0 {
		t.Errorf("stats %+v disagree with the answers %v", s, statuses)
	}

	b.SetErrorRate(1) // clamped to 1 − the hang share
	b.SetHang(0)
	b.SetErrorRate(1)
	for range 20 {
		if code, _ := serve(b, "/").wait(t); code != 500 {
			t.Fatalf("error rate 1: status %d", code)
		}
	}
	b.SetErrorRate(0)
	for range 20 {
		if code, body := serve(b, "/").wait(t); code != 200 || body != "ok\n" {
			t.Fatalf("error rate 0: %d %q", code, body)
		}
	}
}

// The schedule is relative to the clock's reading at New; a capacity rise
// starts queued requests with the next arrival.
func TestSchedule(t *testing.T) {
	var clk testClock
	clk.Set(100)
	b := newBackend(t, Config{Workers: 4, Queue: 10, Service: Dist{Mean: 10 * time.Second}, Clock: &clk,
		Schedule: []Window{{From: 30 * time.Second, To: 60 * time.Second, Workers: 1}, {From: 60 * time.Second, To: 70 * time.Second}}})
	for _, x := range []struct {
		at   float64
		want int
	}{{100, 4}, {129.999, 4}, {130, 1}, {159.9, 1}, {160, 0}, {169.99, 0}, {170, 4}} {
		clk.Set(x.at)
		if got := b.Capacity(); got != x.want {
			t.Errorf("capacity at %v s after start: %d, want %d", x.at-100, got, x.want)
		}
	}
	clk.Set(135) // inside the dip: one worker
	var calls []*call
	for i := range 3 {
		calls = append(calls, serve(b, "/"))
		statsAre(t, b, "request "+strconv.Itoa(i)+" in", func(s Stats) bool { return s.Arrived == int64(i+1) })
	}
	statsAre(t, b, "1 at work, 2 queued", func(s Stats) bool { return s.InFlight == 1 && s.Queued == 2 })
	clk.Set(175) // after the dip; the next arrival starts the queued ones
	calls = append(calls, serve(b, "/"))
	statsAre(t, b, "4 at work", func(s Stats) bool { return s.InFlight == 4 && s.Queued == 0 })
	b.SetCapacity(2)
	calls = append(calls, serve(b, "/"))
	statsAre(t, b, "after a fall to 2, a new request waits", func(s Stats) bool { return s.InFlight == 4 && s.Queued == 1 })
	b.SetCapacity(6)
	statsAre(t, b, "a rise to 6 starts it", func(s Stats) bool { return s.InFlight == 5 && s.Queued == 0 && s.MaxInFlight == 5 })
	b.Close()
	for _, c := range calls {
		if code, body := c.wait(t); code != http.StatusServiceUnavailable || body != "backend closed\n" {
			t.Errorf("closed while at work: %d %q", code, body)
		}
	}
	if s := b.Stats(); s.Served != 0 || s.InFlight != 0 {
		t.Errorf("after Close: %+v", s)
	}
}

// A request finished after its Spillway-Timeout budget, on the backend's
// clock, is served late; one within it is not.
func TestLateByBudget(t *testing.T) {
	var clk testClock
	b := newBackend(t, Config{Workers: 2, Service: Dist{Mean: 50 * time.Millisecond}, Clock: &clk})
	slow := serve(b, "/", "Spillway-Timeout", "5S")
	statsAre(t, b, "at work", func(s Stats) bool { return s.InFlight == 1 })
	clk.Set(6) // the budget runs out while it works
	if code, _ := slow.wait(t); code != 200 {
		t.Fatalf("late request answered %d", code)
	}
	fast := serve(b, "/", "Spillway-Timeout", "5S")
	if code, _ := fast.wait(t); code != 200 {
		t.Fatalf("request answered %d", code)
	}
	if s := b.Stats(); s.Served != 2 || s.Late != 1 {
		t.Errorf("served %d, late %d; want 2 and 1", s.Served, s.Late)
	}
}

// Requests are counted by the value of the configured header, refused
// ones too; the health endpoint answers as set, is counted apart, and
// every answer names the backend.
func TestHeaderCountsAndHealth(t *testing.T) {
	b := newBackend(t, Config{Name: "b1", Workers: 1, Service: Dist{Mean: 10 * time.Second},
		CountHeader: "Spillway-Criticality", HealthPath: "/health"})
	busy := serve(b, "/", "Spillway-Criticality", "critical")
	statsAre(t, b, "at work", func(s Stats) bool { return s.InFlight == 1 })
	for _, v := range []string{"critical", "critical", "sheddable", "sheddable", ""} {
		c := serve(b, "/", "Spillway-Criticality", v)
		if code, _ := c.wait(t); code != http.StatusServiceUnavailable || c.rec.Header().Get("Backend-Name") != "b1" {
			t.Fatalf("with the worker busy and no queue: %d, Backend-Name %q", code, c.rec.Header().Get("Backend-Name"))
		}
	}
	want := map[string]int64{"critical": 3, "sheddable": 2, "": 1}
	if s := b.Stats(); !maps.Equal(s.ByHeader, want) || s.Rejected != 5 {
		t.Errorf("counted %v with %d rejected, want %v and 5", s.ByHeader, s.Rejected, want)
	}
	for _, x := range []struct {
		healthy bool
		want    int
	}{{true, 200}, {false, 503}, {true, 200}} {
		b.SetHealthy(x.healthy)
		if code, _ := serve(b, "/health").wait(t); code != x.want {
			t.Errorf("healthy %v: /health answered %d, want %d", x.healthy, code, x.want)
		}
	}
	if s := b.Stats(); s.Health != 3 || s.Arrived != 6 {
		t.Errorf("health %d, arrived %d; want 3 and 6", s.Health, s.Arrived)
	}
	b.Close()
	busy.wait(t)
}
