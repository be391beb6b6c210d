package redistest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func ping(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	defer c.Close()
	return c.Ping(context.Background()).Err()
}

// A server answers, a killed one refuses connections on its port, a
// restarted one answers on the same port with none of the old data, and a
// second Kill does nothing.
func TestStartKillRestart(t *testing.T) {
	s := Start(t, "--maxmemory", "10mb")
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("PING %s: %v", s.Addr(), err)
	}
	if s.Addr() != "127.0.0.1:"+strconv.Itoa(s.Port()) {
		t.Fatalf("Addr %s, Port %d", s.Addr(), s.Port())
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ConfigGet(ctx, "maxmemory").Result(); err != nil || got["maxmemory"] != "10485760" {
		t.Fatalf("extra argument not applied: maxmemory %v, %v", got, err)
	}
	s.Kill()
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("a killed server's port %s accepts connections", s.Addr())
	}
	s.Kill()
	s.Restart()
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET k after the restart: %v, want redis.Nil (no persistence)", err)
	}
	if !strings.Contains(s.Log(), "Ready to accept connections") {
		t.Errorf("the log does not say the server is ready:\n%s", s.Log())
	}
}

func TestFreeAddrRefuses(t *testing.T) {
	if err := ping(FreeAddr(t)); err == nil {
		t.Fatal("PING to a free address succeeded")
	}
}

// A sentinel started for a master names it.
func TestStartSentinel(t *testing.T) {
	m := Start(t)
	s := StartSentinel(t, "m1", m.Addr(), 1)
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	got, err := c.GetMasterAddrByName(context.Background(), "m1").Result()
	if err != nil || len(got) != 2 || got[0]+":"+got[1] != m.Addr() {
		t.Fatalf("sentinel names %v (%v), want %s", got, err, m.Addr())
	}
}
