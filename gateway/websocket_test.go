package gateway

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// wsGUID is RFC 6455's fixed GUID for Sec-WebSocket-Accept.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsBackend completes WebSocket handshakes by hand and echoes every data
// frame unmasked; it answers a close frame with the same close frame and
// closes the connection. It keeps the handshake heads it read.
type wsBackend struct {
	addr     string
	requests atomic.Int64
	mu       sync.Mutex
	heads    []http.Header
	errs     []error // frame errors, checked at the end of the test
}

func newWSBackend(t *testing.T) *wsBackend {
	t.Helper()
	b := &wsBackend{}
	// Registered first, so it runs after rawServer's stop: every frame
	// error is in by then.
	t.Cleanup(func() {
		for _, err := range b.errs {
			t.Errorf("websocket backend: %v", err)
		}
	})
	b.addr, _ = rawServer(t, b.serve)
	return b
}

func (b *wsBackend) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	b.requests.Add(1)
	b.mu.Lock()
	b.heads = append(b.heads, req.Header)
	b.mu.Unlock()
	if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		_, _ = io.WriteString(c, "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n")
		return
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + wsGUID))
	_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Accept: "+base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n")
	for {
		op, payload, err := readFrame(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				b.fail(err)
			}
			return
		}
		if _, err := c.Write(frame(op, payload)); err != nil || op == 8 {
			return // a close frame is echoed, then the connection closed
		}
	}
}

func (b *wsBackend) fail(err error) {
	b.mu.Lock()
	b.errs = append(b.errs, err)
	b.mu.Unlock()
}

// readFrame reads one client frame (which must be masked, FIN set, at
// most 64 KiB) and returns its opcode and unmasked payload.
func readFrame(br *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	if h[0]&0x80 == 0 || h[1]&0x80 == 0 {
		return 0, nil, errors.New("frame not final or not masked")
	}
	n := int(h[1] & 0x7f)
	if n == 126 {
		var ext [2]byte
		if _, err := io.ReadFull(br, ext[:]); err != nil {
			return 0, nil, err
		}
		n = int(binary.BigEndian.Uint16(ext[:]))
	} else if n == 127 {
		return 0, nil, errors.New("frame over 64 KiB")
	}
	var key [4]byte
	if _, err := io.ReadFull(br, key[:]); err != nil {
		return 0, nil, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		return 0, nil, err
	}
	for i := range p {
		p[i] ^= key[i%4]
	}
	return h[0] & 0x0f, p, nil
}

// frame builds an unmasked final server frame (payload under 126 bytes).
func frame(op byte, payload []byte) []byte {
	return append([]byte{0x80 | op, byte(len(payload))}, payload...)
}

// wsUpgrade is RFC 6455's sample handshake (section 1.2), whose accept
// value the RFC gives as s3pPLMBiTxaQ9kYGzzhZRbK+xOo=.
const wsUpgrade = `GET /chat HTTP/1.1
Host: server.example.com
Upgrade: websocket
Connection: Upgrade
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==
Sec-WebSocket-Version: 13
Origin: http://example.com

`

// TestWebSocketEcho upgrades through the gateway, sends one masked text
// frame and reads its echo, then closes both ways; the handshake reached
// the backend with its WebSocket fields, and the leak check shows the
// tunnel's goroutines gone after the close.
func TestWebSocketEcho(t *testing.T) {
	noLeaks(t)
	be := newWSBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: ws, streaming: true, timeouts: {idle: 30s}}]
clusters: [{name: ws, endpoints: ["`+be.addr+`"]}]
`)
	c, br := dialRaw(t, g.Addr("web"))
	if _, err := io.WriteString(c, crlf(wsUpgrade)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" ||
		!strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") {
		t.Fatalf("handshake answer %d %v, want 101 with Upgrade: websocket and the RFC's accept value", resp.StatusCode, resp.Header)
	}
	// RFC 6455 section 5.7: a masked "Hello" text frame, and its unmasked echo.
	if _, err := c.Write([]byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 7)
	if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got, []byte{0x81, 0x05, 'H', 'e', 'l', 'l', 'o'}) {
		t.Fatalf("echo %x (%v), want 8105 48656c6c6f", got, err)
	}
	// Close, status 1000 (03e8) masked with 01020304: 02ea.
	if _, err := c.Write([]byte{0x88, 0x82, 0x01, 0x02, 0x03, 0x04, 0x02, 0xea}); err != nil {
		t.Fatal(err)
	}
	got = got[:4]
	if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got, []byte{0x88, 0x02, 0x03, 0xe8}) {
		t.Fatalf("close echo %x (%v), want 880203e8", got, err)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the close: %q %v, want the connection closed (EOF)", rest, err)
	}
	be.mu.Lock()
	h := be.heads[0]
	be.mu.Unlock()
	if h.Get("Sec-WebSocket-Key") != "dGhlIHNhbXBsZSBub25jZQ==" || h.Get("Sec-WebSocket-Version") != "13" ||
		!strings.EqualFold(h.Get("Connection"), "upgrade") || h.Get("Upgrade") != "websocket" {
		t.Errorf("backend's handshake head %v: want the key, version 13, Connection: Upgrade, Upgrade: websocket", h)
	}
}

// TestUpgradeNotAllowed: an Upgrade token the route does not list gets a
// 400 problem from the gateway, and the backend never sees the request.
func TestUpgradeNotAllowed(t *testing.T) {
	noLeaks(t)
	be := newWSBackend(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{cluster: ws}]
clusters: [{name: ws, endpoints: ["`+be.addr+`"]}]
`)
	for _, token := range []string{"foo", "websocket, foo"} {
		c, br := dialRaw(t, g.Addr("web"))
		req := strings.Replace(wsUpgrade, "Upgrade: websocket", "Upgrade: "+token, 1)
		if _, err := io.WriteString(c, crlf(req)); err != nil {
			t.Fatal(err)
		}
		code, upgrade, body := readRaw(t, br)
		if code != 400 || upgrade != "" || !strings.Contains(body, `"status":400`) {
			t.Errorf("Upgrade: %s: %d (Upgrade: %q) %s, want a 400 problem", token, code, upgrade, body)
		}
	}
	if n := be.requests.Load(); n != 0 {
		t.Fatalf("the backend read %d requests, want 0", n)
	}
}
