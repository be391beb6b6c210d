package redisstore

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
)

// TestCluster runs every algorithm on a Redis Cluster of three masters
// started for the test: keys spread over the nodes, a key's rules share a
// slot, each node loads the scripts through the NOSCRIPT fallback, and 64
// goroutines sending 2,000 requests over 20 keys get exactly each key's
// limit of 10.
func TestCluster(t *testing.T) {
	var addrs []string
	for _, s := range redistest.StartCluster(t, 3) {
		addrs = append(addrs, s.Addr())
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	ctx := context.Background()

	// A key's rules share the key's slot.
	a := newStore(t, cc, gcra, Config{Rule: "a"})
	b := newStore(t, cc, gcra, Config{Rule: "b"})
	for _, k := range []string{"u42", "tenant-7", "a}b", "x{y", "a-much-longer-key-" + strconv.Itoa(1<<20)} {
		sa, err := cc.ClusterKeySlot(ctx, a.RedisKey(k)).Result()
		must(t, err)
		sb, err := cc.ClusterKeySlot(ctx, b.RedisKey(k)).Result()
		must(t, err)
		if sa != sb {
			t.Errorf("key %q: rule a in slot %d, rule b in slot %d", k, sa, sb)
		}
		if got := clusterSlot(a.tagOf(k)); int64(got) != sa {
			t.Errorf("key %q: clusterSlot %d, Redis says %d", k, got, sa)
		}
	}

	const keys, perKey, requests = 20, 10, 2000
	var reloads uint64
	for _, spec := range raceSpecs {
		spec.Rate = perKey
		if spec.Burst != 0 {
			spec.Burst = perKey - 1
		}
		t.Run(spec.Algorithm.Name(), func(t *testing.T) {
			st := newStore(t, cc, spec, Config{Rule: "cluster", Prefix: testPrefix(t), Timeout: 10})
			var admitted [keys]atomic.Int64
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= requests {
							return
						}
						d, err := st.AllowN(ctx, "user-"+strconv.Itoa(int(i%keys)), 0, 1)
						switch {
						case err != nil:
							failed.Add(1)
						case d.Allowed:
							admitted[i%keys].Add(1)
						}
					}
				})
			}
			wg.Wait()
			if failed.Load() != 0 {
				t.Fatalf("%d errors", failed.Load())
			}
			for k := range admitted {
				if n := admitted[k].Load(); n != perKey {
					t.Errorf("key user-%d: admitted %d, want %d", k, n, perKey)
				}
			}
			reloads += st.Stats().Reloads
		})
	}
	// One script serves every algorithm: the first store to reach a node
	// loads it there.
	if reloads == 0 {
		t.Errorf("no NOSCRIPT fallback on a fresh cluster")
	}

	clusterJoint(t, cc)

	// The keys landed on every master.
	var mu sync.Mutex
	sizes := map[string]int64{}
	must(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		mu.Lock()
		sizes[c.Options().Addr] = n
		mu.Unlock()
		return err
	}))
	for addr, n := range sizes {
		if n == 0 {
			t.Errorf("master %s holds no key: %v", addr, sizes)
		}
	}
	if len(sizes) != 3 {
		t.Errorf("%d masters, want 3", len(sizes))
	}
}

// clusterJoint: a request under two rules on the Cluster. Their keys in
// one slot (one user key): a refusal holds the other rule back. In two
// slots, each slot decides and commits on its own: the other rule spends
// (see Stores.AllowJoint).
func clusterJoint(t *testing.T, cc *redis.ClusterClient) {
	t.Helper()
	ctx := context.Background()
	stores, rs := jointRules(t, cc, StoresConfig{Store: Config{Prefix: testPrefix(t), Timeout: 10}, FloorFactor: -1},
		"{id: x, key: [user], rate: 5, per: 1000h}", "{id: gate, key: [user], rate: 1, per: 1000h, burst: 1}")
	x, gate := rs[0], rs[1]
	gateKey := "g"
	for i := 0; clusterSlot(gateKey) == clusterSlot("v"); i++ {
		gateKey = "g" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		xKey, gateKey string
		left          int // x's units after two requests, the second refused
	}{{"u", "u", 4}, {"v", gateKey, 3}} {
		for i := range 2 {
			items := []ratelimit.JointItem{{Store: x, Key: tc.xKey, Cost: 1}, {Store: gate, Key: tc.gateKey, Cost: 1}}
			stores.AllowJoint(ctx, 0, items)
			if items[0].Err != nil || items[1].Err != nil || !items[0].Decision.Allowed || items[1].Decision.Allowed != (i == 0) {
				t.Fatalf("keys %s and %s, request %d: %+v", tc.xKey, tc.gateKey, i+1, items)
			}
		}
		if got := remaining(t, x, tc.xKey); got != tc.left {
			t.Errorf("keys %s and %s: x has %d left, want %d", tc.xKey, tc.gateKey, got, tc.left)
		}
	}
}
