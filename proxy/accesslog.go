package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// logAccess writes a route's access log line for the exchange that just
// ended (only for routes with AccessLog; the strings are copied, as the
// request's bytes are about to be reused).
func (c *h1conn) logAccess(rt *Route, m int, start time.Time) {
	status, reason := c.rec.status, c.rec.reason
	if c.watch.gone {
		status, reason = 499, "client-gone"
	}
	c.s.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "access",
		slog.String("route", rt.Name),
		slog.String("method", string(c.method[:m])),
		slog.String("host", string(c.host)),
		slog.String("client", c.peer.String()),
		slog.Int("status", status),
		slog.String("reason", reason),
		slog.Float64("ms", float64(time.Since(start).Microseconds())/1000),
	)
}

// statusWriter remembers the status an HTTP/2 handler answered, for the
// access log; Unwrap keeps http.ResponseController's Flush and deadlines.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logStd writes the access log line of an HTTP/2 request (deferred, so a
// stream reset after a cut body is logged too): 499 when the client left
// first.
func (s *Server) logStd(rt *Route, r *http.Request, w *statusWriter, start time.Time) {
	status := w.status
	if r.Context().Err() != nil {
		status = 499
	}
	s.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "access",
		slog.String("route", rt.Name),
		slog.String("method", r.Method),
		slog.String("host", r.Host),
		slog.String("client", r.RemoteAddr),
		slog.Int("status", status),
		slog.String("reason", w.Header().Get("Spillway-Reason")),
		slog.Float64("ms", float64(time.Since(start).Microseconds())/1000),
	)
}
