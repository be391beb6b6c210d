package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartCluster starts masters cluster-enabled servers (at least 3, as
// redis-cli requires), joins them with redis-cli --cluster create (no
// replicas) and returns them once every node reports cluster_state:ok.
// Without redis-cli the test is skipped, or fails when Required.
func StartCluster(t testing.TB, masters int) []*Server {
	t.Helper()
	cli := lookPath(t, "redis-cli")
	var nodes []*Server
	args := []string{"--cluster", "create"}
	for range masters {
		s := start(t, true, nil)
		nodes = append(nodes, s)
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range nodes {
		waitFor(t, s.Addr(), deadline, func(c *redis.Client) string {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				return ""
			}
			return fmt.Sprintf("cluster node not ok: %v %s", err, info)
		})
	}
	return nodes
}

// StartSentinel starts a sentinel (redis-server sentinel.conf --sentinel)
// on a free port, monitoring the master at addr under name with the given
// quorum. It declares the master down after 1 s and allows 5 s for a
// failover, so that tests fail over quickly. The sentinel rewrites its
// config file, which lives in its own temporary directory.
func StartSentinel(t testing.TB, name, master string, quorum int) *Server {
	t.Helper()
	s := newServer(t, false)
	host, port, _ := strings.Cut(master, ":")
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n", s.port, s.dir, s.logPath()) +
		fmt.Sprintf("sentinel monitor %s %s %s %d\n", name, host, port, quorum) +
		fmt.Sprintf("sentinel down-after-milliseconds %s 1000\n", name) +
		fmt.Sprintf("sentinel failover-timeout %s 5000\n", name)
	path := filepath.Join(s.dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.args = []string{path, "--sentinel"}
	s.run()
	return s
}

// waitFor polls cond with a client of addr every 50 ms until it returns ""
// or the deadline passes, then fails t with its last complaint.
func waitFor(t testing.TB, addr string, deadline time.Time, cond func(*redis.Client) string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for {
		msg := cond(c)
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", addr, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
