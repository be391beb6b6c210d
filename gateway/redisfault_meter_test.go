package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis meter of TestRedisBlackHoledThenKilled. The stall meter sees
// only this process: a machine that starves redis-server (two CPU hogs,
// other test binaries) makes a healthy Redis answer past the store
// timeout, and the stores then rightly decide by their fail mode. The
// meter tells that apart from a store that does not recover: it PINGs
// Redis every 5 ms, on the path the stores use (through the fault proxy),
// on a client of its own, and records as a stall of the meter every PING
// that took at least the store timeout while the phase says Redis is
// reachable (healthy, or back). The checks that need a responsive Redis
// are enforced only when no such PING overlapped their window.

// watchRedis starts the meter's pings to addr into m (their stalls are
// kept apart from the sleeping goroutine's); reachable says whether a
// slow PING counts. Stop ends them.
func (m *stallMeter) watchRedis(addr string, reachable func() bool) {
	c := redis.NewClient(&redis.Options{
		Addr: addr, PoolSize: 1, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	m.pinging.Add(1)
	go func() {
		defer m.pinging.Done()
		defer c.Close()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
			if !reachable() {
				continue
			}
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.Ping(ctx).Err()
			cancel()
			took := time.Since(t0)
			if err != nil { // as good as no answer in time, for the stores
				took = max(took, faultTimeout)
			}
			if took >= faultTimeout && reachable() {
				m.mu.Lock()
				m.redisLate = append(m.redisLate, stall{at: time.Since(m.began), late: took})
				m.mu.Unlock()
			}
		}
	}()
}

// redisWorstIn returns the slowest recorded PING that overlapped [from, to].
func (m *stallMeter) redisWorstIn(from, to time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return worstOf(m.redisLate, from, to)
}

// redisSlow counts the recorded PINGs.
func (m *stallMeter) redisSlow() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.redisLate)
}

// enforceRedis is enforce for a check that also needs Redis to answer in
// time: it only logs when a PING of the meter took at least the store
// timeout in [from, to], too.
func (m *stallMeter) enforceRedis(t *testing.T, from, to time.Duration, format string, args ...any) {
	t.Helper()
	if w := m.redisWorstIn(from, to); w >= faultTimeout {
		t.Logf("not enforced, Redis answered a PING of the meter in %v (≥ the store timeout) in that window: "+format,
			append([]any{w}, args...)...)
		return
	}
	m.enforce(t, from, to, format, args...)
}
