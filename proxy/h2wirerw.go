package proxy

import (
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/spillwayhq/spillway/h2wire"
	"github.com/spillwayhq/spillway/httpwire"
)

// strings makes the request's strings — :path, the authority, the
// canonical field names and the values — one string (one allocation:
// strings that outlive the stream stay valid), fills x.hdr from it and
// returns the path and the authority.
func (x *wireExchange) strings(st *h2wire.Stream) (uri, host string) {
	t := append(x.text[:0], st.Path()...)
	t = append(t, st.Authority()...)
	spans := x.spans[:0]
	fields := st.Fields()
	for i := range fields {
		f := &fields[i]
		switch string(f.Name) {
		case "host": // the authority's copy (h2wire checked that they agree)
			continue
		case "expect":
			if httpguts.HeaderValuesContainsToken([]string{string(f.Value)}, "100-continue") {
				x.expect = !st.NoBody()
				continue
			}
		}
		t = appendCanonical(t, f.Name)
		spans = append(spans, len(t))
		t = append(t, f.Value...)
		spans = append(spans, len(t))
	}
	all := string(t)
	x.text, x.spans = t, spans
	np, na := len(st.Path()), len(st.Authority())
	uri, host = all[:np], all[np:np+na]
	at := np + na
	for i := 0; i+1 < len(spans); i += 2 {
		x.addField(all[at:spans[i]], all[spans[i]:spans[i+1]])
		at = spans[i+1]
	}
	return uri, host
}

// appendCanonical appends the canonical form of a field name (a token:
// h2wire and httpwire check it), as textproto's: each word's first
// letter uppercased, the others lowercased.
func appendCanonical(t, name []byte) []byte {
	up := true
	for _, c := range name {
		switch {
		case up && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case !up && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		t = append(t, c)
		up = c == '-'
	}
	return t
}

// addField adds one value to the request header; a key's first value
// takes a slice of x.vals (no allocation once the pooled one is grown).
func (x *wireExchange) addField(k, v string) {
	if vs, ok := x.hdr[k]; ok {
		x.hdr[k] = append(vs, v)
		return
	}
	x.vals = append(x.vals, v)
	n := len(x.vals)
	x.hdr[k] = x.vals[n-1 : n : n]
}

// declareTrailers takes the Trailer field out of the header and declares
// its names in Request.Trailer, as x/net does; the values arrive with the
// body's end (fillTrailers).
func (x *wireExchange) declareTrailers() {
	vs, ok := x.hdr["Trailer"]
	if !ok {
		return
	}
	delete(x.hdr, "Trailer")
	for _, v := range vs {
		for key := range strings.SplitSeq(v, ",") {
			key = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(key))
			switch key {
			case "", "Transfer-Encoding", "Trailer", "Content-Length":
			default:
				x.trl[key] = nil
			}
		}
	}
	if len(x.trl) > 0 {
		x.req.Trailer = x.trl
	}
}

// fillTrailers copies the request's trailers into Request.Trailer once
// the body has ended (only when the request declared some, as x/net).
func (x *wireExchange) fillTrailers() {
	t := x.req.Trailer
	if t == nil {
		return
	}
	for _, f := range x.st.Trailers() {
		k := string(appendCanonical(nil, f.Name))
		if httpguts.ValidTrailerHeader(k) {
			t[k] = append(t[k], string(f.Value))
		}
	}
}

// wireBody is the request body: the stream's DATA. It may be read on
// another goroutine than the handler's (an upstream transport's).
type wireBody struct {
	x   *wireExchange
	eof bool
}

func (b *wireBody) Read(p []byte) (int, error) {
	x := b.x
	if x.expect {
		x.expect = false
		x.w.continue100()
	}
	n, err := x.st.Read(p)
	switch {
	case err == io.EOF:
		if !b.eof {
			b.eof = true
			x.fillTrailers()
		}
	case err == h2wire.ErrStreamReset || err == h2wire.ErrConnClosed:
		x.cancel() // at once: the handler learns from the context that the client went
	}
	return n, err
}

// Close ends the body for the handler; a Read in progress returns.
func (b *wireBody) Close() error {
	b.x.st.CloseRead()
	return nil
}

// wireWriter is the http.ResponseWriter over an h2wire.Stream, with the
// behaviour of x/net's that the forwarding path relies on: the header is
// taken at WriteHeader (a 1xx is sent at once, with the header as it is);
// the final head goes out with the first Write or Flush, or at the end,
// where a response without body ends with its HEADERS; Date is added when
// the handler set none, and Content-Length: 0 to a response ended without
// body or length; a HEAD response ends with its head and drops the body;
// trailers are the header's keys declared in Trailer or prefixed with
// http.TrailerPrefix, sent after the body when one has a value. No
// Content-Type is sniffed: the forwarding path never leaves one unset.
type wireWriter struct {
	x      *wireExchange
	st     *h2wire.Stream
	hdr    http.Header
	isHead bool
	status int // the final status; 0 until WriteHeader
	clen   string
	date   bool // the handler set a Date field
	fields []httpwire.Field
	names  []string
	tr     []wireTrailer
	tf     []httpwire.Field

	// mu orders the final head (sent, written by the handler) against a
	// 100 Continue sent from a body read on another goroutine.
	mu      sync.Mutex
	sent    bool
	sent100 bool
}

// wireTrailer is one trailer name and its values.
type wireTrailer struct {
	name string
	vals []string
}

func (w *wireWriter) open(st *h2wire.Stream, isHead bool) { w.st, w.isHead = st, isHead }

func (w *wireWriter) reset() {
	clear(w.hdr)
	clear(w.fields)
	clear(w.names)
	clear(w.tr)
	clear(w.tf)
	w.fields, w.names, w.tr, w.tf = w.fields[:0], w.names[:0], w.tr[:0], w.tf[:0]
	w.st, w.status, w.clen, w.date, w.sent, w.sent100 = nil, 0, "", false, false, false
}

func (w *wireWriter) Header() http.Header { return w.hdr }

func (w *wireWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code < 100 || code > 999 {
		panic("proxy: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 {
		w.mu.Lock()
		if !w.sent {
			_ = w.st.WriteHeaders(code, w.snapshot(), false)
		}
		w.mu.Unlock()
		return
	}
	w.status = code
	w.fields = w.snapshot()
	w.clen, w.date = "", false
	if vs := w.hdr["Content-Length"]; len(vs) > 0 && validLength(vs[0]) {
		w.clen = vs[0]
	}
	_, w.date = w.hdr["Date"]
}

// snapshot lists the header's fields, sorted by name (as x/net sends
// them), leaving out Content-Length (sendHead adds it), invalid names
// (the trailer keys among them) and invalid values.
func (w *wireWriter) snapshot() []httpwire.Field {
	names := w.names[:0]
	for k := range w.hdr {
		if k != "Content-Length" && httpguts.ValidHeaderFieldName(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	w.names = names
	fs := w.fields[:0]
	for _, k := range names {
		for _, v := range w.hdr[k] {
			if httpguts.ValidHeaderFieldValue(v) {
				fs = append(fs, httpwire.Field{Name: sbytes(k), Value: sbytes(v)})
			}
		}
	}
	return fs
}

// sendHead writes the final head; end ends the response with it.
func (w *wireWriter) sendHead(end bool) error {
	fs := w.fields
	switch {
	case w.clen != "":
		fs = append(fs, httpwire.Field{Name: fieldContentLength, Value: sbytes(w.clen)})
	case end && !w.isHead && bodyAllowedFor(w.status):
		fs = append(fs, httpwire.Field{Name: fieldContentLength, Value: zeroLength})
	}
	if !w.date {
		fs = append(fs, httpwire.Field{Name: fieldDate, Value: sbytes(httpDate())})
	}
	w.fields = fs
	w.mu.Lock()
	w.sent = true
	err := w.st.WriteHeaders(w.status, fs, end)
	w.mu.Unlock()
	return w.failed(err)
}

var (
	fieldContentLength = []byte("content-length")
	fieldDate          = []byte("date")
	zeroLength         = []byte("0")
)

// validLength reports whether v is a Content-Length value: 1 to 18
// digits.
func validLength(v string) bool {
	if v == "" || len(v) > 18 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// bodyAllowedFor reports whether a response of status may have a body.
func bodyAllowedFor(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// failed cancels the request's context when the stream failed under a
// write (the handler then sees the client gone, as it would from x/net).
func (w *wireWriter) failed(err error) error {
	if err != nil {
		w.x.cancel()
	}
	return err
}

func (w *wireWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowedFor(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.isHead {
		if !w.sent {
			_ = w.sendHead(true)
		}
		return len(p), nil
	}
	if !w.sent {
		if err := w.sendHead(false); err != nil {
			return 0, err
		}
	}
	n, err := w.st.Write(p)
	return n, w.failed(err)
}

// Flush implements http.Flusher.
func (w *wireWriter) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController.Flush calls.
func (w *wireWriter) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		if err := w.sendHead(w.isHead); err != nil {
			return err
		}
	}
	return w.failed(w.st.Flush())
}

// SetReadDeadline and SetWriteDeadline are what
// http.ResponseController's call: the stream's deadlines.
func (w *wireWriter) SetReadDeadline(t time.Time) error {
	w.st.SetReadDeadline(t)
	return nil
}

func (w *wireWriter) SetWriteDeadline(t time.Time) error {
	w.st.SetWriteDeadline(t)
	return nil
}

// continue100 sends 100 Continue, unless the final head went first; on
// the goroutine reading the body.
func (w *wireWriter) continue100() {
	w.mu.Lock()
	if !w.sent && !w.sent100 {
		w.sent100 = true
		_ = w.st.WriteHeaders(http.StatusContinue, nil, false)
	}
	w.mu.Unlock()
}

// finish ends the response after the handler returned.
func (w *wireWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.isHead {
		if !w.sent {
			_ = w.sendHead(true)
		}
		return
	}
	tf := w.trailers()
	switch {
	case len(tf) == 0 && !w.sent:
		_ = w.sendHead(true)
	case len(tf) == 0:
		_ = w.failed(w.st.Close())
	case !w.sent && w.sendHead(false) != nil:
	default:
		_ = w.failed(w.st.WriteTrailers(tf))
	}
}

// trailers lists the trailer fields with a value: the names declared in
// the Trailer field at WriteHeader, and the keys prefixed with
// http.TrailerPrefix (whose values win), sorted by name.
func (w *wireWriter) trailers() []httpwire.Field {
	tr := w.tr[:0]
	for _, v := range w.hdr["Trailer"] {
		for key := range strings.SplitSeq(v, ",") {
			key = http.CanonicalHeaderKey(textproto.TrimString(key))
			tr = append(tr, wireTrailer{key, w.hdr[key]})
		}
	}
	for k, vs := range w.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			tr = append(tr, wireTrailer{http.CanonicalHeaderKey(k[len(http.TrailerPrefix):]), vs})
		}
	}
	w.tr = tr
	if len(tr) == 0 {
		return nil
	}
	// Stable: a prefixed key's values come after the declared name's and
	// win below.
	slices.SortStableFunc(tr, func(a, b wireTrailer) int { return strings.Compare(a.name, b.name) })
	tf := w.tf[:0]
	for i := range tr {
		t := &tr[i]
		if i+1 < len(tr) && tr[i+1].name == t.name || !httpguts.ValidTrailerHeader(t.name) {
			continue
		}
		for _, v := range t.vals {
			tf = append(tf, httpwire.Field{Name: sbytes(t.name), Value: sbytes(v)})
		}
	}
	w.tf = tf
	return tf
}

// httpDate returns the Date field's value for now, formatted once a
// second.
func httpDate() string {
	now := time.Now()
	sec := now.Unix()
	if d := dateCache.Load(); d != nil && d.sec == sec {
		return d.s
	}
	d := &dateStamp{sec: sec, s: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.s
}

type dateStamp struct {
	sec int64
	s   string
}

var dateCache atomic.Pointer[dateStamp]
