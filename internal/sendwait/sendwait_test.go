package sendwait

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection.
func pair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); p.Close() })
	return c.(*net.TCPConn), p.(*net.TCPConn)
}

// sender returns a Sender on c, or skips the test where there is none.
func sender(t *testing.T, c net.Conn) *Sender {
	t.Helper()
	s := new(Sender)
	if !s.Init(c) {
		t.Skip("no raw socket writes on this system")
	}
	return s
}

func TestSendAwaitsTheAnswer(t *testing.T) {
	c, p := pair(t)
	s := sender(t, c)
	got, release := make(chan []byte, 1), make(chan struct{})
	go func() {
		b := make([]byte, 5)
		_, _ = io.ReadFull(p, b)
		got <- b
		<-release
		_, _ = p.Write([]byte("world"))
	}()
	done := make(chan []byte, 1)
	go func() { done <- s.SendAwait([]byte("hello")) }()
	if b := <-got; string(b) != "hello" {
		t.Fatalf("peer read %q, want hello", b)
	}
	select {
	case <-done:
		t.Fatal("SendAwait returned before the answer was sent")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if rest := <-done; len(rest) != 0 {
		t.Fatalf("%d bytes left unsent", len(rest))
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "world" {
		t.Fatalf("read %q %v, want world", b, err)
	}
}

func TestSendAwaitBoundedByReadDeadline(t *testing.T) {
	c, _ := pair(t)
	s := sender(t, c)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if rest := s.SendAwait([]byte("hello")); len(rest) != 0 {
		t.Fatalf("%d bytes left unsent", len(rest))
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the wait: %v, want the deadline", err)
	}
}

func TestSendAwaitWokenByClose(t *testing.T) {
	c, p := pair(t)
	s := sender(t, c)
	go func() {
		_, _ = io.ReadFull(p, make([]byte, 5))
		p.Close()
	}()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // a failure would take this long
	s.SendAwait([]byte("hello"))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
}

// TestSendAwaitLeavesWhatDoesNotFit: a message larger than the socket can
// take while the peer is not reading comes back in part, and the caller's
// ordinary write of the rest delivers all of it in order.
func TestSendAwaitLeavesWhatDoesNotFit(t *testing.T) {
	c, p := pair(t)
	s := sender(t, c)
	_ = c.SetWriteBuffer(64 << 10)
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	rest := s.SendAwait(msg)
	if len(rest) == 0 || len(rest) == len(msg) {
		t.Fatalf("%d of %d bytes left, want some written and some left", len(rest), len(msg))
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(p)
		got <- b
	}()
	if _, err := c.Write(rest); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	if b := <-got; !bytes.Equal(b, msg) {
		t.Fatalf("peer read %d bytes, not the message (%d)", len(b), len(msg))
	}
}

func TestNotTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var s Sender
	if s.Init(a) || s.Ready() {
		t.Fatal("Init accepted a pipe")
	}
	if rest := s.SendAwait([]byte("hi")); string(rest) != "hi" {
		t.Fatalf("SendAwait on a pipe kept %q", rest)
	}
}
