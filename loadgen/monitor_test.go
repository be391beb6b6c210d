package loadgen

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Errors above the threshold over Abort.For stop the run early, with the
// reason in Result.Aborted and the step under way partial.
func TestAbortOnErrors(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	defer srv.Close()
	start := time.Now()
	res, err := Run(t.Context(), Config{
		Targets: []Target{{URL: srv.URL}},
		Steps:   []Step{{Rate: 50, Duration: 20 * time.Second}},
		Abort:   Abort{ErrorRate: 0.5, For: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted != "errors 100% over 1s, above 50%" {
		t.Errorf("Aborted = %q", res.Aborted)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the run took %v, want it stopped after about 1 s", took)
	}
	if len(res.Steps) != 1 || !res.Steps[0].Partial || res.Steps[0].Statuses[500] == 0 {
		t.Errorf("steps %+v, want one partial step of 500s", res.Steps)
	}
}

func TestAbortOnP99(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(100 * time.Millisecond) })
	defer srv.Close()
	res, err := Run(t.Context(), Config{
		Targets: []Target{{URL: srv.URL}},
		Steps:   []Step{{Rate: 50, Duration: 20 * time.Second}},
		Abort:   Abort{P99: 50 * time.Millisecond, For: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Aborted) < 4 || res.Aborted[:4] != "p99 " || res.Aborted[len(res.Aborted)-20:] != " over 2s, above 50ms" {
		t.Errorf("Aborted = %q, want p99 … over 2s, above 50ms", res.Aborted)
	}
}

// Progress comes about once a second with the running step's state.
func TestProgress(t *testing.T) {
	defer noLeaks(t)()
	srv := newServer(t, nil)
	defer srv.Close()
	var mu sync.Mutex
	var reports []Progress
	run(t, Config{
		Targets:  []Target{{URL: srv.URL}},
		Steps:    []Step{{Rate: 100, Duration: 2500 * time.Millisecond}},
		Progress: func(p Progress) { mu.Lock(); reports = append(reports, p); mu.Unlock() },
	})
	mu.Lock()
	defer mu.Unlock()
	if len(reports) < 2 || len(reports) > 3 {
		t.Fatalf("%d progress reports in 2.5 s, want 2", len(reports))
	}
	p := reports[1]
	if p.Rate != 100 || p.Step != 0 || p.Sent < 150 || p.Unsent != 0 || p.Goodput < 50 || p.Goodput > 150 ||
		p.ErrorRate != 0 || p.P99 <= 0 || p.Elapsed < time.Second || p.InFlight < 0 {
		t.Errorf("second report %+v, want about 200 sent, goodput about 100/s, no errors", p)
	}
}

// HTTP2 sends HTTP/2: with prior knowledge on http://, by ALPN over TLS.
func TestHTTP2(t *testing.T) {
	defer noLeaks(t)()
	var mu sync.Mutex
	protos := map[int]int{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos[r.ProtoMajor]++
		mu.Unlock()
	})
	h2c := httptest.NewUnstartedServer(h)
	h2c.Config.Protocols = new(http.Protocols)
	h2c.Config.Protocols.SetHTTP1(true)
	h2c.Config.Protocols.SetUnencryptedHTTP2(true)
	h2c.Start()
	defer h2c.Close()
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	tlsCfg := tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig
	for _, tc := range []struct {
		url   string
		http2 bool
		proto int
	}{{h2c.URL, true, 2}, {h2c.URL, false, 1}, {tlsSrv.URL, true, 2}, {tlsSrv.URL, false, 1}} {
		mu.Lock()
		clear(protos)
		mu.Unlock()
		s := run(t, Config{
			Targets: []Target{{URL: tc.url}},
			Steps:   []Step{{Rate: 100, Duration: 200 * time.Millisecond}},
			HTTP2:   tc.http2, TLS: tlsCfg,
		}).Steps[0]
		mu.Lock()
		if s.Good != 20 || protos[tc.proto] != 20 {
			t.Errorf("%s HTTP2 %v: Good %d, server saw protocols %v; want 20 of HTTP/%d", tc.url, tc.http2, s.Good, protos, tc.proto)
		}
		mu.Unlock()
	}
}
