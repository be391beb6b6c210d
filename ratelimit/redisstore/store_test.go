package redisstore

import (
	"context"
	"errors"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
)

var gcra = ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 100, Per: 1}

func TestNewValidates(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	cases := []struct {
		client redis.UniversalClient
		spec   ratelimit.Spec
		cfg    Config
		want   error
		field  string
	}{
		{nil, gcra, Config{Rule: "r"}, ErrConfig, "client"},
		{c, gcra, Config{}, ErrConfig, "Rule"},
		{c, gcra, Config{Rule: "a{b"}, ErrConfig, "Rule"},
		{c, gcra, Config{Rule: strings.Repeat("r", MaxRuleLen+1)}, ErrConfig, "Rule"},
		{c, gcra, Config{Rule: "r", Prefix: "p}"}, ErrConfig, "Prefix"},
		{c, gcra, Config{Rule: "r", Timeout: -1}, ErrConfig, "Timeout"},
		{c, gcra, Config{Rule: "r", Timeout: MaxTimeout + 1}, ErrConfig, "Timeout"},
		{c, gcra, Config{Rule: "r", TTLMargin: -0.5}, ErrConfig, "TTLMargin"},
		{c, gcra, Config{Rule: "r", QueueSize: -1}, ErrConfig, "QueueSize"},
		{c, gcra, Config{Rule: "r", QueueSize: MaxQueueSize + 1}, ErrConfig, "QueueSize"},
		{c, gcra, Config{Rule: "r", MaxBatch: MaxMaxBatch + 1}, ErrConfig, "MaxBatch"},
		{c, gcra, Config{Rule: "r", Workers: MaxWorkers + 1}, ErrConfig, "Workers"},
		{c, ratelimit.Spec{Rate: 0, Per: 1}, Config{Rule: "r"}, ratelimit.ErrInvalidLimit, "Rate"},
		{c, ratelimit.Spec{Algorithm: ratelimit.AlgLeakyQueue, Rate: 1, Per: 1, Burst: MaxEntries + 1}, Config{Rule: "r"}, ratelimit.ErrInvalidLimit, "Burst"},
		{c, ratelimit.Spec{Algorithm: ratelimit.AlgSlidingLog, Rate: MaxEntries + 1, Per: 1}, Config{Rule: "r"}, ratelimit.ErrInvalidLimit, "Rate"},
	}
	for i, tc := range cases {
		st, err := New(tc.client, tc.spec, tc.cfg)
		if err == nil {
			st.Close()
			t.Errorf("case %d: no error, want %v naming %s", i, tc.want, tc.field)
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("case %d: %v, want %v naming %s", i, err, tc.want, tc.field)
		}
	}
}

func TestRedisKey(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	mk := func(rule string) *Store {
		st, err := New(c, gcra, Config{Rule: rule, Prefix: "p", Workers: 1})
		must(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := mk("user-default"), mk("login")
	long := strings.Repeat("x", 10000)
	// tag returns what Redis Cluster hashes: the text between the first '{'
	// and the first '}' after it.
	tag := func(k string) string {
		i := strings.IndexByte(k, '{')
		j := strings.IndexByte(k[i+1:], '}')
		return k[i+1 : i+1+j]
	}
	if got := a.RedisKey("u42"); got != "p:{u42}:user-default" {
		t.Errorf("RedisKey(u42) = %q, want the seed's layout p:{u42}:user-default", got)
	}
	seen := map[string]string{}
	for _, k := range []string{"u42", "", "a}b", "a}c", "a{b", "#u42", "#", long, long + "y", strings.Repeat("é", 64), strings.Repeat("é", 65)} {
		ka, kb := a.RedisKey(k), b.RedisKey(k)
		if tag(ka) != tag(kb) {
			t.Errorf("key %.20q: rules get different hash tags %q and %q", k, tag(ka), tag(kb))
		}
		if len(ka) > len("p:{}:user-default")+MaxRawKeyLen {
			t.Errorf("key %.20q: Redis key is %d bytes", k, len(ka))
		}
		if !strings.HasSuffix(ka, "}:user-default") || !strings.HasPrefix(ka, "p:{") || strings.ContainsAny(tag(ka), "{}") {
			t.Errorf("key %.20q: Redis key %q breaks the layout", k, ka)
		}
		if prev, dup := seen[ka]; dup {
			t.Errorf("keys %.20q and %.20q share the Redis key %q", prev, k, ka)
		}
		seen[ka] = k
	}
	if got := a.RedisKey(long); len(got) != len("p:{#}:user-default")+32 {
		t.Errorf("hashed key %q, want '#' and 32 hex digits", got)
	}
}

// TestHostileKeysAreIndependent: keys that would break the hash tag or are
// huge are stored apart, and decide as usual.
func TestHostileKeysAreIndependent(t *testing.T) {
	be := testBackend(t)
	st := newStore(t, newClient(t, be.addr), ratelimit.Spec{Rate: 1, Per: 1e9, Burst: 1}, Config{Rule: "r", Prefix: testPrefix(t), Timeout: 5})
	keys := []string{"a}b", "a}c", "a", strings.Repeat("k", 100000), strings.Repeat("k", 100001)}
	for _, k := range keys {
		d, err := st.AllowN(context.Background(), k, 0, 1)
		must(t, err)
		if !d.Allowed {
			t.Errorf("first request for %.10q refused: its state is shared with another key", k)
		}
	}
	for _, k := range keys {
		d, err := st.AllowN(context.Background(), k, 0, 1)
		must(t, err)
		if d.Allowed {
			t.Errorf("second request for %.10q allowed, want refused (burst 1)", k)
		}
	}
}

// ttlSpecs are short limits: each key is redundant within 0.5 s.
var ttlSpecs = []struct {
	spec ratelimit.Spec
	ms   int64 // the longest TTL the rule allows, margin excluded
}{
	{ratelimit.Spec{Algorithm: ratelimit.AlgGCRA, Rate: 10, Per: 1, Burst: 1}, 100},
	{ratelimit.Spec{Algorithm: ratelimit.AlgTokenBucket, Rate: 10, Per: 1, Burst: 1}, 100},
	{ratelimit.Spec{Algorithm: ratelimit.AlgLeakyMeter, Rate: 10, Per: 1, Burst: 1}, 100},
	{ratelimit.Spec{Algorithm: ratelimit.AlgLeakyQueue, Rate: 10, Per: 1, Burst: 1}, 100},
	{ratelimit.Spec{Algorithm: ratelimit.AlgFixedWindow, Rate: 1, Per: 0.5}, 500},
	{ratelimit.Spec{Algorithm: ratelimit.AlgSlidingLog, Rate: 1, Per: 0.5}, 500},
	{ratelimit.Spec{Algorithm: ratelimit.AlgSlidingCounter, Rate: 1, Per: 0.25}, 500},
}

// TestKeysExpire: right after a decision the key has a TTL of at most the
// time to become redundant plus the margin, and then it is gone.
func TestKeysExpire(t *testing.T) {
	be := testBackend(t)
	client := newClient(t, be.addr)
	const margin = 500 // ms
	for _, tc := range ttlSpecs {
		t.Run(tc.spec.Algorithm.Name(), func(t *testing.T) {
			if be.real() {
				t.Parallel() // each waits ~1 s of real time
			}
			st := newStore(t, client, tc.spec, Config{Rule: "ttl", Prefix: testPrefix(t), Timeout: 5, TTLMargin: margin / 1000.0})
			ctx := context.Background()
			// Every TTL is at least the margin: read within half of it, the
			// key cannot have expired yet.
			var key string
			pttl, _ := ttlRead(t, client, st, "k", margin/2*time.Millisecond, func(k string) {
				key = st.RedisKey(k)
				d, err := st.AllowN(ctx, k, 0, 1)
				must(t, err)
				if !d.Allowed {
					t.Fatalf("first request refused: %+v", d)
				}
			})
			if ms := pttl.Milliseconds(); ms <= 0 || ms > tc.ms+margin {
				t.Fatalf("PTTL %v right after the decision, want in (0, %d ms]", pttl, tc.ms+margin)
			}
			if be.mr != nil {
				be.mr.FastForward(time.Duration(tc.ms+margin+1) * time.Millisecond)
			}
			deadline := time.Now().Add(10 * time.Second)
			for client.Exists(ctx, key).Val() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("key %s still there 10 s later", key)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// ttlRead runs decide on a fresh key (name-1, name-2, …) and reads the
// PTTL of its Redis key right after, until the two took at most quick: a
// real Redis's TTL runs down meanwhile, by at most the time they took, and
// a loaded machine may stall for seconds. It returns that PTTL and how long
// the decision and the read took; after 10 slow tries it fails t.
func ttlRead(t *testing.T, c redis.UniversalClient, st *Store, name string, quick time.Duration, decide func(key string)) (pttl, took time.Duration) {
	t.Helper()
	for try := 1; ; try++ {
		key := name + "-" + strconv.Itoa(try)
		start := time.Now()
		decide(key)
		pttl, err := c.PTTL(context.Background(), st.RedisKey(key)).Result()
		must(t, err)
		if took := time.Since(start); took <= quick {
			return pttl, took
		} else if try == 10 {
			t.Fatalf("a decision and a PTTL took over %v ten times in a row (last %v)", quick, took)
		}
	}
}

// scriptServer returns a Redis of this test's own (redis-server, or
// miniredis where there is none and Redis is not required), so that
// flushing its scripts disturbs no other test.
func scriptServer(t *testing.T) string {
	if _, err := exec.LookPath("redis-server"); err == nil || redistest.Required() {
		return redistest.Start(t).Addr()
	}
	return miniredis.RunT(t).Addr()
}

// TestNoScriptFallback: on a server that has never seen the script, and
// again after SCRIPT FLUSH, EVALSHA fails with NOSCRIPT and the decision is
// re-sent with EVAL, which loads the script for the next ones.
func TestNoScriptFallback(t *testing.T) {
	client := newClient(t, scriptServer(t))
	st := newStore(t, client, gcra, Config{Rule: "noscript", Timeout: 5})
	ctx := context.Background()
	decide := func(wantReloads uint64) {
		t.Helper()
		d, err := st.AllowN(ctx, "k", 0, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("decision: %+v, %v", d, err)
		}
		if got := st.Stats().Reloads; got != wantReloads {
			t.Fatalf("%d NOSCRIPT reloads, want %d", got, wantReloads)
		}
	}
	decide(1) // a fresh server: NOSCRIPT, then EVAL
	decide(1) // cached now
	must(t, client.ScriptFlush(ctx).Err())
	decide(2)
	decide(2)
	must(t, client.ScriptFlush(ctx).Err())
	must(t, st.Load(ctx))
	decide(2) // preloaded
}

func TestCloseStopsWorkers(t *testing.T) {
	be := testBackend(t)
	before := goroutines() // a miniredis's own goroutines are counted in
	client := redis.NewClient(&redis.Options{Addr: be.addr, ContextTimeoutEnabled: true})
	st, err := New(client, gcra, Config{Rule: "close", Prefix: testPrefix(t), Timeout: 5, Workers: 8})
	must(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var ok atomic.Int64
	for g := range 64 {
		wg.Go(func() {
			for range 200 {
				_, err := st.AllowN(context.Background(), string(rune('a'+g%26)), 0, 1)
				if err == nil {
					ok.Add(1)
					continue
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	// Close while the goroutines are busy (after 1000 decisions: a loaded
	// machine may take seconds over them).
	for deadline := time.Now().Add(30 * time.Second); ok.Load() < 1000 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	st.Close()
	wg.Wait()
	// Calls racing Close fail (ErrClosed, or their pipeline was cut off):
	// all with an error a fail mode recognises.
	for _, err := range errs {
		if !errors.Is(err, ratelimit.ErrStoreUnavailable) {
			t.Errorf("error %v does not wrap ErrStoreUnavailable", err)
		}
	}
	client.Close()
	t.Logf("%d decided, %d failed around Close", ok.Load(), len(errs))
	if ok.Load() < 1000 {
		t.Fatalf("only %d decisions before Close", ok.Load())
	}
	if _, err := st.AllowN(context.Background(), "k", 0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("AllowN after Close: %v, want ErrClosed", err)
	}
	checkNoLeak(t, before)
}

// TestTimeout: a Redis that never answers costs each call its Timeout, and
// no goroutine outlives Close. (Never answering, it would hold a call
// forever: the generous bounds on the time taken allow for a loaded
// machine.)
func TestTimeout(t *testing.T) {
	before := goroutines()
	bh := newBlackhole(t)
	client := redis.NewClient(&redis.Options{Addr: bh.addr(), MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	st, err := New(client, gcra, Config{Rule: "timeout", Timeout: 0.02})
	must(t, err)
	start := time.Now()
	_, err = st.AllowN(context.Background(), "k", 0, 1)
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("AllowN took %v with a 20 ms timeout", el)
	}
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("AllowN: %v, want ErrTimeout wrapping ErrStoreUnavailable", err)
	}
	// A ctx that ends first wins over the Timeout.
	st2, err := New(client, gcra, Config{Rule: "timeout", Timeout: 30})
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = st2.AllowN(ctx, "k", 0, 1)
	// The ctx's end and the pipeline's deadline (the same instant) race:
	// either error will do.
	if el := time.Since(start); el > 10*time.Second || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout)) ||
		!errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("AllowN with a 30 ms ctx: %v after %v", err, el)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := st2.AllowN(cctx, "k", 0, 1); !errors.Is(err, context.Canceled) || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("AllowN with a cancelled ctx: %v", err)
	}
	// Each of the two calls that waited was either abandoned by its caller
	// or answered with an error at its deadline, whichever came first.
	if s1, s2 := st.Stats(), st2.Stats(); s1.Abandoned+s1.Errors+s2.Abandoned+s2.Errors != 2 || s1.Decisions+s2.Decisions != 0 {
		t.Errorf("Stats %+v and %+v, want two calls abandoned or failed", s1, s2)
	}
	st.Close()
	st2.Close()
	client.Close()
	bh.close()
	checkNoLeak(t, before)
}

// TestQueueFull: with one worker stuck on a Redis that hangs and the queue
// (size 1) taken, the next call fails at once with ErrQueueFull: while the
// other two still wait (their Timeout, a minute, cannot pass first).
func TestQueueFull(t *testing.T) {
	bh := newBlackhole(t)
	client := redis.NewClient(&redis.Options{Addr: bh.addr(), MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
	defer client.Close()
	st, err := New(client, gcra, Config{Rule: "full", Timeout: 60, QueueSize: 1, Workers: 1})
	must(t, err)
	errc := make(chan error, 2)
	call := func() {
		_, err := st.AllowN(context.Background(), "k", 0, 1)
		errc <- err
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	go call() // taken by the worker, which then hangs on the server
	waitFor("the worker to write to the server", func() bool { return bh.bytesRead() > 0 })
	go call() // waits in the queue
	waitFor("the queue to fill", func() bool { return len(st.eng.queue) == 1 })
	start := time.Now()
	if _, err := st.AllowN(context.Background(), "k", 0, 1); !errors.Is(err, ErrQueueFull) || !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Fatalf("third call: %v, want ErrQueueFull", err)
	}
	select {
	case err := <-errc:
		t.Fatalf("a pending call ended (%v) before the third was refused: the refusal waited", err)
	default:
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("ErrQueueFull took %v, want at once", el)
	}
	// The hung server goes away, ending the stuck round trip at once (Close
	// alone would wait for its deadline, a minute here); the queued call
	// fails on the dead server or is failed by Close.
	bh.close()
	st.Close()
	for range 2 {
		if err := <-errc; !errors.Is(err, ratelimit.ErrStoreUnavailable) {
			t.Errorf("pending call: %v, want an error wrapping ErrStoreUnavailable", err)
		}
	}
	if s := st.Stats(); s.QueueFull != 1 {
		t.Errorf("Stats %+v, want QueueFull 1", s)
	}
}

func TestParseReplyRejectsMalformed(t *testing.T) {
	gcraPar := &params{alg: ratelimit.AlgGCRA, d: 3, perS: 3e6}
	queuePar := &params{alg: ratelimit.AlgLeakyQueue, d: 1, perS: 1e6}
	for i, tc := range []struct {
		p *params
		v []int64
	}{
		{gcraPar, nil},
		{gcraPar, []int64{1, 2}},
		{gcraPar, []int64{1, 2, 3, 4}},
		{gcraPar, []int64{-1, 2, 3}},
		{gcraPar, []int64{1, -2, 3}},
		{gcraPar, []int64{0, 2, -2}},
		{queuePar, []int64{1, 2, 0}},
		{queuePar, []int64{1, 2, 0, -5}},
		{queuePar, []int64{0, 2, 7, 5}},
	} {
		if _, err := parseReply(tc.p, 1000, tc.v); !errors.Is(err, errReply) {
			t.Errorf("case %d: %v, want errReply", i, err)
		}
	}
	// Refused, Remaining 3, Reset 3 ticks = 1 µs, never.
	d, err := parseReply(gcraPar, 1000, []int64{6, 3, -1})
	if err != nil || d.Allowed || d.Remaining != 3 || !math.IsInf(d.RetryAfter, 1) || d.Reset != 1e-6 || d.Delay != 0 {
		t.Fatalf("parseReply: %+v, %v", d, err)
	}
	// Allowed, Remaining 2, Reset 250 ms, a delay of 100 ms from 7 s.
	d, err = parseReply(queuePar, 7_000_000, []int64{5, 250_000, 0, 100_000})
	if err != nil || !d.Allowed || d.Remaining != 2 || d.RetryAfter != 0 || d.Reset != 0.25 || d.Delay != 0.1 || d.Start != 7.1 {
		t.Fatalf("parseReply: %+v, %v", d, err)
	}
}

func TestClusterSlot(t *testing.T) {
	// CRC-16/XMODEM's check value is 0x31C3; the slots of "foo" and "bar"
	// are the ones Redis's CLUSTER KEYSLOT reports.
	for in, want := range map[string]uint16{"123456789": 0x31C3 & 16383, "foo": 12182, "bar": 5061, "": 0} {
		if got := clusterSlot(in); got != want {
			t.Errorf("clusterSlot(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestSplitCut: the items that may not share a script call (another slot
// or hash tag, another caller-clock instant, too many units for a looping
// script, too many parameter sets) go to separate chunks; the rest share
// one; a request of several rules is one part per slot (tag).
func TestSplitCut(t *testing.T) {
	gcraPar := &params{alg: ratelimit.AlgGCRA}
	logPar := &params{alg: ratelimit.AlgSlidingLog, units: true}
	type it struct {
		tag  string
		slot uint16
		cost int
		par  *params
	}
	mk := func(now float64, items ...it) *call {
		c := newCall().(*call)
		c.now = now
		for i, x := range items {
			c.items = append(c.items, item{tag: x.tag, slot: x.slot, cost: x.cost, par: x.par, idx: uint16(i)})
		}
		return c
	}
	g := func(tag string, slot uint16) it { return it{tag, slot, 1, gcraPar} }
	many := make([]*call, maxParams+1)
	for i := range many {
		many[i] = mk(0, it{"a", 0, 1, &params{alg: ratelimit.AlgGCRA}})
	}
	cases := []struct {
		name      string
		e         *engine
		calls     []*call
		parts     int
		wantParts []int // items per part
		want      []chunk
	}{
		{"standalone: one chunk", &engine{grouping: groupAll},
			[]*call{mk(0, g("a", 1)), mk(0, g("b", 2), g("c", 3)), mk(0, g("a", 1))}, 3, []int{1, 2, 1}, []chunk{{0, 3}}},
		{"cluster: by slot", &engine{grouping: groupSlot},
			[]*call{mk(0, g("a", 7)), mk(0, g("b", 2)), mk(0, g("c", 7))}, 3, []int{1, 1, 1}, []chunk{{0, 1}, {1, 3}}},
		{"cluster: a request split by slot", &engine{grouping: groupSlot},
			[]*call{mk(0, g("a", 7), g("b", 2), g("c", 7))}, 2, []int{1, 2}, []chunk{{0, 1}, {1, 2}}},
		{"ring: by tag", &engine{grouping: groupTag},
			[]*call{mk(0, g("b", 0)), mk(0, g("a", 0)), mk(0, g("b", 0))}, 3, []int{1, 1, 1}, []chunk{{0, 1}, {1, 3}}},
		{"caller clock: by now", &engine{grouping: groupAll, callerClock: true},
			[]*call{mk(1, g("a", 0)), mk(1, g("a", 0)), mk(2, g("a", 0))}, 3, []int{1, 1, 1}, []chunk{{0, 2}, {2, 3}}},
		{"looping script: by units", &engine{grouping: groupAll},
			[]*call{mk(0, it{"a", 0, 4000, logPar}), mk(0, it{"a", 0, 96, logPar}), mk(0, it{"a", 0, 0, logPar}),
				mk(0, it{"a", 0, 9000, logPar}), mk(0, it{"a", 0, 5, gcraPar})},
			5, []int{1, 1, 1, 1, 1}, []chunk{{0, 2}, {2, 3}, {3, 5}}},
		{"parameter sets", &engine{grouping: groupAll}, many, len(many), nil, []chunk{{0, maxParams}, {maxParams, maxParams + 1}}},
	}
	for _, tc := range cases {
		parts := tc.e.split(tc.calls, nil)
		if len(parts) != tc.parts {
			t.Errorf("%s: %d parts, want %d", tc.name, len(parts), tc.parts)
			continue
		}
		for i, n := range tc.wantParts {
			if got := parts[i].hi - parts[i].lo; got != n {
				t.Errorf("%s: part %d has %d items, want %d", tc.name, i, got, n)
			}
		}
		got := tc.e.cut(parts, nil)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: chunks %v, want %v", tc.name, got, tc.want)
		}
		for _, ch := range got {
			first := parts[ch.lo].c.items[parts[ch.lo].lo]
			for _, p := range parts[ch.lo:ch.hi] {
				for _, x := range p.c.items[p.lo:p.hi] {
					if tc.e.compareItems(first, x) != 0 {
						t.Errorf("%s: chunk %v mixes groups", tc.name, ch)
					}
				}
			}
		}
	}
}

// TestRing: a sharded client other than Cluster (go-redis Ring) gets one
// script call per hash tag, and stays exact under concurrency.
func TestRing(t *testing.T) {
	be := testBackend(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": be.addr, "b": be.addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { ring.Close() })
	st := newStore(t, ring, ratelimit.Spec{Rate: 10, Per: 1e9}, Config{Rule: "ring", Prefix: testPrefix(t), Timeout: 10})
	if st.eng.grouping != groupTag {
		t.Fatalf("grouping %d for a Ring, want groupTag", st.eng.grouping)
	}
	var next, admitted, failed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= 1000; i = next.Add(1) {
				d, err := st.AllowN(context.Background(), "k"+strconv.Itoa(int(i%10)), 0, 1)
				if err != nil {
					failed.Add(1)
				} else if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 || admitted.Load() != 100 {
		t.Fatalf("admitted %d with %d errors, want 100 (10 keys × 10) and none", admitted.Load(), failed.Load())
	}
}

// TestKeyOfAnotherType: a key holding another algorithm's state (a rule
// whose algorithm changed under the same id) reads as empty and is
// replaced, instead of failing the decisions it is batched with.
func TestKeyOfAnotherType(t *testing.T) {
	be := testBackend(t)
	client := newClient(t, be.addr)
	ctx := context.Background()
	for alg := ratelimit.AlgTokenBucket; alg <= ratelimit.AlgGCRA; alg++ {
		spec := ratelimit.Spec{Algorithm: alg, Rate: 5, Per: 1000}
		for _, other := range []string{"string", "hash", "zset"} {
			prefix := testPrefix(t)
			st := newStore(t, client, spec, Config{Rule: "changed", Prefix: prefix, Timeout: 5})
			key := st.RedisKey("k")
			switch other {
			case "string":
				must(t, client.Set(ctx, key, "garbage", time.Minute).Err())
			case "hash":
				must(t, client.HSet(ctx, key, "x", "1").Err())
			case "zset":
				must(t, client.ZAdd(ctx, key, redis.Z{Score: 1, Member: "m"}).Err())
			}
			fresh := newStore(t, client, ratelimit.Spec{Rate: 5, Per: 1000}, Config{Rule: "fresh", Prefix: prefix, Timeout: 5})
			calls := []*call{testCall(fresh, nil, "k", 0, 1), testCall(st, nil, "k", 0, 1), testCall(fresh, nil, "k", 0, 1)}
			sendBatch(st.eng, calls)
			for i, c := range calls {
				if it := c.items[0]; it.err != nil || !it.d.Allowed {
					t.Errorf("%s over a %s: call %d: %+v, %v", spec.Algorithm.Name(), other, i, it.d, it.err)
				}
			}
			if d, err := st.AllowN(ctx, "k", 0, 1); err != nil || !d.Allowed || d.Remaining > 4 {
				t.Errorf("%s over a %s, then again: %+v, %v; want its own state", spec.Algorithm.Name(), other, d, err)
			}
		}
	}
}
