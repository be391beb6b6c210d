package proxy

import (
	"context"
	"log/slog"
	"time"
)

// logAccess writes a route's access log line for the exchange that just
// ended (only for routes with AccessLog; the strings are copied, as the
// request's bytes are about to be reused).
func (c *h1conn) logAccess(rt *Route, m int, start time.Time) {
	status := c.status
	if c.watch.gone {
		status, c.reason = 499, "client-gone"
	}
	c.s.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "access",
		slog.String("route", rt.Name),
		slog.String("method", string(c.method[:m])),
		slog.String("host", string(c.host)),
		slog.String("client", c.peer.String()),
		slog.Int("status", status),
		slog.String("reason", c.reason),
		slog.Float64("ms", float64(time.Since(start).Microseconds())/1000),
	)
}
