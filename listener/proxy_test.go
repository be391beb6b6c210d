package listener

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/overload"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// The address blocks of hand-built v2 headers: 203.0.113.7:4567 to
// 198.51.100.1:443, and [2001:db8::7]:4567 to [2001:db8::1]:443.
var (
	tcp4 = []byte{203, 0, 113, 7, 198, 51, 100, 1, 0x11, 0xd7, 0x01, 0xbb}
	tcp6 = []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x11, 0xd7, 0x01, 0xbb}
)

// v2 builds a PROXY v2 header by hand: signature, version and command,
// family and protocol, then the address block.
func v2(cmd, fam byte, addrs ...byte) string {
	h := []byte("\r\n\r\n\x00\r\nQUIT\n")
	h = append(h, cmd, fam, byte(len(addrs)>>8), byte(len(addrs)))
	return string(append(h, addrs...))
}

func TestProxyHeaderFromTrusted(t *testing.T) {
	checkLeaks(t)
	e := &echoEngine{name: "e"}
	r := start(t, overload.Config{}, 0, Config{ProxyFrom: loopback}, e)
	for _, c := range []struct {
		name, header string
		want         string // "" : the peer's own addresses
	}{
		{"v1 tcp4", "PROXY TCP4 203.0.113.7 198.51.100.1 4567 443\r\n", "203.0.113.7:4567 198.51.100.1:443"},
		{"v1 tcp6", "PROXY TCP6 2001:db8::7 2001:db8::1 4567 443\r\n", "[2001:db8::7]:4567 [2001:db8::1]:443"},
		{"v1 unknown", "PROXY UNKNOWN\r\n", ""},
		{"v2 tcp4", v2(0x21, 0x11, tcp4...), "203.0.113.7:4567 198.51.100.1:443"},
		{"v2 tcp6", v2(0x21, 0x21, tcp6...), "[2001:db8::7]:4567 [2001:db8::1]:443"},
		{"v2 local", v2(0x20, 0x00), ""},
		{"v2 local with addresses", v2(0x20, 0x11, tcp4...), ""}, // LOCAL: addresses ignored
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, r.addr)
			want := c.want
			if want == "" {
				want = conn.LocalAddr().String() + " " + r.addr
			}
			if _, err := io.WriteString(conn, c.header+"hello\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			line, err := br.ReadString('\n')
			if err != nil || line != "e "+want+"\n" {
				t.Fatalf("engine saw %q (%v), want %q", line, err, "e "+want)
			}
			if echo, err := br.ReadString('\n'); err != nil || echo != "hello\n" {
				t.Errorf("bytes after the header: %q (%v), want hello", echo, err)
			}
		})
	}
	if s := r.Stats(); s.ProxyRead != 7 || s.ProxyRejected != 0 {
		t.Errorf("stats %+v, want 7 headers read, none rejected", s)
	}
}

func TestProxyHeaderFromUntrustedNotRead(t *testing.T) {
	checkLeaks(t)
	e := &echoEngine{name: "e"}
	r := start(t, overload.Config{}, 0, Config{ProxyFrom: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, ProxyRequired: true}, e)
	conn := dial(t, r.addr)
	const header = "PROXY TCP4 203.0.113.7 198.51.100.1 4567 443\r\n"
	if _, err := io.WriteString(conn, header); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if want := "e " + conn.LocalAddr().String() + " " + r.addr + "\n"; err != nil || line != want {
		t.Fatalf("engine saw %q (%v), want the peer's addresses %q", line, err, want)
	}
	if echo, err := br.ReadString('\n'); err != nil || echo != header {
		t.Errorf("the engine got %q (%v), want the header itself as data", echo, err)
	}
	if s := r.Stats(); s.ProxyRead != 0 || s.ProxyRejected != 0 {
		t.Errorf("stats %+v, want nothing read or rejected", s)
	}
}

func TestProxyHeaderMissing(t *testing.T) {
	checkLeaks(t)
	e := &echoEngine{name: "e"}
	optional := start(t, overload.Config{}, 0, Config{ProxyFrom: loopback}, e)
	required := start(t, overload.Config{}, 0, Config{ProxyFrom: loopback, ProxyRequired: true}, e)

	conn := dial(t, optional.addr)
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if want := "e " + conn.LocalAddr().String() + " " + optional.addr + "\n"; err != nil || line != want {
		t.Fatalf("optional: engine saw %q (%v), want %q", line, err, want)
	}
	if echo, _ := br.ReadString('\n'); echo != "GET / HTTP/1.1\r\n" {
		t.Errorf("optional: the engine got %q, want the request line", echo)
	}

	if line, err := send(t, required.addr, "GET / HTTP/1.1\r\n"); err == nil {
		t.Errorf("required: served (%q), want closed", line)
	}
	waitFor(t, "the rejection counted", func() bool { return required.Stats().ProxyRejected == 1 })
	if n := e.conns.Load(); n != 1 {
		t.Errorf("engine saw %d connections, want 1 (the optional listener's)", n)
	}
}

func TestProxyHeaderMalformed(t *testing.T) {
	checkLeaks(t)
	e := &echoEngine{name: "e"}
	// A long timeout: these are cut at once, not by it.
	r := start(t, overload.Config{}, 0, Config{ProxyFrom: loopback, HeaderTimeout: time.Minute}, e)
	for _, h := range []string{
		"PROXY TCP4 nonsense\r\n",
		"PROXY TCP4 203.0.113.7 198.51.100.1 4567", // a v1 line must come in one piece
		"PROXY TCP9 203.0.113.7 198.51.100.1 4567 443\r\n",
		v2(0x21, 0x11, 1, 2, 3), // address block too short for TCP4
		v2(0x2f, 0x11),          // unknown command
	} {
		if line, err := send(t, r.addr, h); err == nil {
			t.Errorf("header %q: served (%q), want closed", h, line)
		}
	}
	waitFor(t, "5 rejections", func() bool { return r.Stats().ProxyRejected == 5 })
	if n := e.conns.Load(); n != 0 {
		t.Errorf("engine saw %d connections, want none", n)
	}
}

// TestProxyHeaderSlowloris: a header still incomplete at HeaderTimeout
// closes the connection; nothing at all within it closes it only when the
// header is required, else the engine gets it with the peer's address.
func TestProxyHeaderSlowloris(t *testing.T) {
	checkLeaks(t)
	const timeout = 300 * time.Millisecond
	e := &echoEngine{name: "e"}
	optional := start(t, overload.Config{}, 0, Config{ProxyFrom: loopback, HeaderTimeout: timeout}, e)
	required := start(t, overload.Config{}, 0, Config{ProxyFrom: loopback, HeaderTimeout: timeout, ProxyRequired: true}, e)
	for _, c := range []struct {
		name, addr, sent string
		served           bool
	}{
		{"v1 signature cut", optional.addr, "PRO", false},
		{"v2 header cut", optional.addr, v2(0x21, 0x11, tcp4...)[:20], false},
		{"silent, optional", optional.addr, "", true},
		{"silent, required", required.addr, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			begin := time.Now()
			line, err := send(t, c.addr, c.sent)
			took := time.Since(begin)
			if served := err == nil; served != c.served {
				t.Fatalf("served %v (%q, %v), want %v", served, line, err, c.served)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the client's own 10 s deadline passed: %v", err)
			}
			if took < timeout {
				t.Errorf("answered after %v, before the header timeout of %v", took, timeout)
			}
		})
	}
	if o, r := optional.Stats().ProxyRejected, required.Stats().ProxyRejected; o != 2 || r != 1 {
		t.Errorf("rejected %d and %d, want 2 and 1", o, r)
	}
}

func TestPerIPAfterProxyHeader(t *testing.T) {
	checkLeaks(t)
	e := &echoEngine{name: "e"}
	r := start(t, overload.Config{}, 0, Config{ProxyFrom: loopback, MaxPerIP: 1}, e)
	from := func(ip string) string { return "PROXY TCP4 " + ip + " 198.51.100.1 4567 443\r\n" }
	if _, err := send(t, r.addr, from("203.0.113.7")); err != nil { // held open until the test ends
		t.Fatal(err)
	}
	if line, err := send(t, r.addr, from("203.0.113.7")); err == nil {
		t.Errorf("a second connection of 203.0.113.7 was served (%q)", line)
	}
	if _, err := send(t, r.addr, from("203.0.113.8")); err != nil {
		t.Errorf("another client address was refused: %v", err)
	}
	s := r.gate.Stats()
	if s.Refused[overload.ReasonPerIP] != 1 || s.IPs != 2 || s.MaxPerIP != 1 {
		t.Errorf("gate %+v, want 1 per-IP refusal, 2 addresses, MaxPerIP 1", s)
	}
}

func TestRefusedAtAccept(t *testing.T) {
	checkLeaks(t)
	e := &echoEngine{name: "e"}
	r := start(t, overload.Config{}, 1, Config{}, e)
	if _, err := send(t, r.addr, ""); err != nil { // held: the listener's one place
		t.Fatal(err)
	}
	if line, err := send(t, r.addr, ""); err == nil {
		t.Errorf("a second connection was served (%q)", line)
	}
	if s := r.Stats(); s.Accepted != 1 || s.Refused != 1 {
		t.Errorf("stats %+v, want 1 accepted, 1 refused", s)
	}
	if n := r.gate.Stats().Refused[overload.ReasonListenerMaxConns]; n != 1 {
		t.Errorf("gate refused %d for listener-max-connections, want 1", n)
	}
	if n := e.conns.Load(); n != 1 {
		t.Errorf("engine saw %d connections, want 1", n)
	}
}

func TestAcceptErrorsPause(t *testing.T) {
	checkLeaks(t)
	var logs strings.Builder
	ln := &failing{errs: 3, closed: make(chan struct{})}
	g, err := overload.New(overload.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, g.Gate("f"), Config{Logger: slogTo(&logs)}, &echoEngine{})
	served := make(chan error, 1)
	go func() { served <- l.Serve() }()
	waitFor(t, "three failed accepts", func() bool { return ln.calls() > 3 })
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v on a temporary error", err)
	default:
	}
	_ = l.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
	if n := strings.Count(logs.String(), "listener: accept failed; retrying"); n != 3 {
		t.Errorf("logged %d accept failures, want 3:\n%s", n, logs.String())
	}
}
