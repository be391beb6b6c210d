package redisstore

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

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

func redisRequired() bool { return os.Getenv("SPILLWAY_REDIS_REQUIRED") == "1" }

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
	if redisRequired() {
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

// redisServerBinary returns the redis-server path, or skips t (fails it
// when SPILLWAY_REDIS_REQUIRED=1) if there is none.
func redisServerBinary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if redisRequired() {
			t.Fatalf("SPILLWAY_REDIS_REQUIRED=1 but redis-server is not installed: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	return p
}

// freePort returns a TCP port that is free now, and whose cluster bus port
// (port+10000) is free too when bus is set.
func freePort(t testing.TB, bus bool) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !bus {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		lb, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		lb.Close()
		return port
	}
	t.Fatal("no free port pair found")
	return 0
}

// server is a redis-server process started by a test.
type server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// startServer starts redis-server on a free port in a temporary directory,
// with extra arguments; it is killed when the test ends.
func startServer(t testing.TB, cluster bool, extra ...string) *server {
	t.Helper()
	s := &server{t: t, bin: redisServerBinary(t), port: freePort(t, cluster), dir: t.TempDir()}
	s.args = append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log")}, extra...)
	if cluster {
		s.args = append(s.args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
	}
	t.Cleanup(s.kill)
	s.start()
	return s
}

// start (re)starts the process and waits until it answers PING.
func (s *server) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second) // a loaded machine starts processes slowly
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server on %s did not answer PING; log:\n%s", s.addr(), log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the process at once (SIGKILL), as a crash would.
func (s *server) kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// startCluster starts three cluster-enabled masters and joins them with
// redis-cli --cluster create; it returns their addresses once every node
// reports cluster_state:ok.
func startCluster(t testing.TB) []string {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if redisRequired() {
			t.Fatalf("SPILLWAY_REDIS_REQUIRED=1 but redis-cli is not installed: %v", err)
		}
		t.Skip("redis-cli not installed")
	}
	var addrs []string
	for range 3 {
		addrs = append(addrs, startServer(t, true).addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("cluster node %s not ok: %v %s", a, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return addrs
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
