// Package redistest starts redis-server processes of a test's own: on a
// free loopback port, in the test's temporary directory, without
// persistence, killed when the test ends. A test that stops, kills or
// restarts Redis uses one of these, never the shared Redis other packages
// test against.
//
// Without a redis-server binary the test is skipped, unless
// SPILLWAY_REDIS_REQUIRED=1 (CI sets it): then it fails.
//
//	srv := redistest.Start(t)
//	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
//	srv.Kill()    // as a crash would: SIGKILL
//	srv.Restart() // the same port and arguments, empty
package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Required reports whether SPILLWAY_REDIS_REQUIRED=1: tests that need Redis
// fail instead of skipping when it is missing.
func Required() bool { return os.Getenv("SPILLWAY_REDIS_REQUIRED") == "1" }

// Server is a redis-server process started by a test.
type Server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// Start starts redis-server on a free port with extra arguments (after the
// defaults, so they win) and waits until it answers PING.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, false, extra)
}

func start(t testing.TB, cluster bool, extra []string) *Server {
	t.Helper()
	s := newServer(t, cluster)
	s.args = append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", s.dir, "--logfile", s.logPath()}, extra...)
	if cluster {
		s.args = append(s.args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
	}
	s.run()
	return s
}

// newServer picks the binary, a port and a directory; the process, once
// run, is killed when the test ends.
func newServer(t testing.TB, bus bool) *Server {
	t.Helper()
	s := &Server{t: t, bin: lookPath(t, "redis-server"), port: freePort(t, bus), dir: t.TempDir()}
	t.Cleanup(s.Kill)
	return s
}

// Addr returns the server's address, 127.0.0.1:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Log returns what the server has written to its log file so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath())
	return string(b)
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

// Kill stops the process at once (SIGKILL), as a crash would; its port
// then refuses connections. Killing a killed server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// Restart kills the server if it runs, starts it again on the same port
// with the same arguments (and no data: nothing is persisted), and waits
// until it answers PING. Like t.Fatal, it must be called from the
// goroutine running the test.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.run()
}

// run starts the process and waits until it answers PING.
func (s *Server) run() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second) // a loaded machine starts processes slowly
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer PING; log:\n%s", s.Addr(), s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lookPath returns the path of a Redis binary, or skips t (fails it when
// Required) if there is none.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if Required() {
			t.Fatalf("SPILLWAY_REDIS_REQUIRED=1 but %s is not installed: %v", name, err)
		}
		t.Skip(name + " not installed")
	}
	return p
}

// FreeAddr returns a loopback address, 127.0.0.1:port, on which nothing
// listened a moment ago: a Redis that is not there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(freePort(t, false))
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
