package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// lazyCounters are counter children of one family, addressed by a string
// label value (an endpoint, a reason code) and a small index (a kind, a
// class), created on first use. Keys live in a copy-on-write map that
// the request path reads without a lock: after the first use of a (key,
// index) pair, get takes no lock and allocates nothing. At most max keys
// get children of their own; the others share the key "other".
type lazyCounters struct {
	max    int
	slots  int
	create func(key string, slot int) prometheus.Counter // called under mu

	keys  atomic.Pointer[map[string]*lazyKey] // copy on write, under mu
	other *lazyKey

	mu      sync.Mutex // serialises changes to keys and every child's creation
	retired bool       // guarded by mu: the series are deleted, create none
}

// lazyKey holds one key's children by index; a nil entry is not created
// yet. Set under lazyCounters.mu.
type lazyKey struct {
	label string
	slot  []atomic.Pointer[prometheus.Counter]
}

// discard counts what a retired observer is still told.
var discard prometheus.Counter = prometheus.NewCounter(prometheus.CounterOpts{Name: "spillway_discarded"})

func newLazyCounters(max, slots int, create func(key string, slot int) prometheus.Counter) *lazyCounters {
	l := &lazyCounters{max: max, slots: slots, create: create, other: newLazyKey("other", slots)}
	empty := map[string]*lazyKey{}
	l.keys.Store(&empty)
	return l
}

func newLazyKey(label string, slots int) *lazyKey {
	return &lazyKey{label: label, slot: make([]atomic.Pointer[prometheus.Counter], slots)}
}

// get returns the child of key and slot (0 ≤ slot < slots), creating it
// on first use.
func (l *lazyCounters) get(key string, slot int) prometheus.Counter {
	cur := *l.keys.Load()
	e := cur[key]
	if e == nil && len(cur) >= l.max {
		e = l.other
	}
	var c *prometheus.Counter
	if e != nil {
		c = e.slot[slot].Load()
	}
	if c == nil {
		c = l.resolve(key, e, slot)
	}
	return *c
}

// resolve returns the child of key (or of "other", e) and slot, adding
// the key and creating the child when they do not exist. Children are
// created only under mu and only for keys in the map (or other), so
// prune and retire, which delete under mu, never leave a series behind.
func (l *lazyCounters) resolve(key string, e *lazyKey, slot int) *prometheus.Counter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.retired {
		return &discard
	}
	if e != l.other {
		e = l.addLocked(key)
	}
	if c := e.slot[slot].Load(); c != nil {
		return c
	}
	c := l.create(e.label, slot)
	e.slot[slot].Store(&c)
	return &c
}

// addLocked returns key's entry, adding it when the cap allows and
// returning other when it does not.
func (l *lazyCounters) addLocked(key string) *lazyKey {
	cur := *l.keys.Load()
	if e := cur[key]; e != nil {
		return e
	}
	if len(cur) >= l.max {
		return l.other
	}
	next := make(map[string]*lazyKey, len(cur)+1)
	for k, e := range cur {
		next[k] = e
	}
	e := newLazyKey(key, l.slots)
	next[key] = e
	l.keys.Store(&next)
	return e
}

// retire marks l retired and runs del (which deletes the series): a late
// get then creates none.
func (l *lazyCounters) retire(del func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retired = true
	del()
}

// prune forgets the keys keep does not report, calling del for each of
// their children. A caller still holding a pruned key's child counts into
// a deleted series.
func (l *lazyCounters) prune(keep func(key string) bool, del func(key string, slot int)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := *l.keys.Load()
	var next map[string]*lazyKey
	for k, e := range cur {
		if keep(k) {
			continue
		}
		if next == nil {
			next = make(map[string]*lazyKey, len(cur))
			for k2, e2 := range cur {
				next[k2] = e2
			}
		}
		delete(next, k)
		for s := range e.slot {
			if e.slot[s].Load() != nil {
				del(k, s)
			}
		}
	}
	if next != nil {
		l.keys.Store(&next)
	}
}
