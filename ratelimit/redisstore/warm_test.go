package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// TestStoresWarm: on a fresh Redis of the test's own (no script loaded
// yet), the first decision after Warm needs no NOSCRIPT retry (Reloads
// 0); without Warm it is re-sent with EVAL (Reloads 1). Against an address
// that refuses connections Warm fails with ErrStoreUnavailable.
func TestStoresWarm(t *testing.T) {
	ctx := context.Background()
	for _, warm := range []bool{true, false} {
		srv := redistest.Start(t)
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { client.Close() })
		st, err := NewStores(client, StoresConfig{Store: Config{Timeout: 5}})
		must(t, err)
		t.Cleanup(func() { st.Close() })
		if warm {
			must(t, st.Warm(ctx))
		}
		k, err := st.ForRule(rules.Rule{ID: "warm", Spec: ratelimit.Spec{Rate: 10, Per: 1}})
		must(t, err)
		if d, err := k.AllowN(ctx, "u", 0, 1); err != nil || !d.Allowed {
			t.Fatalf("warm %v: first decision %+v, %v", warm, d, err)
		}
		want := uint64(1)
		if warm {
			want = 0
		}
		if got := k.(*RuleStore).Redis().Stats().Reloads; got != want {
			t.Errorf("warm %v: %d script reloads for the first decision, want %d", warm, got, want)
		}
	}
	client := redis.NewClient(&redis.Options{Addr: redistest.FreeAddr(t), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { client.Close() })
	st, err := NewStores(client, StoresConfig{})
	must(t, err)
	if err := st.Warm(ctx); !errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Errorf("Warm with nothing listening: %v, want ErrStoreUnavailable", err)
	}
}
