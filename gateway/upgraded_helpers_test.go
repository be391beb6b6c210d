package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// echoer is a long-lived exchange through the gateway (a WebSocket or a
// gRPC bidirectional stream) that echoes a message every period until
// stopped, counting the echoes and keeping the first error.
type echoer struct {
	name   string
	echo   func(msg string) error
	echoes atomic.Int64
	mu     sync.Mutex
	err    error
	stop   chan struct{}
	done   chan struct{}
}

func runEchoer(name string, period time.Duration, echo func(string) error) *echoer {
	e := &echoer{name: name, echo: echo, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-e.stop:
				return
			case <-tick.C:
			}
			if err := e.echo(fmt.Sprintf("%s message %d", name, i)); err != nil {
				e.mu.Lock()
				e.err = fmt.Errorf("%s: echo %d: %w", name, i, err)
				e.mu.Unlock()
				return
			}
			e.echoes.Add(1)
		}
	}()
	return e
}

// halt stops the echo loop and returns its first error.
func (e *echoer) halt() error {
	close(e.stop)
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// wsConn is a client WebSocket through the gateway.
type wsConn struct {
	c  net.Conn
	br *bufio.Reader
}

// dialWS opens a WebSocket to path through the gateway at addr.
func dialWS(t *testing.T, addr, path string) *wsConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := strings.Replace(wsUpgrade, "GET /chat", "GET "+path, 1)
	if _, err := io.WriteString(c, crlf(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("WebSocket handshake on %s: %d, want 101", path, resp.StatusCode)
	}
	return &wsConn{c: c, br: br}
}

// maskedFrame builds a final client frame, masked (payload under 126
// bytes).
func maskedFrame(op byte, payload []byte) []byte {
	key := [4]byte{0x11, 0x22, 0x33, 0x44}
	out := append([]byte{0x80 | op, 0x80 | byte(len(payload))}, key[:]...)
	for i, b := range payload {
		out = append(out, b^key[i%4])
	}
	return out
}

// readServerFrame reads one unmasked final server frame.
func readServerFrame(br *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 != 0 || h[1]&0x7f >= 126 {
		return 0, nil, fmt.Errorf("unexpected frame head %x", h)
	}
	p := make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(br, p); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, p, nil
}

// echo sends a text frame and reads its echo, within 5 s.
func (w *wsConn) echo(msg string) error {
	_ = w.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := w.c.Write(maskedFrame(1, []byte(msg))); err != nil {
		return err
	}
	op, p, err := readServerFrame(w.br)
	if err != nil {
		return err
	}
	if op != 1 || string(p) != msg {
		return fmt.Errorf("echo op %d %q, want text %q", op, p, msg)
	}
	return nil
}

// close sends a close frame (status 1000), reads its echo, and expects
// the end of the connection.
func (w *wsConn) close() error {
	_ = w.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := w.c.Write(maskedFrame(8, []byte{0x03, 0xe8})); err != nil {
		return err
	}
	op, p, err := readServerFrame(w.br)
	if err != nil || op != 8 || string(p) != "\x03\xe8" {
		return fmt.Errorf("close echo op %d %x (%v), want 8 03e8", op, p, err)
	}
	if rest, err := io.ReadAll(w.br); err != nil || len(rest) != 0 {
		return fmt.Errorf("after the close: %q %v, want EOF", rest, err)
	}
	return w.c.Close()
}

// grpcStream is one test.Echo/Echo stream through the gateway.
type grpcStream struct {
	st     grpc.ClientStream
	cancel context.CancelFunc
	sent   int
}

func openStream(t *testing.T, cc *grpc.ClientConn) *grpcStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st, err := cc.NewStream(ctx, &echoDesc.Streams[0], "/test.Echo/Echo", grpc.CallContentSubtype("raw"))
	if err != nil {
		t.Fatal(err)
	}
	return &grpcStream{st: st, cancel: cancel}
}

func (s *grpcStream) echo(msg string) error {
	s.sent++
	return echoOnce(s.st, msg)
}

// close ends the stream and checks its OK status and the backend's count
// of messages in the trailer.
func (s *grpcStream) close() error {
	defer s.cancel()
	if err := s.st.CloseSend(); err != nil {
		return err
	}
	var m []byte
	if err := s.st.RecvMsg(&m); !errors.Is(err, io.EOF) {
		return fmt.Errorf("at the end: %v, want io.EOF (status OK)", err)
	}
	if got := s.st.Trailer().Get("x-echo-count"); len(got) != 1 || got[0] != fmt.Sprint(s.sent) {
		return fmt.Errorf("trailer x-echo-count %q, want [%d]", got, s.sent)
	}
	return nil
}
