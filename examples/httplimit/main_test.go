package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/maintest"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

func TestEmbeddedRules(t *testing.T) {
	set, err := rules.Parse("rules.yaml", defaultRules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := httplimit.New(set, httplimit.Config{}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range set.Rules {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, " "); got != "per-ip login per-user per-ip-strict" {
		t.Errorf("rules %s", got)
	}
}

func TestBadRulesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("rules:\n- {id: a, rate: 1, per: soon}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"-rules", path, "-addr", "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Errorf("got %v, want an error naming %s:2", err, path)
	}
}

// The test's Redis: SPILLWAY_REDIS_ADDR (default 127.0.0.1:6379) when it
// answers PING; else the test fails if SPILLWAY_REDIS_REQUIRED=1 and uses
// a miniredis otherwise (as package redisstore's tests do).
func testRedis(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("SPILLWAY_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if c.Ping(ctx).Err() == nil {
		return addr
	}
	if os.Getenv("SPILLWAY_REDIS_REQUIRED") == "1" {
		t.Fatalf("SPILLWAY_REDIS_REQUIRED=1 but no Redis answers PING at %s", addr)
	}
	return miniredis.RunT(t).Addr()
}

// The server in memory (no flags but the address) and on Redis (-redis):
// three requests a minute per IP pass, the fourth is refused, and
// /debug/hotkeys and /metrics show the client's IP as the hot key of
// per-ip (4 requests) and of the shadow rule per-ip-strict (3: the walk
// stopped at per-ip's refusal). On Redis the state is in the key
// PREFIX:{127.0.0.1}:per-ip.
func TestServe(t *testing.T) {
	// os/signal starts its watcher goroutine, for good, at the first
	// Notify: start it before goroutines are counted.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	signal.Stop(sig)
	for _, tc := range []struct {
		name  string
		redis bool
	}{{"memory", false}, {"redis", true}} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-addr", "127.0.0.1:0"}
			var rdb *redis.Client
			var prefix string
			var addr string
			if tc.redis {
				addr = testRedis(t) // a miniredis's goroutines are not the server's
			}
			before := runtime.NumGoroutine()
			if tc.redis {
				var b [6]byte
				_, _ = rand.Read(b[:])
				prefix = "rltest-" + hex.EncodeToString(b[:])
				args = append(args, "-redis", addr, "-redis-prefix", prefix, "-redis-timeout", "5s") // a loaded machine's Redis calls may take a second
				rdb = redis.NewClient(&redis.Options{Addr: addr})
				defer rdb.Close()
			}
			ctx, cancel := context.WithCancel(context.Background())
			addrc := make(chan string, 1)
			errc := make(chan error, 1)
			go func() { errc <- serve(ctx, args, func(a string) { addrc <- a }) }()
			var base string
			select {
			case a := <-addrc:
				base = "http://" + a
			case err := <-errc:
				cancel()
				t.Fatal(err)
			}
			client := &http.Client{}
			get := func(path string) (int, string) {
				t.Helper()
				resp, err := client.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			for i, want := range []int{200, 200, 200, 429} {
				if code, body := get("/"); code != want {
					t.Errorf("request %d: %d %s, want %d", i+1, code, body, want)
				}
			}
			_, body := get("/debug/hotkeys")
			wantJSON := `{"rules":[{"rule":"per-ip","keys":[{"key":"127.0.0.1","count":4}]},{"rule":"login","keys":[]},` +
				`{"rule":"per-user","keys":[]},{"rule":"per-ip-strict","keys":[{"key":"127.0.0.1","count":3}]}]}`
			if strings.TrimSpace(body) != wantJSON {
				t.Errorf("/debug/hotkeys:\n%s\nwant\n%s", body, wantJSON)
			}
			_, metrics := get("/metrics")
			for _, line := range []string{
				`spillway_ratelimit_http_hot_key_units{key="127.0.0.1",rule="per-ip"} 4`,
				`spillway_ratelimit_http_decisions_total{outcome="denied",rule="per-ip"} 1`,
			} {
				if !strings.Contains(metrics, line+"\n") {
					t.Errorf("/metrics lacks %s", line)
				}
			}
			if tc.redis {
				// The Redis stores' collector: per-ip's 4 requests went to
				// its Redis store (one may have been abandoned after
				// -redis-timeout on a loaded machine; a decision is counted
				// just after its answer, so look again for up to 10 s).
				sum := func(metrics string) int {
					total := 0
					for _, o := range []string{"decided", "error", "abandoned", "queue_full"} {
						line := `spillway_ratelimit_redis_decisions_total{outcome="` + o + `",rule="per-ip"} `
						n, i := 0, strings.Index(metrics, line)
						if i >= 0 {
							fmt.Sscan(metrics[i+len(line):], &n)
						}
						total += n
					}
					return total
				}
				for deadline := time.Now().Add(10 * time.Second); sum(metrics) != 4 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
					_, metrics = get("/metrics")
				}
				if n := sum(metrics); n != 4 {
					t.Errorf("per-ip: %d decisions asked of Redis, want 4; /metrics:\n%s", n, metrics)
				}
				key := prefix + ":{127.0.0.1}:per-ip"
				if n, err := rdb.Exists(context.Background(), key).Result(); err != nil || n != 1 {
					t.Errorf("Redis key %s: exists %d, %v", key, n, err)
				}
			}
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("serve: %v", err)
			}
			client.CloseIdleConnections()
			if rdb != nil {
				rdb.Close()
			}
			deadline := time.Now().Add(10 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				t.Errorf("%d goroutines before, %d after the server stopped", before, n)
			}
		})
	}
}

// -h prints the usage and exits 0 (it said "flag: help requested" and
// exited 1); a bad flag exits 1.
func TestFlagExits(t *testing.T) { maintest.CheckFlagExits(t, main, "httplimit") }
