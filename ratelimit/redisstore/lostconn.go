package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Lost connections: how engine.send goes on when a pooled connection
// turns out dead.

// maxLostConns bounds how often one batch is sent again because its pooled
// connection was found dead.
const maxLostConns = 16

// lostRetries is how a batch whose connection was found dead goes on:
// on the pool's other idle connections (after an outage each may be dead,
// and each fails at once), then once on a fresh one; a fresh connection
// that dies as well means Redis, or a proxy in front of it, is failing,
// and the batch fails.
type lostRetries struct {
	lost  int  // connections found dead
	fresh bool // a fresh connection was tried
}

// again reports whether the batch may be sent again, its callers still
// waiting until ctx ends: on an idle connection, or once on a fresh one,
// at most maxLostConns times in all.
func (r *lostRetries) again(ctx context.Context, client redis.UniversalClient) bool {
	if ctx.Err() != nil || r.lost >= maxLostConns || r.fresh {
		return false
	}
	r.lost++
	if idlePipelineConns(client) == 0 {
		r.fresh = true
	}
	return true
}

// idlePipelineConns returns the idle connections of the pool pipelines
// take theirs from: go-redis's separate pipeline pool, or its main pool
// when it has none.
func idlePipelineConns(c redis.UniversalClient) uint32 {
	ps := c.PoolStats()
	if ps.PipelineStats != nil {
		return ps.PipelineStats.IdleConns
	}
	return ps.IdleConns
}

// connLost reports whether err says the connection was dead when the
// pipeline was sent on it — the peer closed or reset it (EOF, ECONNRESET,
// EPIPE), as a Redis that restarted, or a proxy in front of one, does to
// every connection pooled before. Such a connection fails at once, and
// another one may well succeed: after a restart every pooled connection
// fails this way once, and counting each as Redis failing would open the
// store breakers again right after Redis returned. Timeouts, dial errors
// (Redis refuses: it is down) and Redis's own errors are not lost
// connections. Sending again can spend a request's tokens twice if Redis
// ran the script and died before answering: the strict side.
func connLost(err error) bool {
	if err == nil {
		return false
	}
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
		return false
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
