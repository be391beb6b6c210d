package backend

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// load sends GETs of url from clients goroutines, each one after the
// other (5 ms apart after a refusal), for d; it returns the statuses and the time from the first send
// to the last answer.
func load(t *testing.T, client *http.Client, url string, clients int, d time.Duration) (map[int]int, time.Duration) {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	var failed atomic.Int64
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(stop) {
				resp, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
				if resp.StatusCode != http.StatusOK {
					time.Sleep(5 * time.Millisecond) // refused: back off a little rather than spin
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d requests failed", n)
	}
	return statuses, time.Since(start)
}

// Three times as many clients as workers: never more than the workers at
// once, and the throughput is the workers over the service time. Each
// request holds its worker at least 20 ms, so the ratio cannot exceed 1;
// the lower bound leaves room for a busy machine.
func TestCapacityAndThroughput(t *testing.T) {
	const workers, service = 4, 20 * time.Millisecond
	b := newBackend(t, Config{Workers: workers, Queue: 3 * workers, Service: Dist{Mean: service}})
	url, client := httpBackend(t, b)
	statuses, elapsed := load(t, client, url+"/", 3*workers, time.Second)
	s := b.Stats()
	if s.MaxInFlight != workers {
		t.Errorf("at most %d at work at once, want %d", s.MaxInFlight, workers)
	}
	if statuses[200] != int(s.Served) || s.Rejected != 0 || len(statuses) != 1 {
		t.Errorf("answers %v, stats %+v: want every request served", statuses, s)
	}
	want := workers / service.Seconds() * elapsed.Seconds()
	t.Logf("served %d in %v: %.3f of capacity", s.Served, elapsed, float64(s.Served)/want)
	if ratio := float64(s.Served) / want; ratio > 1.001 || ratio < 0.5 {
		t.Errorf("served %d in %v, %.2f of the capacity's %.0f", s.Served, elapsed, ratio, want)
	}
}

// With a short queue, three times the capacity is refused in part with
// 503, and still never more than the workers at work.
func TestQueueBoundUnderLoad(t *testing.T) {
	const workers = 3
	b := newBackend(t, Config{Workers: workers, Queue: 1, Service: Dist{Kind: Exponential, Mean: 20 * time.Millisecond}, Seed: 5})
	url, client := httpBackend(t, b)
	statuses, _ := load(t, client, url+"/", 3*workers, 500*time.Millisecond)
	s := b.Stats()
	if s.MaxInFlight > workers || statuses[503] == 0 || int64(statuses[503]) != s.Rejected || int64(statuses[200]) != s.Served {
		t.Errorf("answers %v, stats %+v: want some 503s and at most %d at work", statuses, s, workers)
	}
}

// The queue holds Queue requests at most; the next is refused at once.
func TestQueueBound(t *testing.T) {
	b := newBackend(t, Config{Workers: 2, Queue: 2, Service: Dist{Mean: 10 * time.Second}})
	var calls []*call
	for range 4 {
		calls = append(calls, serve(b, "/"))
	}
	statsAre(t, b, "2 at work, 2 queued", func(s Stats) bool { return s.InFlight == 2 && s.Queued == 2 })
	if code, body := serve(b, "/").wait(t); code != 503 || body != "busy: every worker busy and the queue full\n" {
		t.Fatalf("the fifth request: %d %q, want 503 busy", code, body)
	}
	b.Close()
	for _, c := range calls {
		c.wait(t)
	}
	if s := b.Stats(); s.Rejected != 1 || s.Served != 0 || s.InFlight != 0 || s.Queued != 0 {
		t.Errorf("stats %+v", s)
	}
}

// Clients that give up, one at work and one queued. Without HonorCancel
// both are served anyway (wasted work, counted late); with it both stop
// and free their places at once — the service time is 10 s, so only
// stopping gets there within the test's 10 s poll.
func TestHonorCancel(t *testing.T) {
	for _, honor := range []bool{false, true} {
		service := time.Second // the check just after the clients leave must come before it ends
		if honor {
			service = 10 * time.Second
		}
		b := newBackend(t, Config{Workers: 1, Queue: 1, Service: Dist{Mean: service}, HonorCancel: honor})
		atWork := serve(b, "/")
		statsAre(t, b, "at work", func(s Stats) bool { return s.InFlight == 1 })
		queued := serve(b, "/")
		statsAre(t, b, "queued", func(s Stats) bool { return s.Queued == 1 })
		queued.cancel()
		atWork.cancel()
		if !honor {
			// The client left, the work goes on: the worker is still taken.
			if s := b.Stats(); s.InFlight != 1 || s.Queued != 1 {
				t.Errorf("just after the clients left: %+v, want 1 at work and 1 queued", s)
			}
		}
		atWork.wait(t)
		queued.wait(t)
		s := b.Stats()
		switch {
		case !honor && (s.Served != 2 || s.Late != 2 || s.Cancelled != 0):
			t.Errorf("HonorCancel off: %+v, want 2 served late", s)
		case honor && (s.Served != 0 || s.Cancelled != 2 || s.InFlight != 0 || s.Queued != 0):
			t.Errorf("HonorCancel on: %+v, want 2 cancelled and nothing left", s)
		}
	}
}

// Over real HTTP, a client that gives up once its request is at work:
// the wasted work goes on without HonorCancel and stops with it (in well
// under the 10 s service time).
func TestHonorCancelOverHTTP(t *testing.T) {
	for _, honor := range []bool{false, true} {
		service := 300 * time.Millisecond
		if honor {
			service = 10 * time.Second
		}
		b := newBackend(t, Config{Workers: 1, Service: Dist{Mean: service}, HonorCancel: honor})
		url, client := httpBackend(t, b)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		answered := make(chan error, 1)
		go func() {
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			answered <- err
		}()
		statsAre(t, b, "at work", func(s Stats) bool { return s.InFlight == 1 })
		cancel()
		if err := <-answered; err == nil {
			t.Fatalf("HonorCancel %v: answered although the client gave up", honor)
		}
		if honor {
			statsAre(t, b, "cancelled", func(s Stats) bool { return s.Cancelled == 1 && s.InFlight == 0 })
		} else {
			statsAre(t, b, "served late", func(s Stats) bool { return s.Served == 1 && s.Late == 1 && s.InFlight == 0 })
		}
	}
}

// A path's cost multiplies its service time: a cost-3 request of a 20 ms
// service takes at least 60 ms (a timer never fires early).
func TestCostPerPath(t *testing.T) {
	b := newBackend(t, Config{Workers: 2, Service: ms20, Costs: map[string]float64{"/heavy": 3}})
	url, client := httpBackend(t, b)
	start := time.Now()
	resp, err := client.Get(url + "/heavy")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); el < 60*time.Millisecond || resp.StatusCode != 200 {
		t.Errorf("/heavy answered %d after %v, want 200 after at least 60 ms", resp.StatusCode, el)
	}
}
