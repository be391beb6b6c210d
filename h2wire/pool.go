package h2wire

import (
	"sync"
	"time"
)

// Pool is a bounded set of worker goroutines that run stream handlers. A
// worker stays alive between streams (its stack already grown), waiting up
// to its idle time for the next one, so that in the steady state no stream
// starts a goroutine. Idle workers are reused last-in first-out, so the
// warm ones keep working and the surplus idles out. Pools may be shared by
// any number of connections.
type Pool struct {
	mu      sync.Mutex
	idle    []*worker // parked workers, most recent last
	live    int       // workers running or parked
	max     int
	idleFor time.Duration
	closed  bool
}

// Defaults of the package-wide pool and of NewPool.
const (
	DefaultMaxWorkers = 10000
	DefaultWorkerIdle = 30 * time.Second
)

var (
	sharedPool     *Pool
	sharedPoolOnce sync.Once
)

func defaultPool() *Pool {
	sharedPoolOnce.Do(func() { sharedPool = NewPool(0, 0) })
	return sharedPool
}

// NewPool returns a pool of at most maxWorkers workers (0: DefaultMaxWorkers)
// that exit after idle without a stream (0: DefaultWorkerIdle). When every
// worker is busy and the pool is full, a new stream is refused with
// REFUSED_STREAM, which a client may retry safely.
func NewPool(maxWorkers int, idle time.Duration) *Pool {
	if maxWorkers <= 0 {
		maxWorkers = DefaultMaxWorkers
	}
	return &Pool{max: maxWorkers, idleFor: orDuration(idle, DefaultWorkerIdle)}
}

// Close makes the idle workers exit, and the busy ones exit after their
// stream; a closed pool refuses every new stream.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.live -= len(idle)
	p.mu.Unlock()
	for _, w := range idle {
		w.work <- nil
	}
}

// Workers returns the number of live workers (busy or idle).
func (p *Pool) Workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

type worker struct {
	work  chan *Stream // capacity 1: a dispatch never blocks
	timer *time.Timer
}

// run hands st to a worker and reports whether one took it. It never
// blocks on a worker.
func (p *Pool) run(st *Stream) bool {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.work <- st
		return true
	}
	if p.closed || p.live >= p.max {
		p.mu.Unlock()
		return false
	}
	p.live++
	p.mu.Unlock()
	go p.loop(&worker{work: make(chan *Stream, 1)}, st)
	return true
}

// loop serves streams until the worker idles out or the pool closes.
func (p *Pool) loop(w *worker, st *Stream) {
	for st != nil {
		st.serve()
		st = p.next(w)
	}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// next parks w and returns its next stream, or nil when it should exit.
func (p *Pool) next(w *worker) *Stream {
	p.mu.Lock()
	if p.closed {
		p.live--
		p.mu.Unlock()
		return nil
	}
	p.idle = append(p.idle, w)
	p.mu.Unlock()
	if w.timer == nil {
		w.timer = time.NewTimer(p.idleFor)
	} else {
		w.timer.Reset(p.idleFor)
	}
	select {
	case st := <-w.work:
		w.timer.Stop()
		return st
	case <-w.timer.C:
	}
	p.mu.Lock()
	for i, x := range p.idle {
		if x == w {
			copy(p.idle[i:], p.idle[i+1:])
			p.idle[len(p.idle)-1] = nil
			p.idle = p.idle[:len(p.idle)-1]
			p.live--
			p.mu.Unlock()
			return nil
		}
	}
	p.mu.Unlock()
	return <-w.work // taken by run (or Close) while the timer fired
}
