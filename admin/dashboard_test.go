package admin

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// dash is a dashboard source that records the since it was asked for.
type dash struct{ since []int64 }

func (d *dash) data(since int64) any {
	d.since = append(d.since, since)
	return map[string]any{"now": 1700000000000, "t": []int64{1700000000000}}
}

func newDash(t *testing.T, withToken bool) (*handler, *dash) {
	t.Helper()
	d := &dash{}
	opts := Options{Logger: quiet, Dashboard: d.data}
	if withToken {
		opts.Token = token
	}
	return New(&fake{}, opts).(*handler), d
}

// loginReq POSTs the form token=tok to /dashboard/login.
func loginReq(h http.Handler, host, tok string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/dashboard/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	r.Host = host
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func sessionCookie(t *testing.T, w *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, c := range w.Result().Cookies() {
		if c.Name == cookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %q", cookieName, w.Header().Values("Set-Cookie"))
	return nil
}

func TestDashboardPage(t *testing.T) {
	h, _ := newDash(t, true)
	for path, typ := range map[string]string{
		"/dashboard": "text/html; charset=utf-8", "/dashboard/app.js": "text/javascript; charset=utf-8", "/dashboard/style.css": "text/css; charset=utf-8",
	} {
		w := do(t, h, "GET", path) // no token: the page holds nothing secret
		check(t, w, 200, typ, "")
		if !strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'self'") || w.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: CSP %q, X-Frame-Options %q", path, w.Header().Get("Content-Security-Policy"), w.Header().Get("X-Frame-Options"))
		}
		check(t, do(t, h, "GET", path, "Host", "evil.example"), 421, problemType, "")
		check(t, do(t, h, "POST", path, bearer...), 405, problemType, "")
	}
	if w := do(t, h, "GET", "/dashboard"); !strings.Contains(w.Body.String(), `src="/dashboard/app.js"`) || strings.Contains(w.Body.String(), "://") {
		t.Errorf("page does not load its own script alone:\n%s", w.Body.String())
	}
	off := New(&fake{}, Options{Logger: quiet})
	for _, p := range []string{"/dashboard", "/dashboard/app.js", "/dashboard/data"} {
		check(t, do(t, off, "GET", p), 404, problemType, "")
	}
	check(t, do(t, h, "GET", "/dashboard/"), 401, problemType, "") // not a dashboard path: the token rule
}

// TestDashboardLogin: the login's cookie opens the data endpoint and
// nothing else; a wrong token, a foreign Host, a tampered or expired
// cookie open nothing.
func TestDashboardLogin(t *testing.T) {
	h, d := newDash(t, true)
	check(t, do(t, h, "GET", "/dashboard/data"), 401, problemType, "")
	check(t, loginReq(h, "127.0.0.1:9901", "nope"), 401, problemType, "")
	check(t, loginReq(h, "evil.example", token), 421, problemType, "")
	if w := loginReq(h, "127.0.0.1:9901", "nope"); len(w.Result().Cookies()) != 0 {
		t.Errorf("a refused login set %q", w.Header().Values("Set-Cookie"))
	}
	w := loginReq(h, "127.0.0.1:9901", token)
	if w.Code != http.StatusNoContent {
		t.Fatalf("login: status %d, want 204 (%s)", w.Code, w.Body.String())
	}
	c := sessionCookie(t, w)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/dashboard" || c.MaxAge != 43200 || strings.Contains(c.Value, token) {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path /dashboard, 12 h, not the token", c)
	}
	cookie := []string{"Cookie", cookieName + "=" + c.Value}
	check(t, do(t, h, "GET", "/dashboard/data?since=1699999999000", cookie...), 200, jsonType, `{"now":1700000000000,"t":[1700000000000]}`+"\n")
	check(t, do(t, h, "GET", "/dashboard/data", bearer...), 200, jsonType, "")
	check(t, do(t, h, "GET", "/config", cookie...), 401, problemType, "")
	check(t, do(t, h, "POST", "/reload", cookie...), 401, problemType, "")
	check(t, do(t, h, "GET", "/dashboard/data", append([]string{"Host", "evil.example"}, cookie...)...), 421, problemType, "")
	check(t, do(t, h, "GET", "/dashboard/data?since=x", cookie...), 400, problemType, "")
	if len(d.since) != 2 || d.since[0] != 1699999999000 || d.since[1] != 0 {
		t.Errorf("the source was asked for since %v, want [1699999999000 0]", d.since)
	}
	exp, _, _ := strings.Cut(c.Value, ".")
	for _, v := range []string{exp + ".00", "9999999999." + strings.Repeat("0", 64), token, ""} {
		check(t, do(t, h, "GET", "/dashboard/data", "Cookie", cookieName+"="+v), 401, problemType, "")
	}
	h.now = func() time.Time { return time.Now().Add(cookieTTL + time.Minute) }
	check(t, do(t, h, "GET", "/dashboard/data", cookie...), 401, problemType, "")
	other, _ := newDash(t, true)
	other.token[0] ^= 1 // another token: the old sessions end
	check(t, do(t, other, "GET", "/dashboard/data", cookie...), 401, problemType, "")
}

func TestDashboardWithoutToken(t *testing.T) {
	h, _ := newDash(t, false)
	check(t, do(t, h, "GET", "/dashboard/data"), 200, jsonType, "")
	check(t, loginReq(h, "127.0.0.1:9901", ""), 403, problemType, "") // a POST without the admin header
	check(t, do(t, h, "POST", "/dashboard/login", AdminHeader, "1"), 204, "", "")
	check(t, do(t, h, "OPTIONS", "/dashboard/data", "Origin", "http://evil.example"), 405, problemType, "")
	check(t, do(t, h, "GET", "/dashboard/data", "Host", "127.0.0.1.evil.example"), 421, problemType, "")
}
