package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/ratelimit"
)

// A call's state: pending until a worker answers it (answered) or its
// caller gives up (abandoned), whichever comes first; the loser of that race
// backs off.
const (
	callPending uint32 = iota
	callAnswered
	callAbandoned
)

// call is one queued decision. It is recycled through Store.pool when its
// caller received the answer; an abandoned call is left to the collector.
type call struct {
	rkey     string // the Redis key
	tag      string // its hash tag's content
	slot     uint16 // its Cluster slot (grouping by slot only)
	cost     int
	par      *params   // the script parameters of the call's class
	now      float64   // the caller's now (caller clock only)
	deadline time.Time // when the caller gives up
	state    atomic.Uint32
	d        ratelimit.Decision // written by the worker before done
	err      error              // written by the worker before done
	done     chan struct{}      // capacity 1: one send per use
	timer    *time.Timer        // the caller's timeout, stopped when idle
}

func newCall() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &call{done: make(chan struct{}, 1), timer: t}
}

// prepare fills c for a decision of s.
func (c *call) prepare(s *Store, key string, now float64, cost int) {
	c.tag = s.tagOf(key)
	c.rkey = s.head + c.tag + s.tail
	if s.grouping == groupSlot {
		if c.tag != "" {
			c.slot = clusterSlot(c.tag)
		} else {
			c.slot = clusterSlot(c.rkey) // an empty tag: Redis hashes the whole key
		}
	}
	c.cost, c.now, c.par = cost, now, s.base
	c.state.Store(callPending)
}

// deliver answers c unless its caller gave up, and reports whether it did.
func (c *call) deliver(d ratelimit.Decision, err error) bool {
	if !c.state.CompareAndSwap(callPending, callAnswered) {
		return false
	}
	c.d, c.err = d, err
	c.done <- struct{}{}
	return true
}

// fail answers c with err, counting it.
func (s *Store) fail(c *call, err error) {
	if c.deliver(ratelimit.Decision{}, err) {
		s.errs.Add(1)
	}
}

// grouping says which decisions may share one script call.
type grouping uint8

const (
	groupAll  grouping = iota // a standalone server (or Sentinel's master): any keys
	groupSlot                 // Redis Cluster: keys of one slot
	groupTag                  // any other sharded client: keys of one hash tag
)

// chunk is a run of a batch decided by one script call: batch[lo:hi].
type chunk struct{ lo, hi int }

// worker is one batching goroutine's scratch space.
type worker struct {
	batch  []*call
	chunks []chunk
	cmds   []*redis.Cmd
	keys   []string
	args   []interface{}
}

// work is a worker: it takes the first waiting call, adds whatever else is
// waiting (up to MaxBatch) without waiting for more, and sends them all in
// one pipeline. Under load, calls pile up while a pipeline is out, so the
// batch grows with concurrency and each round trip carries many decisions.
func (s *Store) work() {
	defer s.wg.Done()
	w := &worker{batch: make([]*call, 0, s.batch)}
	for {
		w.batch = w.batch[:0]
		select {
		case c := <-s.queue:
			w.batch = append(w.batch, c)
		case <-s.stop:
			return
		}
	fill:
		for len(w.batch) < s.batch {
			select {
			case c := <-s.queue:
				w.batch = append(w.batch, c)
			default:
				break fill
			}
		}
		s.send(w)
		clear(w.batch) // drop references to recycled calls
	}
}

// send decides the live calls of w.batch: one script call per chunk, all
// chunks in one pipeline, and the chunks that found no script (NOSCRIPT)
// again with EVAL, which also loads it.
func (s *Store) send(w *worker) {
	now := time.Now()
	live := w.batch[:0]
	var last time.Time
	for _, c := range w.batch {
		switch {
		case c.state.Load() != callPending:
			// abandoned: nobody waits for it
		case !now.Before(c.deadline):
			s.fail(c, ErrTimeout)
		default:
			live = append(live, c)
			if c.deadline.After(last) {
				last = c.deadline
			}
		}
	}
	if len(live) == 0 {
		return
	}
	// The pipeline may run until the last caller gives up; after that no
	// one waits for it.
	ctx, cancel := context.WithDeadline(s.ctx, last)
	defer cancel()

	w.chunks = s.split(live, w.chunks[:0])
	s.pipeline(ctx, w, live, w.chunks, false)
	retry := w.chunks[:0]
	for i, ch := range w.chunks {
		if err := w.cmds[i].Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			retry = append(retry, ch)
			continue
		}
		s.answer(live[ch.lo:ch.hi], w.cmds[i])
	}
	if len(retry) > 0 {
		s.reloads.Add(1)
		s.pipeline(ctx, w, live, retry, true)
		for i, ch := range retry {
			s.answer(live[ch.lo:ch.hi], w.cmds[i])
		}
	}
	clear(w.cmds)
}

// split orders live so that calls that may share a script call are
// adjacent and cuts it into chunks: one group (all, one slot or one hash
// tag) and one set of script parameters (one scale) each, with one
// caller's now each under the caller clock, and at most maxUnits units of
// cost each for the algorithms that loop per unit. Calls of one group and
// scale keep their order; a batch whose calls all have one scale (the
// common case, and always without load awareness) is not reordered on a
// standalone server.
func (s *Store) split(live []*call, chunks []chunk) []chunk {
	switch s.grouping {
	case groupAll:
		if mixedParams(live) {
			slices.SortStableFunc(live, func(a, b *call) int { return cmp.Compare(a.par.order(), b.par.order()) })
		}
	case groupSlot:
		slices.SortStableFunc(live, func(a, b *call) int {
			return cmp.Or(cmp.Compare(a.slot, b.slot), cmp.Compare(a.par.order(), b.par.order()))
		})
	case groupTag:
		slices.SortStableFunc(live, func(a, b *call) int {
			return cmp.Or(cmp.Compare(a.tag, b.tag), cmp.Compare(a.par.order(), b.par.order()))
		})
	}
	lo, units := 0, 0
	for i, c := range live {
		u := min(max(c.cost, 1), maxScriptUnits)
		if i > lo {
			first := live[lo]
			if (s.grouping == groupSlot && c.slot != first.slot) ||
				(s.grouping == groupTag && c.tag != first.tag) ||
				!c.par.same(first.par) ||
				(s.callerClock && c.now != first.now) ||
				(s.maxUnits > 0 && units+u > s.maxUnits) {
				chunks = append(chunks, chunk{lo, i})
				lo, units = i, 0
			}
		}
		units += u
	}
	return append(chunks, chunk{lo, len(live)})
}

// pipeline sends one EVALSHA (or EVAL, if full) per chunk in one round trip,
// leaving the commands in w.cmds.
func (s *Store) pipeline(ctx context.Context, w *worker, live []*call, chunks []chunk, full bool) {
	pipe := s.client.Pipeline()
	w.cmds = w.cmds[:0]
	for _, ch := range chunks {
		calls := live[ch.lo:ch.hi]
		w.keys = w.keys[:0]
		// The parameters are boxed once, when built: appending them does
		// not allocate.
		par := calls[0].par
		w.args = append(w.args[:0], "", s.margin, par.args[0], par.args[1], s.base.args[0], s.base.args[1])
		if s.callerClock {
			w.args[0] = luaNumber(calls[0].now)
		}
		for _, c := range calls {
			w.keys = append(w.keys, c.rkey)
			w.args = append(w.args, c.cost)
		}
		// EvalSha and Eval copy keys and args: the scratch slices are free
		// again when they return.
		if full {
			w.cmds = append(w.cmds, pipe.Eval(ctx, s.script.src, w.keys, w.args...))
		} else {
			w.cmds = append(w.cmds, pipe.EvalSha(ctx, s.script.sha, w.keys, w.args...))
		}
	}
	clear(w.args)
	s.roundTrips.Add(1)
	_, _ = pipe.Exec(ctx) // each command carries its own error
}

// answer delivers cmd's reply (or error) to the calls it decided.
func (s *Store) answer(calls []*call, cmd *redis.Cmd) {
	v, err := cmd.Slice()
	if err == nil && len(v) != replyLen*len(calls) {
		err = errReply
	}
	if err != nil {
		now := time.Now()
		for _, c := range calls {
			if !now.Before(c.deadline) {
				s.fail(c, ErrTimeout) // cut off at the caller's deadline
			} else {
				s.fail(c, fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, err))
			}
		}
		return
	}
	var n uint64
	for i, c := range calls {
		d, err := parseReply(v[replyLen*i : replyLen*(i+1)])
		if err != nil {
			s.fail(c, fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, err))
		} else if c.deliver(d, nil) {
			n++
		}
	}
	s.decisions.Add(n)
}

var errReply = errors.New("redisstore: malformed script reply")

// replyLen is the number of integers a script returns per decision, and
// infExp the exponent by which it encodes +Inf.
const (
	replyLen = 10
	infExp   = 99999
)

// parseReply reads one decision's {allowed, remaining, then retryAfter,
// reset, delay and start as mantissa-exponent pairs} (see the scripts' doc).
func parseReply(v []interface{}) (ratelimit.Decision, error) {
	if len(v) != replyLen {
		return ratelimit.Decision{}, errReply
	}
	var n [replyLen]int64
	for i := range n {
		x, ok := v[i].(int64)
		if !ok {
			return ratelimit.Decision{}, errReply
		}
		n[i] = x
	}
	var f [4]float64
	for i := range f {
		m, e := n[2+2*i], n[3+2*i]
		switch {
		case e == infExp:
			f[i] = math.Inf(1)
		case m < -1<<53 || m > 1<<53 || e < -1100 || e > 1100:
			return ratelimit.Decision{}, errReply
		default:
			f[i] = math.Ldexp(float64(m), int(e)-53)
		}
	}
	return ratelimit.Decision{Allowed: n[0] == 1, Remaining: max(int(n[1]), 0),
		RetryAfter: f[0], Reset: f[1], Delay: f[2], Start: f[3]}, nil
}

// crcTable is CRC-16/XMODEM (polynomial 0x1021), the hash of Redis Cluster.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// clusterSlot is Redis Cluster's slot for the hashed part of a key.
func clusterSlot(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc & 16383
}
