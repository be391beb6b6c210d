package proxy

import (
	"context"
	"sync"
	"time"
)

// exchangeCtx is the context of one HTTP/1.1 connection's exchanges with
// its upstream, reused from one exchange to the next until one is
// cancelled (the client went away, or the request timed out): then the
// connection makes a new one. It has an AfterFunc method, which upstream
// calls directly, so watching it costs no allocation (a
// context.WithCancel and context.AfterFunc cost six per exchange).
// It has no deadline and no values.
type exchangeCtx struct {
	mu       sync.Mutex
	err      error
	done     chan struct{} // made by the first Done
	f        func()        // the function AfterFunc scheduled, until it runs or is stopped
	stopFn   func() bool   // x.stop, made once
	cancelFn func()        // x.cancel, made once
}

func newExchangeCtx() *exchangeCtx {
	x := &exchangeCtx{}
	x.stopFn, x.cancelFn = x.stop, x.cancel
	return x
}

func (x *exchangeCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (x *exchangeCtx) Value(any) any               { return nil }

func (x *exchangeCtx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		x.done = make(chan struct{})
		if x.err != nil {
			close(x.done)
		}
	}
	return x.done
}

func (x *exchangeCtx) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// AfterFunc schedules f to run when x is cancelled (at once, on its own
// goroutine, if it already is). One function at a time: a connection has
// one exchange at a time.
func (x *exchangeCtx) AfterFunc(f func()) func() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.err != nil {
		go f()
		return x.stopFn
	}
	x.f = f
	return x.stopFn
}

// stop unschedules the function; false when it already ran (or none was).
func (x *exchangeCtx) stop() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	had := x.f != nil
	x.f = nil
	return had
}

// cancel ends x and runs the scheduled function.
func (x *exchangeCtx) cancel() {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = context.Canceled
	f := x.f
	x.f = nil
	if x.done != nil {
		close(x.done)
	}
	x.mu.Unlock()
	if f != nil {
		f()
	}
}

var _ context.Context = (*exchangeCtx)(nil)
