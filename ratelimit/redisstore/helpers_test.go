package redisstore

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/internal/redistest"
	"github.com/spillwayhq/spillway/ratelimit"
)

// The Redis the tests use: SPILLWAY_REDIS_ADDR (default 127.0.0.1:6379) if
// it answers PING; otherwise a test fails when SPILLWAY_REDIS_REQUIRED=1
// (CI) and falls back to miniredis elsewhere.
var (
	realOnce sync.Once
	realAddr string // "" when no real Redis answers
)

func sharedRedisAddr() string {
	realOnce.Do(func() {
		addr := os.Getenv("SPILLWAY_REDIS_ADDR")
		if addr == "" {
			addr = "127.0.0.1:6379"
		}
		c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, MaxRetries: -1, DialerRetries: 1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if c.Ping(ctx).Err() == nil {
			realAddr = addr
		}
	})
	return realAddr
}

// backend is a Redis for one test: the shared real one, or a miniredis.
type backend struct {
	addr string
	mr   *miniredis.Miniredis // nil for real Redis
}

func (b backend) real() bool { return b.mr == nil }

func testBackend(t testing.TB) backend {
	t.Helper()
	if addr := sharedRedisAddr(); addr != "" {
		return backend{addr: addr}
	}
	if redistest.Required() {
		t.Fatalf("SPILLWAY_REDIS_REQUIRED=1 but no Redis answers PING at SPILLWAY_REDIS_ADDR")
	}
	mr := miniredis.RunT(t)
	return backend{addr: mr.Addr(), mr: mr}
}

// newClient returns a client for addr, closed when the test ends. Its own
// retries are off: the Store bounds every call by its Timeout.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true,
		DialTimeout: 2 * time.Second, PoolSize: 64}) // a busy machine may be slow to accept; a dead server refuses at once
	t.Cleanup(func() { c.Close() })
	return c
}

// testPrefix is a key prefix no other test uses: tests share the server
// and flush nothing.
func testPrefix(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "rltest-" + hex.EncodeToString(b[:])
}

// newStore builds a Store and closes it when the test ends.
func newStore(t testing.TB, c redis.UniversalClient, spec ratelimit.Spec, cfg Config) *Store {
	t.Helper()
	st, err := New(c, spec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// goroutines returns a baseline for checkNoLeak.
func goroutines() int { return runtime.NumGoroutine() }

// checkNoLeak fails t unless the goroutine count settles back to at most
// before within 10 s (polling every 10 ms; a loaded machine may take
// seconds to run them to their end).
func checkNoLeak(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines: %d before, %d after; stacks:\n%s", before, n, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blackhole is a TCP server that accepts connections, reads and never
// answers: a Redis that hangs.
type blackhole struct {
	l    net.Listener
	mu   sync.Mutex
	read int
	cs   []net.Conn
	wg   sync.WaitGroup
}

func newBlackhole(t testing.TB) *blackhole {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{l: l}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.cs = append(b.cs, c)
			b.mu.Unlock()
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				r := bufio.NewReader(c)
				buf := make([]byte, 4096)
				for {
					n, err := r.Read(buf)
					b.mu.Lock()
					b.read += n
					b.mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(b.close)
	return b
}

func (b *blackhole) bytesRead() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.read
}

func (b *blackhole) close() {
	b.l.Close()
	b.mu.Lock()
	for _, c := range b.cs {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *blackhole) addr() string { return b.l.Addr().String() }

// must fails t on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testCall is a decision for a batch built by a test: key of st at now
// (the caller clock's), cost, under par (nil: the rule's own).
func testCall(st *Store, par *params, key string, now float64, cost int) *call {
	if par == nil {
		par = st.base
	}
	c := newCall().(*call)
	c.now = now
	c.add(st, par, key, cost, false)
	c.deadline = time.Now().Add(5 * time.Second)
	return c
}

// sendBatch sends calls as one batch of e and waits for their answers.
func sendBatch(e *engine, calls []*call) {
	w := &worker{}
	w.batch = append(w.batch, calls...)
	e.send(context.Background(), w)
	for _, c := range calls {
		<-c.done
	}
}
