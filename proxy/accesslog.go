package proxy

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
)

// logAccess writes a request's access log line (routes with AccessLog
// full, or sampled and drawn), one slog record at Info on
// Config.AccessLog, the same fields on both engines:
//
//	route, method, host (lowercase, without port), path (as received,
//	without the query), status (499: the client left first), reason (the
//	gateway's reason code for its own answers, as in Spillway-Reason),
//	cluster, endpoint (the address picked; "" if none), bytes_in and
//	bytes_out (body bytes), duration_ms, upstream_ms (from sending to the
//	upstream to its response head; absent without an exchange), client
//	(IP), request_id (the X-Request-Id forwarded: the client's, or the
//	one the gateway made), attempts (upstream exchanges tried).
func (s *Server) logAccess(r *record, client netip.Addr) {
	cluster := ""
	if r.rt.Cluster != nil {
		cluster = r.rt.Cluster.Name
	}
	attrs := [...]slog.Attr{
		slog.String("route", r.rt.Name),
		slog.String("method", r.method),
		slog.String("host", r.host),
		slog.String("path", r.path),
		slog.Int("status", r.status),
		slog.String("reason", r.reason),
		slog.String("cluster", cluster),
		slog.String("endpoint", r.endpoint),
		slog.Int64("bytes_in", r.bytesIn),
		slog.Int64("bytes_out", r.bytesOut),
		slog.Float64("duration_ms", millis(r.at-r.start)),
		slog.String("client", client.Unmap().String()),
		slog.String("request_id", r.reqID),
		slog.Int("attempts", r.attempts),
		{}, // upstream_ms
	}
	n := len(attrs) - 1
	if r.upHead > 0 {
		attrs[n] = slog.Float64("upstream_ms", millis(r.upHead-r.upSent))
		n++
	}
	s.cfg.AccessLog.LogAttrs(context.Background(), slog.LevelInfo, "access", attrs[:n]...)
}

// millis converts seconds to milliseconds, to the microsecond.
func millis(sec float64) float64 { return math.Round(sec*1e6) / 1e3 }
