package admin

import (
	"strings"
	"testing"
)

// TestRefused: requests that must not reach the backend, with a token
// configured and without one.
func TestRefused(t *testing.T) {
	const challenge = `Bearer realm="spillway-admin"`
	cases := []struct {
		name          string
		withToken     bool
		method, path  string
		hdr           []string
		status        int
		allow, wwwAut string
	}{
		{"POST without token", true, "POST", "/reload", nil, 401, "", challenge},
		{"POST with wrong token", true, "POST", "/reload", []string{"Authorization", "Bearer nope"}, 401, "", challenge + `, error="invalid_token"`},
		{"POST with token's prefix", true, "POST", "/reload", []string{"Authorization", "Bearer " + token[:5]}, 401, "", challenge + `, error="invalid_token"`},
		{"POST with Basic", true, "POST", "/reload", []string{"Authorization", "Basic " + token}, 401, "", challenge + `, error="invalid_token"`},
		{"POST with the admin header only", true, "POST", "/clusters/app/endpoints/a:1/drain", []string{AdminHeader, "1"}, 401, "", challenge},
		{"GET config without token", true, "GET", "/config", nil, 401, "", challenge},
		{"GET metrics without token", true, "GET", "/metrics", nil, 401, "", challenge},
		{"unknown path without token", true, "GET", "/nope", nil, 401, "", challenge},
		{"foreign Host with token", true, "POST", "/reload", append([]string{"Host", "evil.example:9901"}, bearer...), 421, "", ""},
		{"rebinding Host", true, "GET", "/config", append([]string{"Host", "127.0.0.1.evil.example"}, bearer...), 421, "", ""},
		{"no Host", true, "GET", "/config", append([]string{"Host", ""}, bearer...), 421, "", ""},
		{"POST without the admin header", false, "POST", "/reload", nil, 403, "", ""},
		{"POST with admin header 0", false, "POST", "/reload", []string{AdminHeader, "0"}, 403, "", ""},
		{"drain without the admin header", false, "POST", "/clusters/app/endpoints/a:1/drain", nil, 403, "", ""},
		{"foreign Host with the admin header", false, "POST", "/reload", []string{"Host", "evil.example", AdminHeader, "1"}, 421, "", ""},
		{"preflight", false, "OPTIONS", "/reload", []string{"Origin", "http://evil.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", AdminHeader}, 405, "GET, POST", ""},
		{"preflight with token", true, "OPTIONS", "/clusters/app/endpoints/a:1/drain", nil, 405, "POST", ""},
		{"PUT reload", true, "PUT", "/reload", bearer, 405, "GET, POST", ""},
		{"DELETE clusters", true, "DELETE", "/clusters", bearer, 405, "GET", ""},
		{"GET drain", true, "GET", "/clusters/app/endpoints/a:1/drain", bearer, 405, "POST", ""},
		{"HEAD config", true, "HEAD", "/config", bearer, 405, "GET", ""},
		{"override without token", true, "POST", "/clusters/app/breaker/open", nil, 401, "", challenge},
		{"override with the admin header only", true, "POST", "/routes/api/bypass/on", []string{AdminHeader, "1"}, 401, "", challenge},
		{"override without the admin header", false, "POST", "/clusters/app/limit/5", nil, 403, "", ""},
		{"override from a foreign Host", false, "POST", "/clusters/app/brownout/0.5", []string{"Host", "evil.example", AdminHeader, "1"}, 421, "", ""},
		{"override preflight", false, "OPTIONS", "/routes/api/bypass/on", []string{"Origin", "http://evil.example", "Access-Control-Request-Method", "POST"}, 405, "POST", ""},
		{"GET override", true, "GET", "/clusters/app/breaker/open", bearer, 405, "POST", ""},
		{"GET policies without token", true, "GET", "/policies", nil, 401, "", challenge},
		{"POST policies", true, "POST", "/policies", bearer, 405, "GET", ""},
		{"unknown override", true, "POST", "/clusters/app/weight/3", bearer, 404, "", ""},
		{"unknown path", true, "GET", "/nope", bearer, 404, "", ""},
		{"trailing slash", true, "GET", "/config/", bearer, 404, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{}
			opts := Options{Logger: quiet}
			if c.withToken {
				opts.Token = token
			}
			w := do(t, New(f, opts), c.method, c.path, c.hdr...)
			check(t, w, c.status, problemType, "")
			if got := w.Header().Get("WWW-Authenticate"); got != c.wwwAut {
				t.Errorf("WWW-Authenticate %q, want %q", got, c.wwwAut)
			}
			if got, ok := w.Header()["Allow"]; c.status == 405 && (!ok || got[0] != c.allow) || c.status != 405 && ok {
				t.Errorf("Allow %q, want %q", got, c.allow)
			}
			if calls := f.Calls(); len(calls) != 0 {
				t.Errorf("the backend was called: %q", calls)
			}
		})
	}
}

// TestAccepted: the same guards let the right requests through.
func TestAccepted(t *testing.T) {
	cases := []struct {
		name      string
		withToken bool
		hdr       []string
	}{
		{"token", true, bearer},
		{"lower-case scheme", true, []string{"Authorization", "bearer " + token}},
		{"two spaces", true, []string{"Authorization", "Bearer  " + token}},
		{"admin header without token", false, []string{AdminHeader, "1"}},
		{"localhost Host", false, []string{"Host", "localhost:9901", AdminHeader, "1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fake{}
			opts := Options{Logger: quiet}
			if c.withToken {
				opts.Token = token
			}
			check(t, do(t, New(f, opts), "POST", "/reload", c.hdr...), 200, jsonType, "")
			if got := strings.Join(f.Calls(), ","); got != "reload,last" {
				t.Errorf("backend calls %s, want reload,last", got)
			}
		})
	}
}

func TestHostCheck(t *testing.T) {
	h := New(&fake{}, Options{Logger: quiet, Address: "10.1.2.3:9901", Hosts: []string{"admin.internal", "*.svc.example", "[fd00::1]"}}).(*handler)
	for host, want := range map[string]bool{
		"localhost:9901": true, "LOCALHOST": true, "localhost.": true,
		"127.0.0.1:9901": true, "127.5.5.5": true, "[::1]:9901": true, "[::ffff:127.0.0.1]:80": true,
		"10.1.2.3:9901": true, "10.1.2.3:1": true, "10.1.2.3": true,
		"admin.internal": true, "Admin.Internal:8080": true,
		"a.svc.example": true, "a.b.svc.example:1": true, "[fd00::1]:9901": true,
		"svc.example": false, "evil.example": false, "localhost.evil.example": false,
		"127.0.0.1.nip.io": false, "10.1.2.4": false, "": false, "admin.internal.evil": false,
		"[fd00::2]:9901": false, "xsvc.example": false,
	} {
		if got := h.hostOK(host); got != want {
			t.Errorf("hostOK(%q) = %v, want %v", host, got, want)
		}
	}
	// Bound to every address: its host names nothing, so it is not accepted.
	h = New(&fake{}, Options{Logger: quiet, Address: "0.0.0.0:9901"}).(*handler)
	for _, host := range []string{"0.0.0.0:9901", "0.0.0.0", "[::]:9901"} {
		if h.hostOK(host) {
			t.Errorf("bound to 0.0.0.0: hostOK(%q) = true", host)
		}
	}
}
