package proxy

import "time"

// An answer on a kept-alive HTTP/1.1 connection usually ends with a
// write, then a read that finds nothing yet (EAGAIN) before the wait for
// the next request. finish leaves the answer's last bytes in the write
// buffer instead, and awaitRequest writes them from within the wait
// (internal/sendwait): one system call less per request.
//
// The wait can miss only bytes that arrived before it began, which a
// client that waits for each answer does not send. A connection turns
// eager (every answer flushed at once, as before) when it pipelines (the
// next request is there before the answer) or when a deferred wait
// passes busyWait: a client that pipelined unseen (its next request came
// during the exchange, so the wait missed it) is then stalled once, by at
// most busyWait, and a client slower than busyWait gains nothing from it
// anyway. The connection stays active (not idle) while it writes and
// waits, so Shutdown cannot close it before its answer is out: it waits
// for that, at most busyWait.

// finish ends an answer whose bytes are in bw: it flushes them, or leaves
// them for awaitRequest when the connection is kept alive on a plaintext
// TCP socket, is not eager and the request is not logged (a log line is
// not written before the client has its answer). A deferred answer counts
// as sent: a client that has gone is found by the write.
func (c *h1conn) finish(keep bool) error {
	if keep && c.br.Buffered() > 0 {
		c.eager = true // pipelined: the next request is here before its answer
	}
	if keep && c.send.Ready() && !c.eager && !c.rec.log {
		c.deferred = true
		return nil
	}
	return c.flush()
}

// sockWriter is bw's writer: the connection, or, for the flush of a
// deferred answer, the socket written from within the wait for the next
// request.
type sockWriter struct{ c *h1conn }

func (w *sockWriter) Write(p []byte) (int, error) {
	c := w.c
	if !c.awaitNext {
		return c.c.Write(p)
	}
	c.awaitNext = false
	rest := c.send.SendAwait(p)
	if len(rest) == 0 {
		return len(p), nil
	}
	n, err := c.c.Write(rest)
	return len(p) - len(rest) + n, err
}

// sendDeferred writes the deferred answer and waits, like awaitBusy, for
// the next request with the buffers held, the connection still active.
func (c *h1conn) sendDeferred() (arrived, wait bool) {
	c.deferred = false
	last := c.armBusy(c.idleDeadline())
	c.armSend()
	c.awaitNext = true
	err := c.bw.Flush()
	c.awaitNext = false
	if err != nil {
		return false, false
	}
	_, err = c.br.Peek(1)
	switch {
	case err == nil:
		return true, false
	case !isTimeout(err) || last:
		return false, false
	}
	c.eager = true // quiet for busyWait: a slow client, or pipelined bytes the wait missed
	return false, true
}

// armBusy arms the read deadline for a wait of busyWait, or until idle
// when that comes first (last: the wait ends the connection).
func (c *h1conn) armBusy(idle time.Time) (last bool) {
	now := time.Now()
	last = !idle.IsZero() && !now.Add(busyWait).Before(idle)
	if last {
		c.dl.SetRead(c.c, idle)
	} else {
		c.dl.ArmRead(c.c, now, busyWait) // lazily: a busy connection renews it every few requests
	}
	return last
}
