package httpwire

import (
	"bufio"
	"errors"
	"io"
	"strconv"
)

// maxChunkLine bounds a chunk-size line with its extensions and CRLF.
const maxChunkLine = 4096

// chunkState is where a ChunkedReader is in the body.
type chunkState uint8

const (
	chunkSize chunkState = iota // next: a chunk-size line
	chunkData                   // inside a chunk's data
	chunkCRLF                   // next: the CRLF after a chunk's data
	chunkDone                   // after the trailer section
)

// ChunkedReader decodes a chunked body (RFC 9112 section 7.1) from a
// *bufio.Reader the engine owns. It is strict: a chunk size is 1 to 16 hex
// digits (no sign, at most 2^63-1), optionally followed by extensions
// (';' and then field-value characters; skipped), then CRLF; chunk data
// ends in CRLF exactly. A chunk-size line is at most 4096 bytes and must
// fit the reader's buffer. Trailers are parsed with the Limits given to
// Reset (MaxHeaderBytes bounds the trailer section, MaxFields its fields)
// and are available from Trailers after Read returns io.EOF; a trailer
// named Content-Length, Host or a hop-by-hop field is refused.
//
// A malformed body makes Read return an *Error (status 400; an engine
// reading an upstream response answers 502 or resets the client's
// stream); a body cut short returns io.ErrUnexpectedEOF; the reader's own
// errors pass through. Errors are sticky until Reset.
//
// The zero value is ready after Reset. Reuse a reader with Reset: it keeps
// its trailer buffers, so decoding allocates nothing once they have grown.
type ChunkedReader struct {
	r         *bufio.Reader
	maxBytes  int
	maxFields int
	left      int64 // data bytes left in the current chunk
	state     chunkState
	err       error
	trailers  []Field
	raw       []byte // the trailer section, copied out of r's buffer
}

// Reset makes c read a new body from r, bounding its trailers by lim.
func (c *ChunkedReader) Reset(r *bufio.Reader, lim Limits) {
	c.r = r
	c.maxBytes, c.maxFields = lim.resolve()
	c.left, c.state, c.err = 0, chunkSize, nil
	c.trailers, c.raw = c.trailers[:0], c.raw[:0]
}

// Read reads decoded body bytes into p. It reads from the underlying
// reader at most once per call for data, and returns io.EOF after the last
// chunk and the trailer section.
func (c *ChunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	for c.state != chunkData {
		var err error
		switch c.state {
		case chunkDone:
			return 0, io.EOF
		case chunkCRLF:
			err = c.readCRLF()
		default:
			err = c.readSize()
		}
		if err != nil {
			c.err = err
			return 0, err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left == 0 {
		c.state = chunkCRLF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// Trailers returns the trailer fields once Read has returned io.EOF, else
// nil. They point into c's buffer and are valid until the next Reset.
func (c *ChunkedReader) Trailers() []Field {
	if c.state != chunkDone {
		return nil
	}
	return c.trailers
}

// readCRLF consumes the CRLF after a chunk's data.
func (c *ChunkedReader) readCRLF() error {
	for _, want := range [2]byte{'\r', '\n'} {
		b, err := c.r.ReadByte()
		if err != nil {
			return unexpected(err)
		}
		if b != want {
			return requestErrors[faultChunkCRLF]
		}
	}
	c.state = chunkSize
	return nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readLine returns the next line with its LF, at most max bytes long; a
// longer one is the fault tooLong.
func (c *ChunkedReader) readLine(max int, tooLong fault) ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull || len(line) > max {
		return nil, requestErrors[tooLong]
	}
	if err != nil {
		return nil, unexpected(err)
	}
	return line, nil
}

// readSize reads a chunk-size line, and the trailer section after the
// last chunk.
func (c *ChunkedReader) readSize() error {
	line, err := c.readLine(maxChunkLine, faultChunkLine)
	if err != nil {
		return err
	}
	size, f := parseChunkLine(line)
	if f != faultNone {
		return requestErrors[f]
	}
	if size > 0 {
		c.left, c.state = size, chunkData
		return nil
	}
	if err := c.readTrailers(); err != nil {
		return err
	}
	c.state = chunkDone
	return nil
}

// parseChunkLine parses "hex-size [BWS ';' extensions] CRLF".
func parseChunkLine(line []byte) (int64, fault) {
	n := len(line)
	if n < 2 || line[n-2] != '\r' {
		return 0, faultBareLF
	}
	line = line[:n-2]
	var size uint64
	i := 0
	for ; i < len(line); i++ {
		d := hexDigit(line[i])
		if d < 0 {
			break
		}
		if i == 16 || i == 15 && size > (1<<63-1)>>4 {
			return 0, faultChunkTooLarge
		}
		size = size<<4 | uint64(d)
	}
	if i == 0 {
		return 0, faultChunkSize
	}
	ext := line[i:]
	for len(ext) > 0 && isOWS(ext[0]) {
		ext = ext[1:]
	}
	if len(ext) == 0 && i < len(line) || len(ext) > 0 && ext[0] != ';' {
		return 0, faultChunkSize
	}
	for _, b := range ext {
		if !valueChar[b] {
			if b == '\r' {
				return 0, faultBareCR
			}
			return 0, faultChunkSize
		}
	}
	return int64(size), faultNone
}

func hexDigit(b byte) int {
	switch {
	case '0' <= b && b <= '9':
		return int(b - '0')
	case 'a' <= b && b <= 'f':
		return int(b-'a') + 10
	case 'A' <= b && b <= 'F':
		return int(b-'A') + 10
	}
	return -1
}

// readTrailers copies the trailer section, up to and including its empty
// line, into c.raw (at most maxBytes) and parses it into c.trailers.
func (c *ChunkedReader) readTrailers() error {
	for {
		line, err := c.readLine(c.maxBytes-len(c.raw), faultTrailerTooLarge)
		if err != nil {
			return err
		}
		c.raw = append(c.raw, line...)
		if len(line) == 1 {
			return requestErrors[faultBareLF]
		}
		if len(line) == 2 && line[0] == '\r' {
			break
		}
	}
	_, st, f := scanFields(c.raw, 0, &c.trailers, c.maxFields)
	switch {
	case f == faultTooManyFields:
		return requestErrors[faultTooManyTrailers]
	case st == scanFault:
		return requestErrors[f]
	case st == scanMore:
		return requestErrors[faultFieldName]
	}
	for _, t := range c.trailers {
		if forbiddenTrailer(t.Name) {
			return requestErrors[faultTrailerName]
		}
	}
	return nil
}

// forbiddenTrailer reports fields that must not be trailers because they
// frame, route or manage the connection (RFC 9110 section 6.5.1):
// Content-Length, Host and the hop-by-hop fields.
func forbiddenTrailer(name []byte) bool {
	return EqualFold(name, "content-length") || EqualFold(name, "host") || hopByHopName(name)
}

// errWriteAfterClose is returned by ChunkedWriter.Write after Close.
var errWriteAfterClose = errors.New("httpwire: chunked body written after Close")

// ChunkedWriter encodes a chunked body onto a *bufio.Writer the engine
// owns (and flushes): each Write of n > 0 bytes is one chunk, Close writes
// the last chunk and the trailers. The zero value is ready after Reset.
type ChunkedWriter struct {
	w       *bufio.Writer
	closed  bool
	scratch [18]byte // a chunk-size line: 16 hex digits and CRLF
}

// Reset makes c write a new body to w.
func (c *ChunkedWriter) Reset(w *bufio.Writer) { c.w, c.closed = w, false }

// Write writes p as one chunk; an empty p writes nothing (a zero-size
// chunk would end the body).
func (c *ChunkedWriter) Write(p []byte) (int, error) {
	if c.closed {
		return 0, errWriteAfterClose
	}
	if len(p) == 0 {
		return 0, nil
	}
	line := strconv.AppendUint(c.scratch[:0], uint64(len(p)), 16)
	if _, err := c.w.Write(append(line, '\r', '\n')); err != nil {
		return 0, err
	}
	n, err := c.w.Write(p)
	if err != nil {
		return n, err
	}
	_, err = c.w.WriteString("\r\n")
	return n, err
}

// Close writes the last chunk, the trailers (names and values as given;
// validate configured ones with ValidFieldName and ValidFieldValue) and the
// empty line. It does not flush or close the underlying writer.
func (c *ChunkedWriter) Close(trailers []Field) error {
	if c.closed {
		return errWriteAfterClose
	}
	c.closed = true
	c.w.WriteString("0\r\n")
	for _, t := range trailers {
		c.w.Write(t.Name)
		c.w.WriteString(": ")
		c.w.Write(t.Value)
		c.w.WriteString("\r\n")
	}
	_, err := c.w.WriteString("\r\n")
	return err
}
