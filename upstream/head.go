package upstream

import (
	"bufio"
	"bytes"

	"github.com/spillwayhq/spillway/httpwire"
)

// readHead reads the final response head into r.Head, handing each 1xx
// head but 101 to req.Interim. gotByte says whether any byte of a response
// arrived (a stale connection sends none).
func (r *Response) readHead(req *Request) (gotByte bool, err error) {
	c := r.c
	for interim := 0; ; interim++ {
		if err := r.readOneHead(c.br); err != nil {
			return gotByte || len(r.headBuf) > 0, err
		}
		gotByte = true
		if st := r.Head.Status; st == 101 || st >= 200 {
			return true, nil
		}
		if interim == maxInterim {
			return true, &Error{Kind: KindBadResponse, Op: "read response head", Err: ErrTooManyInterim}
		}
		if req.Interim != nil {
			req.Interim(&r.Head)
		}
		c.setReadDeadline(req.HeaderTimeout)
	}
}

// readOneHead parses one head from br into r.Head, copying its bytes into
// r.headBuf (the bufio buffer moves as the body is read): what br holds is
// appended and parsed until a whole head is there; only the head's bytes
// are consumed from br.
func (r *Response) readOneHead(br *bufio.Reader) error {
	r.headBuf = r.headBuf[:0]
	for {
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				return err
			}
		}
		chunk, _ := br.Peek(br.Buffered())
		start := len(r.headBuf)
		r.headBuf = append(r.headBuf, chunk...)
		r.Head.Reset()
		n, err := httpwire.ParseResponseHead(r.headBuf, &r.Head, r.lim)
		if err == httpwire.ErrIncomplete {
			br.Discard(len(chunk))
			if len(r.headBuf) > r.maxHead {
				return &Error{Kind: KindBadResponse, Op: "read response head", Err: ErrHeadTooLarge}
			}
			continue
		}
		if err != nil {
			return err
		}
		br.Discard(n - start)
		r.headBuf = r.headBuf[:n]
		return nil
	}
}

var methodConnect = []byte("CONNECT")

// frame sets how the body of r's final head is read and whether the
// connection may be reused after it.
// bodyBuffered reports whether the framed body needs no more reads from
// the connection: none, or all of it in the read buffer.
func (r *Response) bodyBuffered() bool {
	return r.framing == httpwire.FramingNone ||
		r.framing == httpwire.FramingLength && r.remain <= int64(r.c.br.Buffered())
}

func (r *Response) frame(req *Request) error {
	h := &r.Head
	if h.TransferEncoding != nil && h.ContentLength >= 0 { // httpwire refuses it too
		return &Error{Kind: KindBadResponse, Op: "read response head", Err: ErrBothFramings}
	}
	if h.Status == 101 || (h.Status/100 == 2 && bytes.Equal(req.Method, methodConnect)) {
		r.hijack, r.done = true, true
		r.framing = httpwire.FramingNone
		return nil
	}
	r.framing = h.Framing(req.Method)
	r.keepAlive = h.KeepAlive && r.framing != httpwire.FramingClose
	switch r.framing {
	case httpwire.FramingNone:
		r.done = true
	case httpwire.FramingChunked:
		r.chunked.Reset(r.c.br, r.lim)
	case httpwire.FramingLength:
		r.remain, r.done = h.ContentLength, h.ContentLength == 0
	}
	return nil
}
