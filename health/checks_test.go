package health

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// seen records what an HTTP backend received.
type seen struct {
	mu   sync.Mutex
	last request
}

type request struct{ method, host, path, uri, agent string }

func (s *seen) get() request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func backend(t *testing.T, code int, tlsOn bool) (*httptest.Server, *seen) {
	s := &seen{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.last = request{r.Method, r.Host, r.URL.Path, r.URL.RequestURI(), r.UserAgent()}
		s.mu.Unlock()
		if code == http.StatusFound {
			http.Redirect(w, r, "/elsewhere", code)
			return
		}
		w.WriteHeader(code)
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes below are expected
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, s
}

func addrOf(srv *httptest.Server) string { return srv.Listener.Addr().String() }

func TestHTTPCheckStatus(t *testing.T) {
	for _, tc := range []struct {
		code     int
		expected []StatusRange
		pass     bool
	}{
		{200, nil, true},
		{204, nil, true},
		{302, nil, true}, // not followed: a redirect is an answer
		{399, nil, true},
		{404, nil, false},
		{503, nil, false},
		{503, []StatusRange{{503, 503}}, true},
		{200, []StatusRange{{204, 204}, {500, 599}}, false},
		{204, []StatusRange{{204, 204}, {500, 599}}, true},
	} {
		srv, _ := backend(t, tc.code, false)
		err := (&HTTPCheck{Expected: tc.expected}).Check(testCtx(t), addrOf(srv))
		if tc.pass != (err == nil) {
			t.Errorf("status %d, expected %v: err = %v, want pass=%v", tc.code, tc.expected, err, tc.pass)
		}
		var se *StatusError
		if !tc.pass && (!errors.As(err, &se) || se.Code != tc.code) {
			t.Errorf("status %d: err = %v, want a StatusError with code %d", tc.code, err, tc.code)
		}
	}
}

func TestHTTPCheckRequest(t *testing.T) {
	srv, s := backend(t, 200, false)
	c := &HTTPCheck{Method: http.MethodHead, Path: "/healthz?deep=0", Host: "cart.internal:8080"}
	if err := c.Check(testCtx(t), addrOf(srv)); err != nil {
		t.Fatal(err)
	}
	if r := s.get(); r != (request{"HEAD", "cart.internal:8080", "/healthz", "/healthz?deep=0", "spillway-health-check"}) {
		t.Errorf("server saw %+v", r)
	}

	// Defaults: GET /, Host = the address.
	if err := (&HTTPCheck{}).Check(testCtx(t), addrOf(srv)); err != nil {
		t.Fatal(err)
	}
	if r := s.get(); r.method != "GET" || r.path != "/" || r.host != addrOf(srv) {
		t.Errorf("defaults: server saw %+v", r)
	}
	// A path without its leading slash gets one.
	if err := (&HTTPCheck{Path: "ready"}).Check(testCtx(t), addrOf(srv)); err != nil || s.get().path != "/ready" {
		t.Errorf("path ready: err %v, server saw %q", err, s.get().path)
	}
}

func TestHTTPCheckTLS(t *testing.T) {
	srv, s := backend(t, 200, true)
	traffic := srv.Client().Transport.(*http.Transport).TLSClientConfig // what the traffic would use
	if err := (&HTTPCheck{TLS: traffic}).Check(testCtx(t), addrOf(srv)); err != nil {
		t.Fatalf("TLS check: %v", err)
	}
	// The Host header also names the server for the handshake; the test
	// certificate covers example.com.
	if err := (&HTTPCheck{TLS: traffic, Host: "example.com"}).Check(testCtx(t), addrOf(srv)); err != nil {
		t.Fatalf("TLS check with Host: %v", err)
	}
	if h := s.get().host; h != "example.com" {
		t.Errorf("server saw Host %q", h)
	}
	// A name the certificate does not cover fails the handshake.
	if err := (&HTTPCheck{TLS: traffic, Host: "other.test"}).Check(testCtx(t), addrOf(srv)); err == nil {
		t.Error("TLS check with a foreign server name passed")
	}
	// Plain HTTP to a TLS port is answered 400 by Go's server.
	var se *StatusError
	if err := (&HTTPCheck{}).Check(testCtx(t), addrOf(srv)); !errors.As(err, &se) || se.Code != 400 {
		t.Errorf("plain check of a TLS port: %v, want status 400", err)
	}
	// A caller-supplied client is used as is.
	if err := (&HTTPCheck{TLS: traffic, Client: srv.Client()}).Check(testCtx(t), addrOf(srv)); err != nil {
		t.Errorf("with the server's client: %v", err)
	}
}

func TestHTTPCheckValidate(t *testing.T) {
	for _, tc := range []struct {
		c     *HTTPCheck
		field string
	}{
		{&HTTPCheck{Method: "GE T"}, "Method"},
		{&HTTPCheck{Path: "/a b"}, "Path"},
		{&HTTPCheck{Expected: []StatusRange{{200, 299}, {300, 200}}}, "Expected[1]"},
		{&HTTPCheck{Expected: []StatusRange{{99, 200}}}, "Expected[0]"},
		{&HTTPCheck{Expected: []StatusRange{{500, 600}}}, "Expected[0]"},
	} {
		var ce *ConfigError
		if err := tc.c.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: %v, want a ConfigError on %s", tc.c, err, tc.field)
		}
		if _, err := NewChecker(tc.c, ActiveConfig{}, CheckerOptions{}); !errors.Is(err, ErrConfig) {
			t.Errorf("NewChecker accepted %+v: %v", tc.c, err)
		}
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestTCPCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	if err := (TCPCheck{}).Check(testCtx(t), ln.Addr().String()); err != nil {
		t.Fatalf("listener: %v", err)
	}
	<-accepted
	if err := (TCPCheck{}).Check(testCtx(t), closedAddr(t)); err == nil {
		t.Error("closed port passed")
	}
	if err := (&HTTPCheck{}).Check(testCtx(t), closedAddr(t)); err == nil {
		t.Error("HTTP check of a closed port passed")
	}
}

func TestGRPCCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := grpchealth.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(ln)
	defer srv.Stop()
	addr := ln.Addr().String()

	hs.SetServingStatus("cart", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("search", healthpb.HealthCheckResponse_NOT_SERVING)
	if err := (GRPCCheck{Service: "cart"}).Check(testCtx(t), addr); err != nil {
		t.Errorf("SERVING service: %v", err)
	}
	if err := (GRPCCheck{}).Check(testCtx(t), addr); err != nil {
		t.Errorf("whole server: %v", err)
	}
	if err := (GRPCCheck{Service: "search"}).Check(testCtx(t), addr); !errors.Is(err, ErrNotServing) {
		t.Errorf("NOT_SERVING service: %v, want ErrNotServing", err)
	}
	if err := (GRPCCheck{Service: "nope"}).Check(testCtx(t), addr); status.Code(err) != codes.NotFound {
		t.Errorf("unknown service: %v, want NotFound", err)
	}
	// The state follows the server's.
	hs.SetServingStatus("cart", healthpb.HealthCheckResponse_NOT_SERVING)
	if err := (GRPCCheck{Service: "cart"}).Check(testCtx(t), addr); !errors.Is(err, ErrNotServing) {
		t.Errorf("cart after NOT_SERVING: %v", err)
	}
	if err := (GRPCCheck{}).Check(testCtx(t), closedAddr(t)); status.Code(err) != codes.Unavailable {
		t.Errorf("closed port: %v, want Unavailable", err)
	}
}
