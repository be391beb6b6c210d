package proxy

import (
	"errors"
	"io"

	"github.com/spillwayhq/spillway/httpwire"
)

// reqBody is a client's request body as the upstream reads it: framed by
// Content-Length or chunked coding, each read bounded by BodyTimeout (an
// inactivity deadline), cut at the route's MaxBodyBytes. It answers
// "100 Continue" on its first read when the client asked for it, and
// starts the disconnect watcher once the body has been read to its end.
type reqBody struct {
	c       *h1conn
	chunked httpwire.ChunkedReader
	left    int64 // Content-Length bytes still to read; -1 when chunked
	read    int64
	max     int64
	expect  bool
	done    bool  // read to its end
	err     error // the client's error, if reading failed
}

var errBodyTooLarge = errors.New("proxy: request body too large")

func (b *reqBody) reset(c *h1conn, rt *Route) {
	b.c, b.read, b.max, b.done, b.err = c, 0, rt.MaxBodyBytes, false, nil
	b.expect = c.head.Expect100
	if c.head.Chunked {
		b.left = -1
		b.chunked.Reset(c.br, c.s.cfg.Limits)
	} else {
		b.left = c.head.ContentLength
	}
}

// Read implements io.Reader for the upstream's request writer.
func (b *reqBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	c := b.c
	if b.expect {
		b.expect = false
		_, _ = c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := c.bw.Flush(); err != nil {
			return 0, b.fail(err)
		}
	}
	c.armBody()
	var n int
	var err error
	if b.left >= 0 {
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err = c.br.Read(p)
		b.left -= int64(n)
		if b.left == 0 {
			err = io.EOF
		} else if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
	} else {
		n, err = b.chunked.Read(p)
	}
	b.read += int64(n)
	if b.max > 0 && b.read > b.max {
		return 0, b.fail(errBodyTooLarge)
	}
	if err == io.EOF {
		b.done = true
		if c.br.Buffered() == 0 {
			c.watch.start()
		}
		return n, io.EOF
	}
	if err != nil {
		return n, b.fail(err)
	}
	return n, nil
}

func (b *reqBody) fail(err error) error {
	b.err = err
	return err
}

// trailers returns the chunked body's trailers after its end.
func (b *reqBody) trailers() []httpwire.Field {
	if b.left >= 0 {
		return nil
	}
	return b.chunked.Trailers()
}

// problem is the answer to a body that could not be read.
func (b *reqBody) problem() *Problem {
	var we *httpwire.Error
	switch {
	case errors.Is(b.err, errBodyTooLarge):
		return problemBodyTooLarge
	case errors.As(b.err, &we):
		return protocolProblem(we)
	case isTimeout(b.err):
		return problemBodyTimeout
	default:
		return problemBadBody
	}
}
