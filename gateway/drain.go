package gateway

import (
	"context"
	"time"
)

// BeginDrain starts the drain of SIGTERM: readiness fails at once, and
// every engine asks its clients to go — HTTP/1.1 responses carry
// Connection: close, HTTP/2 connections get GOAWAY — while the listeners
// keep accepting (a load balancer still sends to the gateway for a few
// seconds after it is told to stop). Idempotent.
func (g *Gateway) BeginDrain() {
	if g.drain.Swap(true) {
		return
	}
	g.ready.Store(false)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.socks {
		if s.http != nil {
			s.http.Drain()
		}
	}
	g.log.Info("gateway: draining", "delay", g.cur.Load().cfg.Drain.Delay.D())
}

// Terminate runs the whole SIGTERM sequence from the configuration's
// drain settings: BeginDrain, drain.delay of accepting with the clients
// told to go (ended early by ctx), then Shutdown with drain.timeout for the
// requests in flight. It returns Shutdown's error (context.DeadlineExceeded
// when requests had to be cut).
func (g *Gateway) Terminate(ctx context.Context) error {
	d := g.cur.Load().cfg.Drain
	g.BeginDrain()
	if delay := d.Delay.D(); delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	g.log.Info("gateway: closing listeners", "timeout", d.Timeout.D())
	sctx, cancel := context.WithTimeout(context.Background(), d.Timeout.D())
	defer cancel()
	return g.Shutdown(sctx)
}
