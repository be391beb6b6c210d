package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustHeavyHitters(t testing.TB, cfg HotKeysConfig) *HeavyHitters {
	t.Helper()
	h, err := NewHeavyHitters(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// hhZipf returns a Zipf stream of n keys over keys distinct keys and the true
// count of each key.
func hhZipf(seed uint64, n, keys int) ([]string, map[string]uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.1, 1, uint64(keys-1))
	stream := make([]string, n)
	truth := map[string]uint64{}
	for i := range stream {
		k := fmt.Sprint("tenant-", z.Uint64())
		stream[i] = k
		truth[k]++
	}
	return stream, truth
}

// The true heavy hitters of a Zipf stream are found, no estimate is below
// the true count, and at most about δ of the keys are over ε·N_s (N_s: the
// units of the key's shard).
func TestHeavyHittersZipf(t *testing.T) {
	const n, keys, k = 200_000, 20_000, 16
	stream, truth := hhZipf(1, n, keys)
	type kc struct {
		key   string
		count uint64
	}
	var all []kc
	for key, c := range truth {
		all = append(all, kc{key, c})
	}
	slices.SortFunc(all, func(a, b kc) int {
		if a.count != b.count {
			return int(b.count) - int(a.count)
		}
		return strings.Compare(a.key, b.key)
	})
	for _, width := range []int{64, 1024} {
		h := mustHeavyHitters(t, HotKeysConfig{Width: width, Depth: 4, TopK: k, Shards: 4})
		shardN := map[*hhShard]float64{}
		for i, key := range stream {
			h.Observe(key, 1, float64(i)*1e-4)
			sh, _ := h.hash(key)
			shardN[sh]++
		}
		top := h.Top(nil)
		if len(top) != k {
			t.Fatalf("width %d: Top returned %d keys, want %d", width, len(top), k)
		}
		got := map[string]uint64{}
		for _, hk := range top {
			got[hk.Key] = hk.Count
		}
		for _, want := range all[:10] {
			if c, ok := got[want.key]; !ok {
				t.Errorf("width %d: true heavy hitter %s (%d) missing from Top %v", width, want.key, want.count, top)
			} else if c < want.count {
				t.Errorf("width %d: %s: Top says %d, true count %d: under-counted", width, want.key, c, want.count)
			}
		}
		eps := math.E / float64(width)
		over, worst := 0, 0.0
		for key, c := range truth {
			est := h.Estimate(key)
			if est < c {
				t.Fatalf("width %d: %s: estimate %d below the true count %d", width, key, est, c)
			}
			sh, _ := h.hash(key)
			excess := float64(est-c) / (eps * shardN[sh])
			worst = max(worst, excess)
			if excess > 1 {
				over++
			}
		}
		// δ = e^−4 ≈ 1.8 % per key; allow 3 %.
		if frac := float64(over) / float64(len(truth)); frac > 0.03 {
			t.Errorf("width %d: %.1f %% of keys over the bound ε·N_s, δ is %.1f %%", width, 100*frac, 100*math.Exp(-4))
		}
		t.Logf("width %d: top 3 %v; %d of %d keys over ε·N_s; largest error %.2f·ε·N_s", width, top[:3], over, len(truth), worst)
	}
}

// Step table: conservative update, queries, hotness from MinCount, and the
// top-k set taking in a key that outgrows its smallest member.
func TestHeavyHittersSteps(t *testing.T) {
	h := mustHeavyHitters(t, HotKeysConfig{Width: 1 << 16, Depth: 4, TopK: 2, Shards: 1, MinCount: 5})
	for i, s := range []struct {
		key  string
		n    int
		est  uint64
		hot  bool
		want []string // Top's keys after the step
	}{
		{"a", 3, 3, false, []string{"a"}},
		{"a", 3, 6, true, []string{"a"}},
		{"b", 1, 1, false, []string{"a", "b"}},
		{"c", 1, 1, false, []string{"a", "b"}}, // not above the smallest (b: 1)
		{"c", 1, 2, false, []string{"a", "c"}}, // now it is: b leaves
		{"c", 0, 2, false, []string{"a", "c"}}, // a query counts nothing
		{"c", 10, 12, true, []string{"c", "a"}},
		{"b", 1, 2, false, []string{"c", "a"}}, // b's count kept in the sketch
	} {
		est, hot := h.Observe(s.key, s.n, 0)
		var keys []string
		for _, hk := range h.Top(nil) {
			keys = append(keys, hk.Key)
		}
		if est != s.est || hot != s.hot || !slices.Equal(keys, s.want) {
			t.Errorf("step %d %+v: est %d hot %v top %v", i, s, est, hot, keys)
		}
	}
}

// Counts reset (Decay 0) or halve (Decay 0.5) at the end of each interval.
func TestHeavyHittersDecay(t *testing.T) {
	reset := mustHeavyHitters(t, HotKeysConfig{Width: 1 << 12, Shards: 1, Interval: 10})
	reset.Observe("a", 7, 1)
	if e, _ := reset.Observe("a", 1, 9.5); e != 8 {
		t.Errorf("within the interval: %d, want 8", e)
	}
	if e, _ := reset.Observe("a", 1, 10); e != 1 {
		t.Errorf("next interval: %d, want 1 (reset)", e)
	}
	half := mustHeavyHitters(t, HotKeysConfig{Width: 1 << 12, Shards: 1, Interval: 10, Decay: 0.5})
	half.Observe("a", 40, 0)
	half.Observe("b", 1, 0)
	half.Tick(25) // two intervals: ×0.25
	top := half.Top(nil)
	if len(top) != 1 || top[0] != (HotKey{"a", 10}) {
		t.Errorf("after two halvings: %v, want [{a 10}] (b decayed to 0)", top)
	}
	if e, _ := half.Observe("a", 1, 29); e != 11 {
		t.Errorf("estimate %d, want 11", e)
	}
}

// Concurrent observers: no estimate falls below its true count (run with
// -race), and a tracked key's Observe does not allocate.
func TestHeavyHittersConcurrent(t *testing.T) {
	h := mustHeavyHitters(t, HotKeysConfig{})
	stream, truth := hhZipf(2, 40_000, 2000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(stream); i += 4 {
				h.Observe(stream[i], 1, 0)
			}
			h.Top(nil)
		}()
	}
	wg.Wait()
	for key, c := range truth {
		if est := h.Estimate(key); est < c {
			t.Fatalf("%s: estimate %d below the true count %d", key, est, c)
		}
	}
	hot := h.Top(nil)[0].Key
	if n := testing.AllocsPerRun(100, func() { h.Observe(hot, 1, 0) }); n != 0 {
		t.Errorf("Observe of a tracked key: %v allocations", n)
	}
}

func TestNewHeavyHittersErrors(t *testing.T) {
	for _, c := range []struct {
		cfg   HotKeysConfig
		field string
	}{
		{HotKeysConfig{Width: 8}, "Width"},
		{HotKeysConfig{Depth: 17}, "Depth"},
		{HotKeysConfig{TopK: -1}, "TopK"},
		{HotKeysConfig{Shards: 3}, "Shards"},
		{HotKeysConfig{Interval: -1}, "Interval"},
		{HotKeysConfig{Decay: 1}, "Decay"},
	} {
		_, err := NewHeavyHitters(c.cfg)
		if !errors.Is(err, ErrInvalidKeyedConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: error %v, want one naming %s", c.cfg, err, c.field)
		}
	}
}
