package admin

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a Backend that records its calls.
type fake struct {
	mu        sync.Mutex
	calls     []string
	notReady  bool
	drainErr  error
	reloadErr error

	policies    PolicyStatus
	overrideErr error
}

func (f *fake) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fake) Ready() bool { return !f.notReady }

func (f *fake) Config() any {
	f.record("config")
	return map[string]any{"admin": map[string]string{"token": "<redacted>"}, "listeners": []string{"http"}}
}

func (f *fake) Clusters() []ClusterStatus {
	f.record("clusters")
	return []ClusterStatus{{Name: "app", Picker: "round_robin", Endpoints: []EndpointStatus{
		{Address: "10.0.0.1:8080", State: "healthy", Weight: 1, InFlight: 3, LatencyEWMAms: 1.5},
		{Address: "10.0.0.2:8080", State: "draining", Weight: 2},
	}}}
}

func (f *fake) Drain(cluster, endpoint string, on bool) error {
	f.record(fmt.Sprintf("drain %s %s %v", cluster, endpoint, on))
	return f.drainErr
}

func (f *fake) Reload() error {
	f.record("reload")
	return f.reloadErr
}

func (f *fake) LastReload() ReloadStatus {
	f.record("last")
	st := ReloadStatus{At: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC), OK: true, Generation: 7, Trigger: "admin"}
	if f.reloadErr != nil {
		st.OK, st.Errors, st.Generation = false, []string{"gw.yaml:3:4: bad"}, 6
	}
	return st
}

func (f *fake) Policies() PolicyStatus {
	f.record("policies")
	return f.policies
}

func (f *fake) Override(o Override) error {
	f.record(fmt.Sprintf("override %s %s %s limit=%d level=%g on=%v", o.What, o.Target, o.Value, o.Limit, o.Level, o.On))
	return f.overrideErr
}

const token = "s3cret-token"

var quiet = slog.New(slog.DiscardHandler)

// do sends one request with Host 127.0.0.1:9901 unless hdr sets "Host",
// and checks what every answer must have.
func do(t *testing.T, h http.Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	r.Host = "127.0.0.1:9901"
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			r.Host = hdr[i+1]
		} else {
			r.Header.Set(hdr[i], hdr[i+1])
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if got := w.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("%s %s: Cache-Control %q, want no-store", method, target, got)
	}
	for k := range w.Header() {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			t.Errorf("%s %s: CORS field %s", method, target, k)
		}
	}
	return w
}

func check(t *testing.T, w *httptest.ResponseRecorder, status int, contentType, body string) {
	t.Helper()
	if w.Code != status {
		t.Errorf("status %d, want %d (body %q)", w.Code, status, w.Body.String())
	}
	if got := w.Header().Get("Content-Type"); got != contentType {
		t.Errorf("Content-Type %q, want %q", got, contentType)
	}
	if body != "" && w.Body.String() != body {
		t.Errorf("body\n%s\nwant\n%s", w.Body.String(), body)
	}
}

const (
	jsonType    = "application/json"
	problemType = "application/problem+json"
	textType    = "text/plain; charset=utf-8"
)

var bearer = []string{"Authorization", "Bearer " + token}

func TestLiveAndReady(t *testing.T) {
	f := &fake{}
	h := New(f, Options{Logger: quiet, Token: token})
	// Probes need neither the token nor a local Host (a kubelet sends the pod's IP).
	check(t, do(t, h, "GET", "/live", "Host", "10.244.1.7:9901"), 200, textType, "ok\n")
	check(t, do(t, h, "GET", "/ready"), 200, textType, "ready\n")
	f.notReady = true
	check(t, do(t, h, "GET", "/ready"), 503, textType, "not ready\n")
	check(t, do(t, h, "GET", "/live"), 200, textType, "ok\n")
	check(t, do(t, h, "POST", "/live", bearer...), 405, problemType, "")
}

func TestGetConfigAndClusters(t *testing.T) {
	f := &fake{}
	h := New(f, Options{Logger: quiet, Token: token})
	check(t, do(t, h, "GET", "/config", bearer...), 200, jsonType, `{
  "admin": {
    "token": "<redacted>"
  },
  "listeners": [
    "http"
  ]
}
`)
	check(t, do(t, h, "GET", "/clusters", bearer...), 200, jsonType, `[
  {
    "name": "app",
    "picker": "round_robin",
    "endpoints": [
      {
        "address": "10.0.0.1:8080",
        "state": "healthy",
        "weight": 1,
        "in_flight": 3,
        "latency_ewma_ms": 1.5
      },
      {
        "address": "10.0.0.2:8080",
        "state": "draining",
        "weight": 2,
        "in_flight": 0,
        "latency_ewma_ms": 0
      }
    ]
  }
]
`)
	check(t, do(t, h, "GET", "/reload", bearer...), 200, jsonType, `{
  "time": "2026-12-01T09:30:00Z",
  "ok": true,
  "generation": 7,
  "errors": [],
  "trigger": "admin"
}
`)
	if got, want := strings.Join(f.Calls(), ","), "config,clusters,last"; got != want {
		t.Errorf("backend calls %s, want %s", got, want)
	}
}

func TestMetrics(t *testing.T) {
	m := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("spillway_config_generation 3\n"))
	})
	check(t, do(t, New(&fake{}, Options{Logger: quiet, Metrics: m}), "GET", "/metrics"), 200, "text/plain; version=0.0.4", "spillway_config_generation 3\n")
	check(t, do(t, New(&fake{}, Options{Logger: quiet}), "GET", "/metrics"), 404, problemType, "")
}

func TestDrain(t *testing.T) {
	f := &fake{}
	var log bytes.Buffer
	h := New(f, Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), Token: token})
	check(t, do(t, h, "POST", "/clusters/app/endpoints/10.0.0.1:8080/drain", bearer...), 200, jsonType,
		"{\n  \"cluster\": \"app\",\n  \"endpoint\": \"10.0.0.1:8080\",\n  \"draining\": true\n}\n")
	check(t, do(t, h, "POST", "/clusters/app/endpoints/10.0.0.1:8080/undrain", bearer...), 200, jsonType,
		"{\n  \"cluster\": \"app\",\n  \"endpoint\": \"10.0.0.1:8080\",\n  \"draining\": false\n}\n")
	check(t, do(t, h, "POST", "/clusters/app/endpoints/%5B::1%5D:80/drain", bearer...), 200, jsonType, "")
	want := []string{"drain app 10.0.0.1:8080 true", "drain app 10.0.0.1:8080 false", "drain app [::1]:80 true"}
	if got := f.Calls(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("backend calls %q, want %q", got, want)
	}
	if n := strings.Count(log.String(), "msg=\"admin: drain\""); n != 3 {
		t.Errorf("%d drain log lines, want 3:\n%s", n, log.String())
	}
	f.drainErr = fmt.Errorf("%w: cluster %q has no endpoint %q", ErrNotFound, "app", "10.9.9.9:1")
	check(t, do(t, h, "POST", "/clusters/app/endpoints/10.9.9.9:1/drain", bearer...), 404, problemType,
		`{"type":"about:blank","title":"Not Found","status":404,"detail":"admin: not found: cluster \"app\" has no endpoint \"10.9.9.9:1\""}`+"\n")
	f.drainErr = errors.New("boom")
	check(t, do(t, h, "POST", "/clusters/app/endpoints/10.0.0.1:8080/drain", bearer...), 500, problemType, "")
	for _, p := range []string{"/clusters/app/endpoints//drain", "/clusters/app/endpoints/x/stop", "/clusters/app/drain", "/clusters/app/endpoints/a/b/drain"} {
		check(t, do(t, h, "POST", p, bearer...), 404, problemType, "")
	}
}

func TestReload(t *testing.T) {
	f := &fake{}
	h := New(f, Options{Logger: quiet, Token: token})
	check(t, do(t, h, "POST", "/reload", bearer...), 200, jsonType, `{
  "time": "2026-12-01T09:30:00Z",
  "ok": true,
  "generation": 7,
  "errors": [],
  "trigger": "admin"
}
`)
	f.reloadErr = errors.New("gw.yaml:3:4: routes[0].cluster: no cluster is named \"nope\"\ngw.yaml:5:20: routes[0].timeouts.request: want a duration\n")
	check(t, do(t, h, "POST", "/reload", bearer...), 422, problemType,
		`{"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"the configuration was refused; the running one keeps serving",`+
			`"errors":["gw.yaml:3:4: routes[0].cluster: no cluster is named \"nope\"","gw.yaml:5:20: routes[0].timeouts.request: want a duration"]}`+"\n")
	if got, want := strings.Join(f.Calls(), ","), "reload,last,reload"; got != want {
		t.Errorf("backend calls %s, want %s", got, want)
	}
}
