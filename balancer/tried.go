package balancer

import (
	"context"
	"sync"
)

// MaxTried is the number of endpoints a Tried remembers; later ones are
// not recorded (a call rarely makes more attempts than that).
const MaxTried = 4

// Tried records the endpoints a call's attempts have used, so that a retry
// (or a hedge) goes to another endpoint when there is one: the retrying
// layer (client.Transport) puts one in the call's context with WithTried,
// the balancing layer (balancerhttp) avoids and records addresses with it.
// It is safe for concurrent use (hedged attempts run at once). A transport
// that reads it says so with a method AvoidsTried() bool returning true;
// client.Transport adds a Tried to calls it may retry or hedge only then
// (it costs two allocations per call).
type Tried struct {
	mu    sync.Mutex
	addrs [MaxTried]string
	n     int
}

type triedKey struct{}

// WithTried returns ctx carrying a new, empty Tried.
func WithTried(ctx context.Context) (context.Context, *Tried) {
	t := new(Tried)
	return context.WithValue(ctx, triedKey{}, t), t
}

// TriedFrom returns the Tried in ctx, or nil.
func TriedFrom(ctx context.Context) *Tried {
	t, _ := ctx.Value(triedKey{}).(*Tried)
	return t
}

// Add records addr (once; beyond MaxTried addresses nothing more is kept).
func (t *Tried) Add(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range t.addrs[:t.n] {
		if a == addr {
			return
		}
	}
	if t.n < MaxTried {
		t.addrs[t.n] = addr
		t.n++
	}
}

// Has reports whether addr was recorded.
func (t *Tried) Has(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range t.addrs[:t.n] {
		if a == addr {
			return true
		}
	}
	return false
}

// Len returns the number of addresses recorded.
func (t *Tried) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
