package backend

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/deadline"
)

// maxBody is how much of a request body is read (and thrown away) before
// the request is worked on.
const maxBody = 1 << 20

// The answers, built once.
var (
	okBody     = []byte("ok\n")
	errorBody  = []byte("injected error\n")
	fullBody   = []byte("busy: every worker busy and the queue full\n")
	closedBody = []byte("backend closed\n")
	unhealthy  = []byte("unhealthy\n")
	textPlain  = []string{"text/plain; charset=utf-8"}
)

// waiter is a request in the queue.
type waiter struct {
	ready  chan struct{} // closed when the request is given a worker
	handed bool          // given a worker (under Backend.mu)
	gone   bool          // left without one (under Backend.mu)
}

// ServeHTTP answers a health check, or works on a request: an injected
// error or hang, else a worker for the service time (after a wait in the
// queue, or a 503 when that is full), then 200 "ok".
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.name != nil {
		w.Header()["Backend-Name"] = b.name
	}
	if r.URL.Path == b.healthPath {
		b.serveHealth(w, r)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
	now := b.clock.Now()
	due := math.Inf(1)
	if d, ok, err := deadline.FromHeader(r.Header); ok && err == nil {
		due = now + clock.Seconds(d)
	}
	cost, ok := b.costs[r.URL.Path]
	if !ok {
		cost = 1
	}
	b.mu.Lock()
	b.stats.Arrived++
	if b.stats.ByHeader != nil {
		b.stats.ByHeader[r.Header.Get(b.countHeader)]++
	}
	u := b.rng.Float64()
	switch {
	case u < b.errorRate:
		b.stats.Errors++
		b.mu.Unlock()
		answer(w, b.errStatus, errorBody)
		return
	case u < b.errorRate+b.hangRate:
		b.stats.Hung++
		b.mu.Unlock()
		b.hang(w, r)
		return
	}
	service := b.serviceLocked(cost)
	wt, admitted := b.admitLocked(now)
	b.mu.Unlock()
	switch {
	case !admitted:
		answer(w, http.StatusServiceUnavailable, fullBody)
	case wt != nil && !b.await(wt, r):
		answer(w, http.StatusServiceUnavailable, closedBody) // read by nobody if the client left
	default:
		b.work(w, r, service, due)
	}
}

// admitLocked gives the request a worker (nil, true), a place in the queue
// (its waiter, true), or neither (false).
func (b *Backend) admitLocked(now float64) (*waiter, bool) {
	b.dispatchLocked(now)
	s := &b.stats
	if s.Queued == 0 && s.InFlight < b.capacityLocked(now) {
		s.InFlight++
		s.MaxInFlight = max(s.MaxInFlight, s.InFlight)
		return nil, true
	}
	if s.Queued < b.queueMax {
		wt := &waiter{ready: make(chan struct{})}
		b.queue = append(b.queue, wt)
		s.Queued++
		return wt, true
	}
	s.Rejected++
	return nil, false
}

// dispatchLocked gives free workers to the queue's oldest requests.
func (b *Backend) dispatchLocked(now float64) {
	s := &b.stats
	c := b.capacityLocked(now)
	for s.InFlight < c && len(b.queue) > 0 {
		wt := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		if wt.gone {
			continue
		}
		wt.handed = true
		close(wt.ready)
		s.Queued--
		s.InFlight++
		s.MaxInFlight = max(s.MaxInFlight, s.InFlight)
	}
}

// await waits in the queue for a worker; false when the request leaves
// without one (its client went, with HonorCancel, or Close).
func (b *Backend) await(wt *waiter, r *http.Request) bool {
	var gone <-chan struct{}
	if b.honor {
		gone = r.Context().Done()
	}
	cancelled := false
	select {
	case <-wt.ready:
		return true
	case <-gone:
		cancelled = true
	case <-b.done:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if wt.handed { // given a worker as it left: work will give it back
		return true
	}
	wt.gone = true
	b.stats.Queued--
	if cancelled {
		b.stats.Cancelled++
	}
	return false
}

// work holds a worker for the service time, then answers 200. With
// HonorCancel, a client that leaves ends the work early; Close ends it
// with a 503.
func (b *Backend) work(w http.ResponseWriter, r *http.Request, service time.Duration, due float64) {
	var gone <-chan struct{}
	if b.honor {
		gone = r.Context().Done()
	}
	t := time.NewTimer(service)
	served, cancelled := false, false
	select {
	case <-t.C:
		served = true
	case <-gone:
		cancelled = true
	case <-b.done:
	}
	t.Stop()
	end := b.clock.Now()
	late := r.Context().Err() != nil || end > due
	b.mu.Lock()
	b.stats.InFlight--
	switch {
	case served:
		b.stats.Served++
		if late {
			b.stats.Late++
		}
	case cancelled:
		b.stats.Cancelled++
	}
	b.dispatchLocked(end)
	b.mu.Unlock()
	switch {
	case served:
		answer(w, http.StatusOK, okBody)
	case !cancelled:
		answer(w, http.StatusServiceUnavailable, closedBody)
	}
}

// hang answers nothing until the client leaves, or Close.
func (b *Backend) hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-b.done:
		answer(w, http.StatusServiceUnavailable, closedBody)
	}
}

// serveHealth answers the health endpoint: 200, or 503 while unhealthy;
// it hangs with the hang share, as a stuck server's checks do.
func (b *Backend) serveHealth(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.stats.Health++
	ok := b.healthy
	hang := b.hangRate > 0 && b.rng.Float64() < b.hangRate
	b.mu.Unlock()
	switch {
	case hang:
		b.hang(w, r)
	case ok:
		answer(w, http.StatusOK, okBody)
	default:
		answer(w, http.StatusServiceUnavailable, unhealthy)
	}
}

// answer writes a short plain-text response.
func answer(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = textPlain
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
