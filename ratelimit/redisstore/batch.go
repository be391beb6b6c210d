package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
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

// item is one rule's decision in a call.
type item struct {
	st     *Store
	par    *params // the script parameters of the item's class
	rkey   string  // the Redis key
	tag    string  // its hash tag's content
	slot   uint16  // its Cluster slot (grouping by slot only)
	idx    uint16  // its place in the request as the caller gave it
	pidx   uint8   // its parameter set in the script call, from 0 (worker scratch)
	cost   int
	shadow bool
	d      ratelimit.Decision // written by the worker before done
	err    error              // written by the worker before done
}

// call is one queued request: one item (Store.AllowN) or several decided
// together (Stores.AllowJoint). It is recycled through the engine's pool
// when its caller received the answer; an abandoned call is left to the
// collector.
type call struct {
	items    []item
	inline   [1]item
	now      float64   // the caller's now (caller clock only)
	deadline time.Time // when the caller gives up
	state    atomic.Uint32
	done     chan struct{} // capacity 1: one send per use
	timer    *time.Timer   // the caller's timeout, stopped when idle
}

func newCall() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	c := &call{done: make(chan struct{}, 1), timer: t}
	c.items = c.inline[:0]
	return c
}

// add appends an item for key of s, with its hash tag, slot and the
// parameters par.
func (c *call) add(s *Store, par *params, key string, cost int, shadow bool) *item {
	c.items = append(c.items, item{st: s, par: par, cost: cost, shadow: shadow, idx: uint16(len(c.items))})
	it := &c.items[len(c.items)-1]
	it.tag = s.tagOf(key)
	it.rkey = s.head + it.tag + s.tail
	if s.eng.grouping == groupSlot {
		if it.tag != "" {
			it.slot = clusterSlot(it.tag)
		} else {
			it.slot = clusterSlot(it.rkey) // an empty tag: Redis hashes the whole key
		}
	}
	return it
}

// reset empties c for reuse.
func (c *call) reset() {
	clear(c.items)
	c.items = c.items[:0]
}

// claim takes c from its caller for the answer unless the caller gave up,
// and reports whether it did. The worker then counts the outcome and
// wakes the caller with wake; after that c is the caller's again.
func (c *call) claim() bool { return c.state.CompareAndSwap(callPending, callAnswered) }

// wake hands a claimed call back to its caller.
func (c *call) wake() { c.done <- struct{}{} }

// grouping says which items may share one script call.
type grouping uint8

const (
	groupAll  grouping = iota // a standalone server (or Sentinel's master): any keys
	groupSlot                 // Redis Cluster: keys of one slot
	groupTag                  // any other sharded client: keys of one hash tag
)

func groupingOf(client redis.UniversalClient) grouping {
	switch client.(type) {
	case *redis.Client: // standalone, or Sentinel's master
		return groupAll
	case *redis.ClusterClient:
		return groupSlot
	}
	return groupTag
}

// engine sends the calls of one or more Stores to one client: their queue,
// the workers and the pipelines. A Store made by New has its own; the
// Stores of a Stores share one, so that one request's rules (and the
// single decisions of different rules) travel in one script call.
type engine struct {
	client      redis.UniversalClient // immutable
	grouping    grouping              // immutable
	margin      any                   // TTL margin in ms, a string boxed once
	batch       int                   // items per round trip
	workers     int
	callerClock bool // the scripts use the callers' now (tests only)

	queue chan *call
	pool  sync.Pool // of *call

	latency tripLatency // of every pipeline sent

	mu      sync.Mutex // guards refs and the lifecycle below
	refs    int        // open Stores
	ctx     context.Context
	cancel  context.CancelFunc
	stop    chan struct{}
	wg      sync.WaitGroup
	stopped bool // by close: no restart
}

func newEngine(client redis.UniversalClient, cfg Config) *engine {
	e := &engine{client: client, grouping: groupingOf(client),
		margin: strconv.FormatInt(int64(math.Ceil(cfg.TTLMargin*1000)), 10),
		batch:  cfg.MaxBatch, workers: cfg.Workers, queue: make(chan *call, cfg.QueueSize)}
	e.pool.New = newCall
	return e
}

// acquire counts one more open Store, starting the workers for the first.
func (e *engine) acquire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refs++; e.refs == 1 && !e.stopped {
		e.ctx, e.cancel = context.WithCancel(context.Background())
		e.stop = make(chan struct{})
		e.wg.Add(e.workers)
		for range e.workers {
			go e.work(e.ctx, e.stop)
		}
	}
}

// release counts one Store fewer; the last stops the workers, waiting for
// the pipelines out, and fails the calls still queued with ErrClosed.
func (e *engine) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refs--; e.refs > 0 || e.stop == nil {
		return
	}
	close(e.stop)
	e.cancel()
	e.wg.Wait()
	e.stop = nil
	for {
		select {
		case c := <-e.queue:
			e.failAll(c, ErrClosed)
		default:
			return
		}
	}
}

// do queues c and waits for its answer at most wait (or until ctx ends).
// It returns nil when c was answered (the items hold the outcome) and the
// caller then recycles c with put; on an error (ErrQueueFull, or the
// caller gave up: the call is abandoned, and counted by the caller) c is
// not to be touched again.
func (e *engine) do(ctx context.Context, c *call, wait time.Duration) error {
	c.state.Store(callPending)
	c.deadline = time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(c.deadline) {
		c.deadline = dl
	}
	for i := range c.items {
		c.items[i].st.queued.Add(1)
	}
	select {
	case e.queue <- c:
	default:
		for i := range c.items {
			c.items[i].st.queued.Add(-1)
		}
		return ErrQueueFull
	}
	c.timer.Reset(wait)
	select {
	case <-c.done:
		c.timer.Stop()
		return nil
	case <-c.timer.C:
		return e.abandon(c, ErrTimeout)
	case <-ctx.Done():
		c.timer.Stop()
		return e.abandon(c, fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, ctx.Err()))
	}
}

// abandon gives up on c unless its answer has just arrived. An abandoned
// call is skipped by the workers if not sent yet, and is not recycled.
func (e *engine) abandon(c *call, err error) error {
	if c.state.CompareAndSwap(callPending, callAbandoned) {
		return err
	}
	<-c.done // answered: the send follows the state change at once
	return nil
}

// put recycles an answered call.
func (e *engine) put(c *call) {
	c.reset()
	e.pool.Put(c)
}

// failAll answers every item of c with err, counting them.
func (e *engine) failAll(c *call, err error) {
	if !c.claim() {
		return
	}
	for i := range c.items {
		c.items[i].d, c.items[i].err = ratelimit.Decision{}, err
		c.items[i].st.errs.Add(1)
	}
	c.wake()
}

// part is the items c.items[lo:hi] of one call in one group (all of them
// on a standalone server), decided together by one script call.
type part struct {
	c      *call
	lo, hi int
}

// chunk is the parts [lo, hi) of a batch decided by one script call.
type chunk struct{ lo, hi int }

// worker is one batching goroutine's scratch space.
type worker struct {
	batch  []*call
	parts  []part
	chunks []chunk
	cmds   []*redis.IntSliceCmd
	args   []any
	pars   []*params
	stores []*Store
	seen   map[string]struct{} // the keys of the script call being built
}

// work is a worker: it takes the first waiting call, adds whatever else is
// waiting (up to MaxBatch items) without waiting for more, and sends them
// all in one pipeline. Under load, calls pile up while a pipeline is out,
// so the batch grows with concurrency and each round trip carries many
// decisions.
func (e *engine) work(ctx context.Context, stop chan struct{}) {
	defer e.wg.Done()
	w := &worker{batch: make([]*call, 0, e.batch)}
	for {
		w.batch = w.batch[:0]
		var n int
		select {
		case c := <-e.queue:
			w.batch, n = append(w.batch, c), len(c.items)
		case <-stop:
			return
		}
	fill:
		for n < e.batch {
			select {
			case c := <-e.queue:
				w.batch, n = append(w.batch, c), n+len(c.items)
			default:
				break fill
			}
		}
		for _, c := range w.batch {
			for i := range c.items {
				c.items[i].st.queued.Add(-1)
			}
		}
		e.send(ctx, w)
		clear(w.batch) // drop references to recycled calls
	}
}

// send decides the live calls of w.batch: one script call per chunk, all
// chunks in one pipeline, and the chunks that found no script (NOSCRIPT)
// again with EVAL, which also loads it. Chunks whose connection turned out
// dead (see connLost) are sent again on another while their callers still
// wait (see lostRetries).
func (e *engine) send(parent context.Context, w *worker) {
	now := time.Now()
	live := w.batch[:0]
	var last time.Time
	for _, c := range w.batch {
		switch {
		case c.state.Load() != callPending:
			// abandoned: nobody waits for it
		case !now.Before(c.deadline):
			e.failAll(c, ErrTimeout)
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
	ctx, cancel := context.WithDeadline(parent, last)
	defer cancel()

	w.parts = e.split(live, w.parts[:0])
	w.chunks = e.cut(w.parts, w.chunks[:0])
	e.countTrips(w, false)
	e.pipeline(ctx, w, w.chunks, false)
	var lost lostRetries
	for full := false; ; {
		retry, reload, again := w.chunks[:0], false, false
		for i, ch := range w.chunks {
			switch err := w.cmds[i].Err(); {
			case !full && err != nil && redis.HasErrorPrefix(err, "NOSCRIPT"):
				retry, reload = append(retry, ch), true
			case connLost(err) && (again || lost.again(ctx, e.client)):
				retry, again = append(retry, ch), true
			default:
				e.answer(w.parts[ch.lo:ch.hi], w.cmds[i])
			}
		}
		if len(retry) == 0 {
			break
		}
		full = full || reload
		w.chunks = retry
		e.countTrips(w, reload)
		e.pipeline(ctx, w, retry, full)
	}
	for _, c := range live {
		e.finish(c)
	}
	clear(w.cmds)
	clear(w.parts)
	clear(w.args)
}

// split cuts the live calls into parts, one per group of each call (the
// whole call on a standalone server), and orders them so that parts that
// may share a script call are adjacent: by slot or hash tag, stably.
func (e *engine) split(live []*call, parts []part) []part {
	for _, c := range live {
		if e.grouping == groupAll || len(c.items) == 1 {
			parts = append(parts, part{c, 0, len(c.items)})
			continue
		}
		slices.SortStableFunc(c.items, e.compareItems)
		lo := 0
		for i := 1; i <= len(c.items); i++ {
			if i == len(c.items) || e.compareItems(c.items[lo], c.items[i]) != 0 {
				parts = append(parts, part{c, lo, i})
				lo = i
			}
		}
	}
	if e.grouping != groupAll {
		slices.SortStableFunc(parts, func(a, b part) int { return e.compareItems(a.c.items[a.lo], b.c.items[b.lo]) })
	}
	return parts
}

// compareItems orders items by the group that may share a script call.
func (e *engine) compareItems(a, b item) int {
	switch e.grouping {
	case groupSlot:
		return cmp.Compare(a.slot, b.slot)
	case groupTag:
		return cmp.Compare(a.tag, b.tag)
	}
	return 0
}

// maxParams bounds the parameter sets of one script call (their index
// travels in the low 4 bits of an item's argument).
const maxParams = 16

// itemArgs are the arguments of the items of cost below 64, boxed once:
// a pipeline appends them without allocating.
var itemArgs = func() (a [16 * 8 * 64]any) {
	for i := range a {
		a[i] = int64(i)
	}
	return a
}()

// itemArg is the argument v of an item.
func itemArg(v int) any {
	if v < len(itemArgs) {
		return itemArgs[v]
	}
	return int64(v)
}

// cut groups adjacent parts into chunks, each decided by one script call:
// one group (slot or tag), one caller's now under the caller clock, at most
// maxScriptUnits units of cost of the algorithms whose scripts loop per
// unit (a larger part goes alone) and maxParams parameter sets.
func (e *engine) cut(parts []part, chunks []chunk) []chunk {
	lo, units, npars := 0, 0, 0
	var seen [maxParams]*params
	for i, p := range parts {
		u, fresh := 0, 0
		for _, it := range p.c.items[p.lo:p.hi] {
			if it.par.units {
				u += min(max(it.cost, 1), maxScriptUnits)
			}
			if !slices.Contains(seen[:npars], it.par) {
				fresh++
			}
		}
		if i > lo {
			first := parts[lo]
			if e.compareItems(first.c.items[first.lo], p.c.items[p.lo]) != 0 ||
				(e.callerClock && p.c.now != first.c.now) ||
				units+u > maxScriptUnits || npars+fresh > maxParams {
				chunks = append(chunks, chunk{lo, i})
				lo, units, npars = i, 0, 0
			}
		}
		units += u
		for _, it := range p.c.items[p.lo:p.hi] {
			if !slices.Contains(seen[:npars], it.par) && npars < maxParams {
				seen[npars] = it.par
				npars++
			}
		}
	}
	return append(chunks, chunk{lo, len(parts)})
}

// countTrips adds one round trip (and one reload) to every Store with an
// item in w's chunks.
func (e *engine) countTrips(w *worker, reload bool) {
	w.stores = w.stores[:0]
	for _, ch := range w.chunks {
		for _, p := range w.parts[ch.lo:ch.hi] {
			for _, it := range p.c.items[p.lo:p.hi] {
				if !slices.Contains(w.stores, it.st) {
					w.stores = append(w.stores, it.st)
				}
			}
		}
	}
	for _, s := range w.stores {
		s.roundTrips.Add(1)
		if reload {
			s.reloads.Add(1)
		}
	}
	clear(w.stores)
}

// pipeline sends one EVALSHA (or EVAL, if full) per chunk in one round
// trip, leaving the commands in w.cmds.
func (e *engine) pipeline(ctx context.Context, w *worker, chunks []chunk, full bool) {
	pipe := e.client.Pipeline()
	w.cmds = w.cmds[:0]
	w.args = w.args[:0]
	for _, ch := range chunks {
		start := len(w.args)
		e.appendArgs(w, w.parts[ch.lo:ch.hi], full)
		// The command keeps its slice of w.args until the next send.
		cmd := redis.NewIntSliceCmd(ctx, w.args[start:len(w.args):len(w.args)]...)
		_ = pipe.Process(ctx, cmd)
		w.cmds = append(w.cmds, cmd)
	}
	began := time.Now()   // I/O timing at the edge: not a decision's clock
	_, _ = pipe.Exec(ctx) // each command carries its own error
	e.latency.observe(time.Since(began))
}

// appendArgs appends to w.args one script call deciding the items of
// parts (see decideScript): the command, the keys, the call's header and
// parameter sets, and one argument per item.
func (e *engine) appendArgs(w *worker, parts []part, full bool) {
	if full {
		w.args = append(w.args, "eval", theScript.src, 0)
	} else {
		w.args = append(w.args, "evalsha", theScript.sha, 0)
	}
	nkeys := len(w.args) - 1
	keys := 0
	for _, p := range parts {
		for _, it := range p.c.items[p.lo:p.hi] {
			w.args = append(w.args, it.rkey)
			keys++
		}
	}
	w.args[nkeys] = keys
	w.args = append(w.args, "", e.margin, 0)
	if e.callerClock {
		w.args[len(w.args)-3] = strconv.FormatInt(int64(math.Round(parts[0].c.now*1e6)), 10)
	}
	npars := len(w.args) - 1
	w.pars = w.pars[:0]
	for _, p := range parts {
		for i := p.lo; i < p.hi; i++ {
			it := &p.c.items[i]
			j := slices.Index(w.pars, it.par)
			if j < 0 {
				j = len(w.pars)
				w.pars = append(w.pars, it.par)
				w.args = append(w.args, it.par.args[:]...)
			}
			it.pidx = uint8(j)
		}
	}
	w.args[npars] = len(w.pars)
	clear(w.pars)
	if w.seen == nil {
		w.seen = map[string]struct{}{}
	}
	clear(w.seen)
	for _, p := range parts {
		for i := p.lo; i < p.hi; i++ {
			it := &p.c.items[i]
			flags := 0
			if it.shadow {
				flags = 1
			}
			if i < p.hi-1 {
				flags |= 2
			}
			if _, again := w.seen[it.rkey]; again {
				flags |= 4
			} else {
				w.seen[it.rkey] = struct{}{}
			}
			w.args = append(w.args, itemArg(16*(8*max(it.cost, 0)+flags)+int(it.pidx)))
		}
	}
}

// answer stores cmd's reply (or error) in the items of parts.
func (e *engine) answer(parts []part, cmd *redis.IntSliceCmd) {
	v, err := cmd.Result()
	if err == nil {
		err = e.parse(parts, v)
	}
	if err == nil {
		return
	}
	now := time.Now()
	for _, p := range parts {
		for i := p.lo; i < p.hi; i++ {
			it := &p.c.items[i]
			if !now.Before(p.c.deadline) {
				it.d, it.err = ratelimit.Decision{}, ErrTimeout // cut off at the caller's deadline
			} else {
				it.d, it.err = ratelimit.Decision{}, fmt.Errorf("%w: %w", ratelimit.ErrStoreUnavailable, err)
			}
		}
	}
}

// parse reads a script's reply into the items of parts (see decideScript).
func (e *engine) parse(parts []part, v []int64) error {
	want := 1
	for _, p := range parts {
		for _, it := range p.c.items[p.lo:p.hi] {
			want += replyLen(it.par)
		}
	}
	if len(v) != want {
		return errReply
	}
	now, j := v[0], 1
	for _, p := range parts {
		for i := p.lo; i < p.hi; i++ {
			it := &p.c.items[i]
			n := replyLen(it.par)
			d, err := parseReply(it.par, now, v[j:j+n])
			j += n
			if err != nil {
				return err
			}
			it.d, it.err = d, nil
		}
	}
	return nil
}

// finish answers c, counting its items' outcomes on their Stores.
func (e *engine) finish(c *call) {
	if !c.claim() {
		return
	}
	for i := range c.items {
		if it := &c.items[i]; it.err == nil {
			it.st.decisions.Add(1)
		} else {
			it.st.errs.Add(1)
		}
	}
	c.wake()
}

var errReply = errors.New("redisstore: malformed script reply")

// replyLen is the number of integers the script returns for an item of p.
func replyLen(p *params) int {
	if p.alg == ratelimit.AlgLeakyQueue {
		return 4
	}
	return 3
}

// parseReply reads one item's integers: allowed + 2·remaining, reset and
// retryAfter in ticks (−1: never), and for the leaky queue the delay in
// ticks (−1: none, a query or a refusal); now is the script's instant in
// µs.
func parseReply(p *params, now int64, v []int64) (ratelimit.Decision, error) {
	if len(v) != replyLen(p) || v[0] < 0 || v[1] < 0 || v[2] < -1 || now < 0 {
		return ratelimit.Decision{}, errReply
	}
	d := ratelimit.Decision{Allowed: v[0]&1 == 1, Remaining: int(min(v[0]>>1, math.MaxInt32*2+1)), Reset: p.seconds(v[1])}
	switch {
	case d.Allowed:
	case v[2] == -1:
		d.RetryAfter = math.Inf(1)
	default:
		d.RetryAfter = p.seconds(v[2])
	}
	if len(v) == 4 && v[3] != -1 {
		if v[3] < 0 || !d.Allowed {
			return ratelimit.Decision{}, errReply
		}
		q, r := v[3]/p.d, v[3]%p.d
		d.Delay = p.seconds(v[3])
		d.Start = float64(now+q)/1e6 + p.seconds(r)
	}
	return d, nil
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
