package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The dashboard's page, script and styles, served as they are.
//
//go:embed dashboard/index.html dashboard/app.js dashboard/style.css
var dashboardFiles embed.FS

// auth is what authorises a request to an endpoint when a token is
// configured.
type auth int

const (
	authToken  auth = iota // Authorization: Bearer <token>
	authNone               // nothing: the page and its assets hold no state
	authLogin              // the token in the POSTed form, checked by the login
	authCookie             // the token, or the cookie the login set
)

// cookieName is the dashboard's session cookie; cookieTTL its lifetime.
const (
	cookieName = "spillway_dashboard"
	cookieTTL  = 12 * time.Hour
)

// csp lets the page load only its own script and styles and fetch only
// from its own origin, and no one frame it.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

var dashboardPaths = map[string]*endpoint{
	"/dashboard":           {methods: []string{http.MethodGet}, auth: authNone, serve: asset("index.html", "text/html; charset=utf-8")},
	"/dashboard/app.js":    {methods: []string{http.MethodGet}, auth: authNone, serve: asset("app.js", "text/javascript; charset=utf-8")},
	"/dashboard/style.css": {methods: []string{http.MethodGet}, auth: authNone, serve: asset("style.css", "text/css; charset=utf-8")},
	"/dashboard/login":     {methods: []string{http.MethodPost}, auth: authLogin, serve: (*handler).login},
	"/dashboard/data":      {methods: []string{http.MethodGet}, auth: authCookie, serve: (*handler).dashboardData},
}

// authorised reports whether r may reach ep with a token configured.
func (h *handler) authorised(r *http.Request, ep *endpoint) bool {
	mode := authToken
	if ep != nil {
		mode = ep.auth
	}
	switch mode {
	case authNone, authLogin:
		return true
	case authCookie:
		return h.tokenOK(r.Header.Get("Authorization")) || h.cookieOK(r)
	}
	return h.tokenOK(r.Header.Get("Authorization"))
}

func asset(name, contentType string) func(*handler, http.ResponseWriter, *http.Request, []string) {
	return func(h *handler, w http.ResponseWriter, _ *http.Request, _ []string) {
		if h.dashboard == nil {
			writeProblem(w, http.StatusNotFound, "the dashboard is off", nil)
			return
		}
		body, err := dashboardFiles.ReadFile("dashboard/" + name)
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, "dashboard: "+err.Error(), nil)
			return
		}
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		write(w, http.StatusOK, contentType, body)
	}
}

// login checks the token of a POSTed form (field "token") and answers 204
// with the session cookie, HttpOnly and SameSite=Strict, for the data
// endpoint alone; without a token configured it only answers 204.
func (h *handler) login(w http.ResponseWriter, r *http.Request, _ []string) {
	if h.dashboard == nil {
		writeProblem(w, http.StatusNotFound, "the dashboard is off", nil)
		return
	}
	if !h.hasToken {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		writeProblem(w, http.StatusBadRequest, "the login is a form with the field token", nil)
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("token")))
	if subtle.ConstantTimeCompare(sum[:], h.token[:]) != 1 {
		h.log.Warn("admin: dashboard login refused", "remote", r.RemoteAddr)
		writeProblem(w, http.StatusUnauthorized, "wrong token", nil)
		return
	}
	exp := h.now().Add(cookieTTL).Unix()
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: h.session(exp), Path: "/dashboard", MaxAge: int(cookieTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	h.log.Info("admin: dashboard login", "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}

// session is the cookie value for a session ending at exp (unix
// seconds): exp and its HMAC under the token's hash, so that the cookie
// is not the token and a changed token ends every session.
func (h *handler) session(exp int64) string {
	e := strconv.FormatInt(exp, 10)
	mac := hmac.New(sha256.New, h.token[:])
	mac.Write([]byte("spillway dashboard " + e))
	return e + "." + hex.EncodeToString(mac.Sum(nil))
}

// cookieOK reports whether r carries an unexpired session cookie.
func (h *handler) cookieOK(r *http.Request) bool {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return false
	}
	e, _, ok := strings.Cut(c.Value, ".")
	exp, err := strconv.ParseInt(e, 10, 64)
	if !ok || err != nil || h.now().Unix() >= exp {
		return false
	}
	return hmac.Equal([]byte(c.Value), []byte(h.session(exp)))
}

// dashboardData answers GET /dashboard/data?since=T (unix milliseconds;
// absent: everything kept) with the samples after T, compact.
func (h *handler) dashboardData(w http.ResponseWriter, r *http.Request, _ []string) {
	if h.dashboard == nil {
		writeProblem(w, http.StatusNotFound, "the dashboard is off", nil)
		return
	}
	var since int64
	if s := r.URL.Query().Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			writeProblem(w, http.StatusBadRequest, "since is a time in unix milliseconds", nil)
			return
		}
		since = n
	}
	body, err := json.Marshal(h.dashboard(since))
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "encoding the answer failed: "+err.Error(), nil)
		return
	}
	write(w, http.StatusOK, "application/json", append(body, '\n'))
}
