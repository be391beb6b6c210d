package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
)

// sentinelMaster is the master name the test's sentinels monitor.
const sentinelMaster = "mymaster"

// sentinelWait polls cond every 50 ms until it returns "" (done) or the
// deadline passes, then fails t with cond's last complaint.
func sentinelWait(t *testing.T, what string, limit time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, limit, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sentinelHammer sends requests decisions of cost 1 over keys keys
// (prefix + "-" + i) from 64 goroutines and returns the admitted count per
// key; any error fails t.
func sentinelHammer(t *testing.T, st *Store, prefix string, keys, requests int) []int64 {
	t.Helper()
	admitted := make([]atomic.Int64, keys)
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= requests {
					return
				}
				d, err := st.AllowN(context.Background(), prefix+"-"+strconv.Itoa(i%keys), 0, 1)
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case d.Allowed:
					admitted[i%keys].Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d errors, the first: %v", n, firstErr.Load())
	}
	out := make([]int64, keys)
	for k := range admitted {
		out[k] = admitted[k].Load()
	}
	return out
}

// TestSentinel runs the store through go-redis's Sentinel client
// (UniversalOptions.MasterName) on processes started for the test: a
// master, a replica and three sentinels (quorum 2).
//
// Before the failover, 64 goroutines sending 2,000 requests over 20 keys
// with a limit of 10 get exactly 10 per key, for GCRA and the sliding log,
// and the keys are on the master. Each store then exhausts one more key;
// WAIT makes sure the replica has every write. SENTINEL FAILOVER promotes
// the replica; once every sentinel names it as the master, decisions
// continue through the same client and stores (the first ones may fail
// while the client switches), and what is asserted after the failover:
// the exhausted keys are still exhausted (the replicated state moved with
// the role, so no limit resets), and a new round of 2,000 requests over 20
// fresh keys again admits exactly 10 per key, written on the new master.
// No goroutine outlives the stores and the client.
func TestSentinel(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	mc := redis.NewClient(&redis.Options{Addr: master.Addr()})
	t.Cleanup(func() { mc.Close() })
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	sentinelWait(t, "replication", 10*time.Second, func() string {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return fmt.Sprintf("replica: %v %q", err, info)
		}
		return ""
	})

	var sentinels []*redistest.Server
	var addrs []string
	for range 3 {
		s := redistest.StartSentinel(t, sentinelMaster, master.Addr(), 2)
		sentinels = append(sentinels, s)
		addrs = append(addrs, s.Addr())
	}
	// The sentinels must know the replica (from the master's INFO) before a
	// failover can pick it.
	for _, s := range sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		sentinelWait(t, "sentinel "+s.Addr()+" sees the replica", 15*time.Second, func() string {
			reps, err := sc.Replicas(ctx, sentinelMaster).Result()
			if err != nil || len(reps) != 1 {
				return fmt.Sprintf("%v %v", reps, err)
			}
			r := reps[0]
			if r["port"] != strconv.Itoa(replica.Port()) || strings.Contains(r["flags"], "down") ||
				strings.Contains(r["flags"], "disconnected") || r["master-link-status"] != "ok" {
				return fmt.Sprintf("%v", r)
			}
			return ""
		})
		sc.Close()
	}

	before := goroutines()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: sentinelMaster, Addrs: addrs,
		ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 2 * time.Second, PoolSize: 64})
	if _, ok := rdb.(*redis.Client); !ok {
		t.Fatalf("NewUniversalClient with MasterName returned %T, want the failover *redis.Client", rdb)
	}
	closed := false
	closeClient := func() {
		if !closed {
			closed = true
			rdb.Close()
		}
	}
	t.Cleanup(closeClient)

	const keys, perKey, requests = 20, 10, 2000
	algs := []ratelimit.Spec{
		{Algorithm: ratelimit.AlgGCRA, Rate: perKey, Per: 1e9},
		{Algorithm: ratelimit.AlgSlidingLog, Rate: perKey, Per: 1e9},
	}
	prefix := testPrefix(t)
	stores := make([]*Store, len(algs))
	for i, spec := range algs {
		// Timeout 10 s: exactness is checked without spurious timeouts on a
		// loaded machine; the failover probes below bound their own calls.
		stores[i] = newStore(t, rdb, spec, Config{Rule: spec.Algorithm.Name(), Prefix: prefix, Timeout: 10})
	}
	round := func(t *testing.T, st *Store, keyPrefix string, on *redis.Client) {
		got := sentinelHammer(t, st, keyPrefix, keys, requests)
		for k, n := range got {
			if n != perKey {
				t.Errorf("key %s-%d: admitted %d, want %d", keyPrefix, k, n, perKey)
			}
		}
		for k := range keys {
			key := st.RedisKey(keyPrefix + "-" + strconv.Itoa(k))
			if n, err := on.Exists(ctx, key).Result(); err != nil || n != 1 {
				t.Errorf("%s on %s: exists %d, %v", key, on.Options().Addr, n, err)
			}
		}
	}
	exhausted := func(st *Store) ratelimit.Decision {
		var d ratelimit.Decision
		for range perKey + 1 {
			var err error
			d, err = st.AllowN(ctx, "exhausted", 0, 1)
			must(t, err)
		}
		return d
	}
	for i, st := range stores {
		t.Run("before/"+algs[i].Algorithm.Name(), func(t *testing.T) {
			round(t, st, "before", mc)
			if d := exhausted(st); d.Allowed {
				t.Errorf("the %dth request on one key was allowed: %+v", perKey+1, d)
			}
		})
	}
	if t.Failed() {
		return
	}
	// Every write so far is on the replica before it is promoted.
	if n, err := mc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 5000: %d, %v", n, err)
	}
	reloadsBefore := stores[0].Stats().Reloads + stores[1].Stats().Reloads

	sc := redis.NewSentinelClient(&redis.Options{Addr: addrs[0]})
	must(t, sc.Failover(ctx, sentinelMaster).Err())
	sc.Close()
	for _, a := range addrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: a})
		sentinelWait(t, "sentinel "+a+" names the new master", 20*time.Second, func() string {
			m, err := sc.GetMasterAddrByName(ctx, sentinelMaster).Result()
			if err != nil || len(m) != 2 || m[1] != strconv.Itoa(replica.Port()) {
				return fmt.Sprintf("%v %v", m, err)
			}
			return ""
		})
		sc.Close()
	}
	sentinelWait(t, "the promoted replica is a master", 10*time.Second, func() string {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "role:master") {
			return fmt.Sprintf("%v %q", err, info)
		}
		return ""
	})
	// The client follows: probe with a fresh key (each probe bounded by
	// its ctx) until the store decides again.
	for i, st := range stores {
		probe := 0
		sentinelWait(t, algs[i].Algorithm.Name()+" decides after the failover", 20*time.Second, func() string {
			probe++
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			if _, err := st.AllowN(pctx, "probe-"+strconv.Itoa(probe), 0, 1); err != nil {
				return err.Error()
			}
			return ""
		})
	}
	for i, st := range stores {
		t.Run("after/"+algs[i].Algorithm.Name(), func(t *testing.T) {
			if d := exhausted(st); d.Allowed {
				t.Errorf("the exhausted key was allowed after the failover (state lost): %+v", d)
			}
			round(t, st, "after", rc)
		})
	}
	// The promoted replica never ran the scripts (Redis replicates their
	// effects), so it answered NOSCRIPT and the stores re-sent with EVAL.
	t.Logf("NOSCRIPT reloads after the failover: %d", stores[0].Stats().Reloads+stores[1].Stats().Reloads-reloadsBefore)

	for _, st := range stores {
		st.Close()
	}
	closeClient()
	checkNoLeak(t, before)
}
