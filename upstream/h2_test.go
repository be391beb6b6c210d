package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// trailerEcho answers with the request body and its X-Req trailer, and
// sets the response trailer X-Resp.
func trailerEcho(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set("Trailer", "X-Resp")
	w.Header().Set("X-Proto", r.Proto)
	io.WriteString(w, string(body)+"|"+r.Trailer.Get("X-Req"))
	w.Header().Set("X-Resp", "resp-trailer")
}

// sendWithTrailers posts "payload" with the trailer X-Req through rt.
func sendWithTrailers(t *testing.T, rt http.RoundTripper, url string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, io.NopCloser(strings.NewReader("payload")))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	req.Trailer = http.Header{"X-Req": {"req-trailer"}}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 || resp.Header.Get("X-Proto") != "HTTP/2.0" {
		t.Errorf("response %s, server saw %q: want HTTP/2 both ways", resp.Proto, resp.Header.Get("X-Proto"))
	}
	if string(body) != "payload|req-trailer" {
		t.Errorf("body %q, want \"payload|req-trailer\" (the request trailer arrived)", body)
	}
	if got := resp.Trailer.Get("X-Resp"); got != "resp-trailer" {
		t.Errorf("response trailer X-Resp = %q, want \"resp-trailer\"", got)
	}
}

func closeIdle(rt http.RoundTripper) {
	rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
}

func TestH2CTrailersRoundTrip(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: http.HandlerFunc(trailerEcho), Protocols: &protos}
	go srv.Serve(ln)
	defer srv.Close()
	rt := NewH2Transport(Config{}, true)
	defer closeIdle(rt)
	sendWithTrailers(t, rt, "http://"+ln.Addr().String()+"/grpc.Echo/Say")
}

// tlsServer starts an httptest TLS server, with HTTP/2 when h2, and returns
// it with a client config trusting its certificate.
func tlsServer(t *testing.T, h2 bool) (*httptest.Server, *tls.Config) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(trailerEcho))
	srv.EnableHTTP2 = h2
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv, &tls.Config{RootCAs: roots}
}

func TestH2OverTLS(t *testing.T) {
	checkLeaks(t)
	srv, tc := tlsServer(t, true)
	rt := NewH2Transport(Config{TLS: tc}, false)
	defer closeIdle(rt)
	sendWithTrailers(t, rt, srv.URL+"/x")
}

func TestH2RefusesServerWithoutH2(t *testing.T) {
	checkLeaks(t)
	srv, tc := tlsServer(t, false)
	rt := NewH2Transport(Config{TLS: tc}, false)
	defer closeIdle(rt)
	// A Go server offering only http/1.1 refuses the handshake itself.
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	if _, err := rt.RoundTrip(req); err == nil {
		t.Error("HTTP/1.1-only TLS server: no error")
	}
	// A server with no ALPN completes the handshake; the dial refuses it.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: srv.TLS.Certificates})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err == nil {
			c.(*tls.Conn).Handshake()
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-done }()
	req, _ = http.NewRequest("GET", "https://"+ln.Addr().String()+"/", nil)
	if _, err = rt.RoundTrip(req); !errors.Is(err, errNoH2) {
		t.Errorf("TLS server without ALPN: %v, want errNoH2", err)
	}
}

func TestPoolOverTLS(t *testing.T) {
	checkLeaks(t)
	srv, tc := tlsServer(t, false)
	addr := strings.TrimPrefix(srv.URL, "https://")
	p := NewPool(addr, Config{TLS: tc})
	defer p.Close()
	req := &Request{
		Method:     []byte("POST"),
		Head:       []byte("POST / HTTP/1.1\r\nHost: b\r\nContent-Length: 4\r\n\r\n"),
		Body:       strings.NewReader("data"),
		BodyLength: 4,
	}
	for range 2 {
		st, body, err := do(t, p, req)
		if err != nil || st != 200 || body != "data|" {
			t.Fatalf("%d %q %v, want 200 \"data|\"", st, body, err)
		}
		req.Body = strings.NewReader("data")
	}
	if s := p.Stats(); s.Dials != 1 || s.Reused != 1 {
		t.Errorf("Stats = %+v, want one TLS connection reused", s)
	}
	// A pool that does not trust the certificate fails to dial.
	bad := NewPool(addr, Config{TLS: &tls.Config{}})
	defer bad.Close()
	_, _, err := do(t, bad, get("GET", "/"))
	wantKind(t, err, KindRefused)
}

// TestH2CFullDuplex streams both ways at once, as a bidirectional gRPC call
// does: each message sent is echoed back before the next is written.
func TestH2CFullDuplex(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		buf := make([]byte, 5)
		for {
			if _, err := io.ReadFull(r.Body, buf); err != nil {
				return
			}
			w.Write(buf)
			w.(http.Flusher).Flush()
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	rt := NewH2Transport(Config{}, true)
	defer closeIdle(rt)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/stream", pr)
	respc := make(chan *http.Response, 1)
	errc := make(chan error, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			errc <- err
			return
		}
		respc <- resp
	}()
	pw.Write([]byte("msg-1"))
	var resp *http.Response
	select {
	case resp = <-respc:
	case err := <-errc:
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 5)
	for _, m := range []string{"msg-1", "msg-2", "msg-3"} {
		if m != "msg-1" {
			pw.Write([]byte(m))
		}
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != m {
			t.Fatalf("echo %q %v, want %q before the next message is sent", buf, err, m)
		}
	}
	pw.Close()
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Errorf("after the request's end: %q %v, want a clean end", rest, err)
	}
}
