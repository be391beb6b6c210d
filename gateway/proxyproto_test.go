package gateway

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/internal/syncbuf"
)

// xffBackend answers "xff=<X-Forwarded-For>" and counts the requests.
func xffBackend(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fmt.Fprintf(w, "xff=%s", r.Header.Get("X-Forwarded-For"))
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String(), &n
}

// v2Header builds a PROXY protocol v2 header by hand (the spec's section
// 2.2): the 12-byte signature, version 2 and command PROXY (0x21), family
// AF_INET over STREAM (0x11), the length of the address block (12), then
// source and destination addresses and ports, big-endian.
func v2Header(src, dst netip.AddrPort) []byte {
	b := []byte("\r\n\r\n\x00\r\nQUIT\n")
	b = append(b, 0x21, 0x11, 0, 12)
	b = append(b, src.Addr().AsSlice()...)
	b = append(b, dst.Addr().AsSlice()...)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	return binary.BigEndian.AppendUint16(b, dst.Port())
}

const v1Header = "PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n"

// ppGet opens a connection to addr, writes prefix and a GET of path in
// one write (as a load balancer sends them), and reads the answer. With
// no answer it returns status 0, the bytes that came back and the error.
func ppGet(t *testing.T, addr, prefix, path string) (status int, body string, err error) {
	t.Helper()
	c, br := dialRaw(t, addr)
	defer c.Close()
	if _, err := io.WriteString(c, prefix+crlf("GET "+path+" HTTP/1.1\nHost: app\nConnection: close\n\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		rest, _ := io.ReadAll(br)
		return 0, string(rest), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestProxyProtocolHTTP: an http listener accepting PROXY headers from
// 127.0.0.1 (trusted_proxies unset) forwards the header's source as
// X-Forwarded-For and logs it as the client, for a v1 header and for a
// v2 one; with required: true a connection without a header is closed
// unanswered; a listener without proxy_protocol, and one accepting headers
// only from another network, answer a header with 400, and no refused
// request reaches the backend.
func TestProxyProtocolHTTP(t *testing.T) {
	noLeaks(t)
	be, seen := xffBackend(t)
	var log syncbuf.Buffer
	g := startOpts(t, `
version: 1
admin: {address: off}
listeners:
  - {name: pp, address: "127.0.0.1:0", proxy_protocol: {from: [127.0.0.1/32]}}
  - {name: required, address: "127.0.0.1:0", proxy_protocol: {from: [127.0.0.1/32], required: true}}
  - {name: plain, address: "127.0.0.1:0"}
  - {name: elsewhere, address: "127.0.0.1:0", proxy_protocol: {from: [192.0.2.0/24]}}
routes: [{cluster: app, access_log: full}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`, Options{AccessLog: slog.New(slog.NewJSONHandler(&log, nil))})
	v2 := string(v2Header(netip.MustParseAddrPort("198.51.100.9:4242"), netip.MustParseAddrPort("127.0.0.1:80")))
	for _, tc := range []struct{ name, listener, header, want string }{
		{"v1", "pp", v1Header, "xff=203.0.113.7"},
		{"v2", "pp", v2, "xff=198.51.100.9"},
		{"no header, not required", "pp", "", "xff=127.0.0.1"},
		{"v2, required", "required", v2, "xff=198.51.100.9"},
	} {
		st, body, err := ppGet(t, g.Addr(tc.listener), tc.header, "/"+tc.listener)
		if err != nil || st != 200 || body != tc.want {
			t.Errorf("%s: %d %q (%v), want 200 %q", tc.name, st, body, err, tc.want)
		}
	}
	for _, client := range []string{"203.0.113.7", "198.51.100.9"} {
		eventually(t, 5*time.Second, "an access log line with client "+client, func() bool {
			return strings.Contains(log.String(), `"client":"`+client+`"`)
		})
	}
	served := seen.Load()
	if st, rest, err := ppGet(t, g.Addr("required"), "", "/required"); err == nil || rest != "" {
		t.Errorf("required, no header: status %d, %q after the status line (err %v), want the connection closed with nothing sent", st, rest, err)
	}
	for _, l := range []string{"plain", "elsewhere"} {
		if st, _, err := ppGet(t, g.Addr(l), v1Header, "/"+l); st != 400 {
			t.Errorf("listener %s, v1 header: status %d (%v), want 400", l, st, err)
		}
	}
	if n := seen.Load() - served; n != 0 {
		t.Errorf("%d refused requests reached the backend, want 0", n)
	}
}

// proxyHeader is a PROXY v2 header as a raw backend read it.
type proxyHeader struct {
	src, dst netip.AddrPort
	err      error
}

// readV2 parses a PROXY protocol v2 header of an IPv4 or IPv6 PROXY
// command by hand from br.
func readV2(br *bufio.Reader) (src, dst netip.AddrPort, err error) {
	head := make([]byte, 16)
	if _, err = io.ReadFull(br, head); err != nil {
		return src, dst, err
	}
	if string(head[:12]) != "\r\n\r\n\x00\r\nQUIT\n" || head[12] != 0x21 {
		return src, dst, fmt.Errorf("not a v2 PROXY header: % x", head)
	}
	body := make([]byte, binary.BigEndian.Uint16(head[14:]))
	if _, err = io.ReadFull(br, body); err != nil {
		return src, dst, err
	}
	n := map[byte]int{0x11: 4, 0x21: 16}[head[13]] // TCP over IPv4, IPv6
	if n == 0 || len(body) < 2*n+4 {
		return src, dst, fmt.Errorf("family 0x%02x, %d address bytes", head[13], len(body))
	}
	sa, _ := netip.AddrFromSlice(body[:n])
	da, _ := netip.AddrFromSlice(body[n : 2*n])
	return netip.AddrPortFrom(sa, binary.BigEndian.Uint16(body[2*n:])),
		netip.AddrPortFrom(da, binary.BigEndian.Uint16(body[2*n+2:])), nil
}

// ppBackend is a raw TCP backend that reads a v2 header from every
// connection, reports it on the returned channel (room for 8), then
// echoes.
func ppBackend(t *testing.T) (string, chan proxyHeader) {
	t.Helper()
	got := make(chan proxyHeader, 8)
	addr, _ := rawServer(t, func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		src, dst, err := readV2(br)
		got <- proxyHeader{src, dst, err}
		if err == nil {
			_, _ = io.Copy(c, br)
		}
	})
	return addr, got
}

// TestL4SendsProxyV2: a tcp listener over a cluster with proxy_protocol v2
// starts each upstream connection with a v2 header whose source is the
// client's address and destination the listener's; behind a trusted load
// balancer (a v1 header in), the header sent on carries the balancer's
// header's addresses.
func TestL4SendsProxyV2(t *testing.T) {
	noLeaks(t)
	be, got := ppBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: direct, address: "127.0.0.1:0", protocol: tcp, cluster: pp}
  - {name: behindlb, address: "127.0.0.1:0", protocol: tcp, cluster: pp, proxy_protocol: {from: [127.0.0.1/32]}}
clusters: [{name: pp, proxy_protocol: v2, endpoints: ["`+be+`"]}]
`)
	for _, tc := range []struct {
		listener, header string
		src, dst         string // "" : the connection's own
	}{
		{"direct", "", "", ""},
		{"behindlb", "PROXY TCP4 203.0.113.7 10.0.0.1 5555 443\r\n", "203.0.113.7:5555", "10.0.0.1:443"},
	} {
		c, br := dialRaw(t, g.Addr(tc.listener))
		if _, err := io.WriteString(c, tc.header+"hello\n"); err != nil {
			t.Fatal(err)
		}
		if line, err := br.ReadString('\n'); err != nil || line != "hello\n" {
			t.Fatalf("%s: echo %q (%v), want \"hello\\n\"", tc.listener, line, err)
		}
		wantSrc, wantDst := tc.src, tc.dst
		if wantSrc == "" {
			wantSrc, wantDst = c.LocalAddr().String(), c.RemoteAddr().String()
		}
		h := <-got // the echo came after the backend's report
		if h.err != nil || h.src.String() != wantSrc || h.dst.String() != wantDst {
			t.Errorf("%s: backend read source %s destination %s (%v), want %s and %s", tc.listener, h.src, h.dst, h.err, wantSrc, wantDst)
		}
		_ = c.Close()
	}
}

// keepGet sends a keep-alive GET of path on c (after prefix) and reads
// the answer's status, the connection left open.
func keepGet(c net.Conn, br *bufio.Reader, prefix, path string) (int, error) {
	if _, err := io.WriteString(c, prefix+crlf("GET "+path+" HTTP/1.1\nHost: app\n\n")); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// closedAtOnce reports how long the gateway took to close c, which the
// client has sent nothing on (or only a PROXY header and a request the
// gateway must not answer), and what it sent first.
func closedAtOnce(c net.Conn, br *bufio.Reader) (time.Duration, string) {
	t0 := time.Now()
	got, _ := io.ReadAll(br) // ends with EOF or a reset; dialRaw's 10 s deadline bounds it
	return time.Since(t0), string(got)
}

// dialOrReset is dialRaw for a connection the gateway may refuse: one it
// resets at accept can be reset before the client's connect returns (nil,
// then: refused at once).
func dialOrReset(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// TestPerIPLimit: with max_connections_per_ip 3, three idle keep-alive
// connections from 127.0.0.1 are served; a fourth is closed at once (well
// before the 60 s header and idle timeouts) while the three still serve;
// once one of them closes, a new connection is served. Behind a PROXY
// header the limit counts the header's source: with a limit of 1, two
// clients the balancer names apart are both served, a second connection
// of one of them is closed unanswered.
func TestPerIPLimit(t *testing.T) {
	noLeaks(t)
	be, _ := xffBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners:
  - {name: web, address: "127.0.0.1:0", limits: {max_connections_per_ip: 3, header_timeout: 60s, idle_timeout: 60s}}
  - {name: lb, address: "127.0.0.1:0", proxy_protocol: {from: [127.0.0.1/32]}, limits: {max_connections_per_ip: 1, header_timeout: 60s, idle_timeout: 60s}}
routes: [{cluster: app}]
clusters: [{name: app, endpoints: ["`+be+`"]}]
`)
	type client struct {
		c  net.Conn
		br *bufio.Reader
	}
	var open []client
	for i := range 3 {
		c, br := dialRaw(t, g.Addr("web"))
		if st, err := keepGet(c, br, "", "/"); st != 200 {
			t.Fatalf("connection %d: %d (%v), want 200", i+1, st, err)
		}
		open = append(open, client{c, br})
	}
	if c4, br4 := dialOrReset(t, g.Addr("web")); c4 != nil {
		if took, got := closedAtOnce(c4, br4); took > 5*time.Second || got != "" {
			t.Fatalf("4th connection: closed after %v having sent %q, want closed at once with nothing sent", took, got)
		}
	}
	for i, o := range open {
		if st, err := keepGet(o.c, o.br, "", "/"); st != 200 {
			t.Fatalf("connection %d after the 4th was refused: %d (%v), want 200", i+1, st, err)
		}
	}
	_ = open[0].c.Close()
	refused := 0
	eventually(t, 5*time.Second, "a new connection served after one of three closed", func() bool {
		c, br := dialOrReset(t, g.Addr("web"))
		if c == nil {
			refused++
			return false
		}
		defer c.Close()
		if st, _ := keepGet(c, br, "", "/"); st == 200 {
			return true
		}
		refused++ // the gateway may not have seen the close yet
		return false
	})
	t.Logf("new connection served after %d refused while the closed one was still counted", refused)

	hdr := func(ip string) string { return "PROXY TCP4 " + ip + " 127.0.0.1 5555 80\r\n" }
	for _, ip := range []string{"203.0.113.7", "203.0.113.8"} {
		c, br := dialRaw(t, g.Addr("lb"))
		if st, err := keepGet(c, br, hdr(ip), "/"); st != 200 {
			t.Fatalf("lb, client %s: %d (%v), want 200", ip, st, err)
		}
	}
	c, br := dialRaw(t, g.Addr("lb"))
	if _, err := io.WriteString(c, hdr("203.0.113.7")+crlf("GET / HTTP/1.1\nHost: app\n\n")); err != nil {
		t.Fatal(err)
	}
	if took, got := closedAtOnce(c, br); took > 5*time.Second || got != "" {
		t.Fatalf("lb, second connection of 203.0.113.7: closed after %v having sent %q, want closed at once, unanswered", took, got)
	}
}
