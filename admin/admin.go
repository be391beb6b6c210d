package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Backend is the gateway as the admin API sees it. Its methods are called
// from the admin listener's goroutines, concurrently.
type Backend interface {
	// Ready reports whether the gateway takes traffic (false while it
	// starts and once it drains).
	Ready() bool
	// Config returns the running configuration with its secrets redacted;
	// it is encoded as JSON.
	Config() any
	// Clusters lists the running clusters and all their endpoints.
	Clusters() []ClusterStatus
	// Drain turns draining of one endpoint on or off; an error wrapping
	// ErrNotFound (unknown cluster or endpoint) is answered 404.
	Drain(cluster, endpoint string, on bool) error
	// Reload reads, validates in full and applies the configuration file;
	// on error the old configuration keeps serving and the error's text
	// lists the problems, one per line (file:line:column: ...).
	Reload() error
	// LastReload returns the outcome of the last load or reload.
	LastReload() ReloadStatus
	// Policies returns the policy chain's state (GET /policies).
	Policies() PolicyStatus
	// Override applies one operator override to the running generation,
	// its value already checked (POST /clusters/{c}/breaker|limit|brownout/{v},
	// /routes/{r}/bypass/{on|off}); an error wrapping ErrNotFound
	// (unknown cluster or route) is answered 404, one wrapping
	// ErrBadValue (the target has no such policy) 400.
	Override(o Override) error
}

// ErrNotFound is what Backend.Drain and Override wrap for an unknown name.
var ErrNotFound = errors.New("admin: not found")

// ClusterStatus is one cluster in GET /clusters.
type ClusterStatus struct {
	Name      string           `json:"name"`
	Picker    string           `json:"picker"`
	Endpoints []EndpointStatus `json:"endpoints"`
}

// EndpointStatus is one endpoint of a cluster, whatever its state.
type EndpointStatus struct {
	Address       string  `json:"address"`
	State         string  `json:"state"` // healthy, slow-starting, draining, ejected, unhealthy
	Weight        int     `json:"weight"`
	InFlight      int     `json:"in_flight"`
	LatencyEWMAms float64 `json:"latency_ewma_ms"`
}

// ReloadStatus is the outcome of a load or reload (GET /reload).
type ReloadStatus struct {
	At         time.Time `json:"time,omitzero"`
	OK         bool      `json:"ok"`
	Generation int64     `json:"generation"` // the one serving new requests
	Errors     []string  `json:"errors"`     // a refused file's problems, file:line:column first
	Trigger    string    `json:"trigger,omitempty"`
}

// AdminHeader is the header a POST must carry when no token is
// configured, with the value "1": a browser cannot add it to a
// cross-origin request without a CORS preflight.
const AdminHeader = "X-Spillway-Admin"

// Options configure the handler; every field is optional.
type Options struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every request but GET /live and /ready.
	Token string
	// Address is the admin listener's bound address: its host is accepted
	// as Host.
	Address string
	// Hosts are further names accepted as Host (exact, an IP address, or
	// *.example.com for one or more labels); the port is ignored.
	Hosts []string
	// Metrics serves GET /metrics; nil: 404.
	Metrics http.Handler
	// Logger receives one line per change made (drain, reload, override) and, at
	// Debug, one per refused request [slog.Default()].
	Logger *slog.Logger
	// Dashboard returns the dashboard's data after since (unix
	// milliseconds), encoded as JSON (GET /dashboard/data?since=); nil:
	// /dashboard and its paths are 404.
	Dashboard func(since int64) any
}

// handler is the admin API; immutable after New.
type handler struct {
	b         Backend
	metrics   http.Handler
	dashboard func(since int64) any
	now       func() time.Time // the cookies' expiry clock [time.Now]
	log       *slog.Logger
	hasToken  bool
	token     [sha256.Size]byte // SHA-256 of Options.Token
	exact     map[string]bool   // accepted Host names besides localhost and loopback
	suffixes  []string          // ".example.com" for each *.example.com
}

// New returns the admin API over b.
func New(b Backend, opts Options) http.Handler {
	h := &handler{b: b, metrics: opts.Metrics, dashboard: opts.Dashboard, now: time.Now, log: opts.Logger, exact: map[string]bool{}}
	if h.log == nil {
		h.log = slog.Default()
	}
	if opts.Token != "" {
		h.hasToken, h.token = true, sha256.Sum256([]byte(opts.Token))
	}
	if host, _, err := net.SplitHostPort(opts.Address); err == nil && host != "" {
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsUnspecified() {
			h.exact[strings.ToLower(host)] = true
		}
	}
	for _, n := range opts.Hosts {
		n = strings.ToLower(strings.Trim(n, "[]"))
		if rest, ok := strings.CutPrefix(n, "*."); ok {
			h.suffixes = append(h.suffixes, "."+rest)
		} else {
			h.exact[n] = true
		}
	}
	return h
}

// ServeHTTP checks, in order: OPTIONS (405), the probes (answered at
// once), Host (421), the token (401; the dashboard's page and login
// need none, its data takes the login's cookie instead), the path (404)
// and method (405), and for a POST without a token the admin header
// (403).
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	ep, args := lookup(r.URL.EscapedPath())
	switch {
	case r.Method == http.MethodOptions:
		h.refuse(w, r, http.StatusMethodNotAllowed, "OPTIONS is not served (no CORS)", ep)
	case ep != nil && ep.probe && r.Method == http.MethodGet:
		ep.serve(h, w, r, args)
	case !h.hostOK(r.Host):
		h.refuse(w, r, http.StatusMisdirectedRequest, "the admin endpoint does not answer to this Host", nil)
	case h.hasToken && !h.authorised(r, ep):
		h.unauthorized(w, r)
	case ep == nil:
		h.refuse(w, r, http.StatusNotFound, "no such admin resource", nil)
	case !ep.allows(r.Method):
		h.refuse(w, r, http.StatusMethodNotAllowed, r.Method+" is not allowed here", ep)
	case r.Method == http.MethodPost && !h.hasToken && r.Header.Get(AdminHeader) != "1":
		h.refuse(w, r, http.StatusForbidden, "a POST needs the header "+AdminHeader+": 1", nil)
	default:
		ep.serve(h, w, r, args)
	}
}

// hostOK reports whether host (the request's Host, port ignored) names
// this machine's loopback, the bound address or one of Options.Hosts.
func (h *handler) hostOK(host string) bool {
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "" {
		return false
	}
	if name == "localhost" || h.exact[name] {
		return true
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		return ip.Unmap().IsLoopback()
	}
	for _, s := range h.suffixes {
		if len(name) > len(s) && strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// tokenOK reports whether an Authorization value carries the token, in
// constant time.
func (h *handler) tokenOK(auth string) bool {
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimLeft(cred, " ")))
	return subtle.ConstantTimeCompare(sum[:], h.token[:]) == 1
}

// unauthorized answers 401 with a Bearer challenge (RFC 6750: an
// invalid_token error when a token was sent).
func (h *handler) unauthorized(w http.ResponseWriter, r *http.Request) {
	challenge := `Bearer realm="spillway-admin"`
	if r.Header.Get("Authorization") != "" {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	h.refuse(w, r, http.StatusUnauthorized, "a bearer token is required", nil)
}

// refuse answers a problem; with ep, 405 lists the methods it allows.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, detail string, ep *endpoint) {
	if status == http.StatusMethodNotAllowed {
		allow := ""
		if ep != nil {
			allow = strings.Join(ep.methods, ", ")
		}
		w.Header().Set("Allow", allow)
	}
	h.log.Debug("admin: refused", "method", r.Method, "path", r.URL.Path, "status", status, "remote", r.RemoteAddr)
	writeProblem(w, status, detail, nil)
}
