package h2wire

import (
	"bytes"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spillwayhq/spillway/httpwire"
)

// reqHead is a decoded request head, or a request's trailers. Its slices
// point into arena.
type reqHead struct {
	method, scheme, authority, path []byte
	fields                          []httpwire.Field
	arena                           []byte
	contentLength                   int64
	host                            int // index of the host field, -1: none
}

func (h *reqHead) reset() {
	clear(h.fields)
	*h = reqHead{fields: h.fields[:0], arena: h.arena[:0], contentLength: -1, host: -1}
}

// store copies s into the arena and returns the copy, capped.
func (h *reqHead) store(s string) []byte {
	n := len(h.arena)
	h.arena = append(h.arena, s...)
	return h.arena[n:len(h.arena):len(h.arena)]
}

// storeBytes is store for a byte slice.
func (h *reqHead) storeBytes(b []byte) []byte {
	n := len(h.arena)
	h.arena = append(h.arena, b...)
	return h.arena[n:len(h.arena):len(h.arena)]
}

// Pseudo-headers seen, as bits of headerBlock.seen.
const (
	seenMethod = 1 << iota
	seenScheme
	seenAuthority
	seenPath
)

// headerBlock is the state of the header block being decoded.
type headerBlock struct {
	h          *reqHead // nil: decode only, to keep HPACK's state
	trailers   bool
	size       uint32 // header list size so far (RFC 9113 6.5.2)
	seen       int
	cookies    int
	sawRegular bool
	tooBig     bool // over MaxHeaderListSize
	malformed  bool
}

// onField is the HPACK decoder's emit function.
func (c *Conn) onField(hf hpack.HeaderField) {
	b := &c.hb
	if b.tooBig || b.malformed {
		return
	}
	b.size += hf.Size()
	if b.size > c.cfg.MaxHeaderListSize {
		b.tooBig = true
		return
	}
	if b.h != nil && !b.add(hf) {
		b.malformed = true
	}
}

// add checks one field (RFC 9113 8.2 and 8.3) and keeps it.
func (b *headerBlock) add(hf hpack.HeaderField) bool {
	h := b.h
	if hf.IsPseudo() {
		if b.trailers || b.sawRegular {
			return false
		}
		var bit int
		var dst *[]byte
		switch hf.Name {
		case ":method":
			bit, dst = seenMethod, &h.method
		case ":scheme":
			bit, dst = seenScheme, &h.scheme
		case ":authority":
			bit, dst = seenAuthority, &h.authority
		case ":path":
			bit, dst = seenPath, &h.path
		default:
			return false
		}
		if b.seen&bit != 0 || !httpwire.ValidFieldValue(hf.Value) {
			return false
		}
		b.seen |= bit
		*dst = h.store(hf.Value)
		return true
	}
	b.sawRegular = true
	if !validLowerName(hf.Name) || !httpwire.ValidFieldValue(hf.Value) {
		return false
	}
	switch hf.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return false
	case "te":
		if hf.Value != "trailers" {
			return false
		}
	case "content-length":
		n := parseLength(hf.Value)
		if n < 0 || b.trailers || h.contentLength >= 0 && h.contentLength != n {
			return false
		}
		h.contentLength = n
	case "cookie":
		b.cookies++
	}
	h.fields = append(h.fields, httpwire.Field{Name: h.store(hf.Name), Value: h.store(hf.Value)})
	return true
}

// validLowerName reports whether s is a token without uppercase letters.
func validLowerName(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return false
		}
	}
	return httpwire.ValidFieldName(s)
}

// parseLength parses a content-length value: digits only, -1 if invalid.
func parseLength(s string) int64 {
	if s == "" || len(s) > 18 {
		return -1
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n
}

// checkRequest applies the rules on the whole head (RFC 9113 8.3.1), joins
// the cookie crumbs and finds the host field.
func (b *headerBlock) checkRequest(endStream bool) bool {
	h := b.h
	if b.seen&seenMethod == 0 || !httpwire.ValidFieldName(string(h.method)) {
		return false
	}
	if string(h.method) == "CONNECT" {
		if b.seen != seenMethod|seenAuthority {
			return false
		}
	} else {
		if b.seen&(seenScheme|seenPath) != seenScheme|seenPath || len(h.path) == 0 {
			return false
		}
		web := string(h.scheme) == "http" || string(h.scheme) == "https"
		if web && h.path[0] != '/' && !(string(h.path) == "*" && string(h.method) == "OPTIONS") {
			return false
		}
	}
	if endStream && h.contentLength > 0 {
		return false
	}
	if b.cookies > 1 {
		h.joinCookies()
	}
	for i := range h.fields {
		if string(h.fields[i].Name) == "host" {
			if h.host >= 0 || h.authority != nil && !bytes.Equal(h.authority, h.fields[i].Value) {
				return false
			}
			h.host = i
		}
	}
	return true
}

// joinCookies makes the cookie fields one, its crumbs joined by "; "
// (RFC 9113 8.2.3), in the place of the first.
func (h *reqHead) joinCookies() {
	start, first := len(h.arena), -1
	for i := range h.fields {
		if string(h.fields[i].Name) != "cookie" {
			continue
		}
		if first < 0 {
			first = i
		} else {
			h.arena = append(h.arena, "; "...)
		}
		h.arena = append(h.arena, h.fields[i].Value...)
	}
	h.fields[first].Value = h.arena[start:len(h.arena):len(h.arena)]
	kept := h.fields[:first+1]
	for _, f := range h.fields[first+1:] {
		if string(f.Name) != "cookie" {
			kept = append(kept, f)
		}
	}
	clear(h.fields[len(kept):])
	h.fields = kept
}

// decodeBlock decodes the header block that f starts, reading its
// CONTINUATION frames, into h (nil: decoded and dropped). A block whose
// frames pass twice MaxHeaderListSize ends the connection.
func (c *Conn) decodeBlock(f *http2.HeadersFrame, h *reqHead, trailers bool) error {
	c.hb = headerBlock{h: h, trailers: trailers}
	limit := 2 * int(c.cfg.MaxHeaderListSize)
	frag, ended, cost := f.HeaderBlockFragment(), f.HeadersEnded(), 0
	for {
		cost += len(frag) + 9
		if cost > limit {
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		if _, err := c.dec.Write(frag); err != nil {
			return http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		next, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		cf := next.(*http2.ContinuationFrame) // the Framer checks the order
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := c.dec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	return nil
}

// processHeaders handles a HEADERS frame: a new stream, or trailers.
func (c *Conn) processHeaders(f *http2.HeadersFrame) error {
	id, end := f.StreamID, f.StreamEnded()
	selfDep := f.HasPriority() && f.Priority.StreamDep == id
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	st, last := c.streams[id], c.lastID
	refuse := c.shutdown || c.open >= int(c.cfg.MaxConcurrentStreams) || c.active >= 2*int(c.cfg.MaxConcurrentStreams)
	if st == nil && id > last {
		c.lastID = id
	}
	c.mu.Unlock()
	switch {
	case st != nil:
		return c.processTrailers(f, id, st, end)
	case id <= last:
		if err := c.decodeBlock(f, nil, false); err != nil {
			return err
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	case refuse:
		if err := c.decodeBlock(f, nil, false); err != nil {
			return err
		}
		if !c.takeReset() {
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	st = newStream(c, id)
	if err := c.decodeBlock(f, &st.reqHead, false); err != nil {
		st.recycle()
		return err
	}
	switch {
	case c.hb.tooBig:
		st.recycle()
		return c.writeRefusal(id, 431, end)
	case c.hb.malformed || selfDep || !c.hb.checkRequest(end):
		st.recycle()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	return c.start(st, end)
}

// start registers st and hands it to a worker.
func (c *Conn) start(st *Stream, end bool) error {
	c.mu.Lock()
	st.recvWindow, st.sendWindow, st.remoteEnded, st.noBody = c.cfg.StreamWindow, c.peerInitial, end, end
	st.slot = true
	c.streams[st.id] = st
	c.open++
	c.active++
	if c.active == 1 {
		c.readDeadlineLocked()
	}
	c.wg.Add(1)
	c.mu.Unlock()
	if c.cfg.Pool.run(st) {
		return nil
	}
	id := st.id
	c.mu.Lock()
	delete(c.streams, id)
	c.open--
	c.active--
	c.streamEndedLocked()
	c.mu.Unlock()
	c.wg.Done()
	st.recycle()
	return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
}

// processTrailers decodes a second header block on st: the request's
// trailers, which must end the stream.
func (c *Conn) processTrailers(f *http2.HeadersFrame, id uint32, st *Stream, end bool) error {
	c.trail.reset()
	if err := c.decodeBlock(f, &c.trail, true); err != nil {
		return err
	}
	bad := !end || c.hb.malformed || c.hb.tooBig
	c.mu.Lock()
	if c.streams[id] != st || st.err != nil {
		c.mu.Unlock()
		return nil // reset meanwhile: ignore what was in flight
	}
	if st.remoteEnded {
		c.mu.Unlock()
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeStreamClosed}
	}
	if bad || st.contentLength >= 0 && st.received != st.contentLength {
		c.mu.Unlock()
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	for _, tf := range c.trail.fields {
		st.trailers = append(st.trailers, httpwire.Field{Name: st.storeBytes(tf.Name), Value: st.storeBytes(tf.Value)})
	}
	st.remoteEnded = true
	c.releaseLocked(st)
	st.wakeRead()
	c.mu.Unlock()
	return nil
}
