// Package sendwait writes a message on a TCP socket and waits until the
// answer can be read, in one RawConn.Read: the read that would only have
// found nothing (EAGAIN) before the wait is skipped, a system call saved
// per exchange on a kept-alive connection.
//
// The message is written from within RawConn.Read's callback, which then
// asks to wait. Read has reset the socket's readiness before it calls the
// callback, so every byte or close the peer sends in answer comes after
// the reset and wakes the wait. Bytes the peer sent before the reset do
// not: the caller must know that none are pending (an HTTP/1.1 server
// sends nothing before a request; a client that does not pipeline sends
// nothing before its answer). A peer that closed before the write answers
// it with a reset, which wakes the wait too. The wait is bounded by the
// connection's read deadline.
package sendwait

import (
	"net"
	"syscall"
)

// Sender sends on one connection. It is not safe for concurrent use, and
// its zero value sends nothing (SendAwait returns the whole message).
type Sender struct {
	raw    syscall.RawConn
	fn     func(fd uintptr) bool
	unsent []byte
	sent   bool
}

// Init prepares s for nc and reports whether SendAwait can write on it:
// only a plaintext TCP connection (a TLS one must be written through
// crypto/tls), on a Unix system.
func (s *Sender) Init(nc net.Conn) bool {
	s.raw = nil
	tc, ok := nc.(*net.TCPConn)
	if !ok || !supported {
		return false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	s.raw = raw
	if s.fn == nil {
		s.fn = s.step
	}
	return true
}

// Ready reports whether Init succeeded.
func (s *Sender) Ready() bool { return s.raw != nil }

// SendAwait writes b on the socket and waits until the answer can be read
// or the read deadline passes (a closed connection or a passed deadline
// is met again by the caller's next read). It returns what it could not
// write — the socket's buffer full, or an error — for the caller to write
// through the connection, which waits for room or reports the failure.
func (s *Sender) SendAwait(b []byte) []byte {
	if s.raw == nil {
		return b
	}
	s.unsent, s.sent = b, false
	_ = s.raw.Read(s.fn)
	rest := s.unsent
	s.unsent = nil
	return rest
}

// step is the callback: the write the first time, done the next (the
// socket is readable).
func (s *Sender) step(fd uintptr) bool {
	if s.sent {
		return true
	}
	for len(s.unsent) > 0 {
		n, err := write(fd, s.unsent)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return true
		}
		s.unsent = s.unsent[n:]
	}
	s.sent = true
	return false
}
