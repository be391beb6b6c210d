package proxy

import (
	"errors"
	"io"
	"sync"

	"github.com/spillwayhq/spillway/chain"
)

// replay keeps a request body, as the upstream reads it, so that a failed
// attempt can be sent again: every byte read from the client is kept, up
// to limit, and each attempt reads from the start of what is kept, then
// on from the client. A body longer than limit stops being kept the
// moment it passes it; from then on the request cannot be replayed.
//
// Its buffer comes from a pool when the request starts and goes back when
// it ends (release): a connection between requests holds none, so the
// memory it takes is bounded by the requests in flight × limit.
//
// The HTTP/2 engine's transport may still be reading an attempt's body in
// its own goroutine after the attempt failed: each attempt has its own
// reader (an epoch), a stale one reads errBodyGone, and the mutex keeps
// the two from touching the buffer at once; rmu keeps them from reading
// the client at once, without holding mu (a retry's decision does not
// wait for a slow client's next bytes).
type replay struct {
	mu    sync.Mutex
	rmu   sync.Mutex
	src   io.Reader
	kept  *[]byte
	limit int
	whole bool   // kept holds every byte read so far
	eof   bool   // src has ended
	epoch uint32 // the current attempt
	req   uint32 // the current request (the replay is reused)
	lost  bool   // a stale attempt read bytes past limit: the body is broken
}

// errBodyLost fails an attempt whose body a stale attempt's read cut (its
// bytes passed the limit, so they were neither kept nor sent).
var errBodyLost = errors.New("proxy: request body lost to an abandoned attempt")

// replayReader is one attempt's view of a replay.
type replayReader struct {
	r          *replay
	epoch, req uint32
	pos        int
}

// replayBufs holds buffers for replays (their capacity is what the last
// user grew them to; each is capped by its limit when in use).
var replayBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// start begins keeping src, up to limit bytes (limit ≤ 0: nothing is kept
// and the request is never replayable).
func (r *replay) start(src io.Reader, limit int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.src, r.whole, r.eof, r.lost, r.epoch = src, limit > 0, false, false, r.epoch+1
	r.req++
	r.limit = int(limit)
	if r.whole {
		r.kept = replayBufs.Get().(*[]byte)
		*r.kept = (*r.kept)[:0]
	}
}

// replayable reports whether every byte read so far is kept.
func (r *replay) replayable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.whole
}

// complete reports whether the whole body has been read and kept: an
// attempt sends it without reading the client again.
func (r *replay) complete() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.whole && r.eof
}

// attempt returns the reader of a new attempt; the previous ones go stale.
func (r *replay) attempt(rr *replayReader) io.Reader {
	r.mu.Lock()
	r.epoch++
	*rr = replayReader{r: r, epoch: r.epoch, req: r.req}
	r.mu.Unlock()
	return rr
}

// release ends the request: the buffer goes back to the pool and every
// reader goes stale.
func (r *replay) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kept != nil && cap(*r.kept) <= 1<<20 {
		replayBufs.Put(r.kept)
	}
	r.kept, r.src, r.whole, r.epoch = nil, nil, false, r.epoch+1
}

func (rr *replayReader) Read(p []byte) (int, error) {
	r := rr.r
	if n, done, err := rr.fromKept(p); done {
		return n, err
	}
	r.rmu.Lock() // one read of the client at a time
	defer r.rmu.Unlock()
	if n, done, err := rr.fromKept(p); done { // kept may have grown meanwhile
		return n, err
	}
	// src is read under mu: release, when the request ends, may clear it
	// while a stale attempt's writer (x/net/http2's request-body
	// goroutine outlives the handler) still reads.
	r.mu.Lock()
	src, stale := r.src, rr.epoch != r.epoch
	r.mu.Unlock()
	if stale || src == nil {
		return 0, errBodyGone
	}
	n, err := src.Read(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if rr.req != r.req {
		return 0, errBodyGone // the request is over: its replay may be another's now
	}
	if r.whole {
		if len(*r.kept)+n > r.limit {
			r.whole = false
			r.lost = rr.epoch != r.epoch // bytes the current attempt will not see
		} else {
			*r.kept = append(*r.kept, p[:n]...)
			rr.pos = len(*r.kept)
		}
	}
	if err == io.EOF {
		r.eof = true
	}
	if rr.epoch != r.epoch {
		return 0, errBodyGone // what it read is kept for the current attempt
	}
	return n, err
}

// fromKept serves a read from the kept bytes, or says the attempt is
// stale or the body over; done is false when the client is to be read.
func (rr *replayReader) fromKept(p []byte) (n int, done bool, err error) {
	r := rr.r
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rr.epoch != r.epoch:
		return 0, true, errBodyGone
	case r.lost:
		return 0, true, errBodyLost
	case r.whole && rr.pos < len(*r.kept):
		n := copy(p, (*r.kept)[rr.pos:])
		rr.pos += n
		return n, true, nil
	case r.eof:
		return 0, true, io.EOF
	}
	return 0, false, nil
}

// replayLimit is how much of a request's body is kept for a retry: the
// route's ReplayBytes when the request goes through a policy chain and
// its body (length bytes; -1 chunked, length unknown) may fit, else 0.
func replayLimit(rt *Route, p *chain.Pass, hasBody bool, length int64) int64 {
	if p == nil || !hasBody || rt.ReplayBytes <= 0 || length > rt.ReplayBytes {
		return 0
	}
	return rt.ReplayBytes
}
