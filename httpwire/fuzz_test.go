package httpwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
)

// fuzzLimits are small limits, so that fuzzing reaches them.
var fuzzLimits = Limits{MaxHeaderBytes: 512, MaxFields: 8}

// checkFields is the fuzz property of every accepted head: names are
// tokens, values hold no CTL but HTAB and no OWS at either end.
func checkFields(t *testing.T, fields []Field) {
	t.Helper()
	for _, f := range fields {
		if !ValidFieldName(string(f.Name)) {
			t.Fatalf("accepted field name %q is not a token", f.Name)
		}
		if !ValidFieldValue(string(f.Value)) {
			t.Fatalf("accepted field value %q is not a clean value", f.Value)
		}
	}
}

// checkOutcome checks the parse contract: n within buf, n only without an
// error, errors of the documented kinds.
func checkOutcome(t *testing.T, data []byte, n int, err error) {
	t.Helper()
	var e *Error
	switch {
	case err == nil && (n <= 0 || n > len(data)):
		t.Fatalf("accepted with n=%d of %d bytes", n, len(data))
	case err != nil && n != 0:
		t.Fatalf("n=%d with err %v", n, err)
	case err != nil && err != ErrIncomplete && !errors.As(err, &e):
		t.Fatalf("error %v is neither ErrIncomplete nor *Error", err)
	case e != nil && (e.Reason == "" || StatusText(e.Status) == nil):
		t.Fatalf("refusal %d %q", e.Status, e.Reason)
	}
}

func FuzzParseRequestHead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var h RequestHead
		for _, lim := range []Limits{{}, fuzzLimits} {
			n, err := ParseRequestHead(data, &h, lim)
			checkOutcome(t, data, n, err)
			if err != nil {
				continue
			}
			checkFields(t, h.Fields)
			if !ValidFieldName(string(h.Method)) || !validHost(h.Host) || h.Chunked && h.ContentLength >= 0 {
				t.Fatalf("accepted method %q host %q chunked %v CL %d", h.Method, h.Host, h.Chunked, h.ContentLength)
			}
			// The head does not depend on what follows it.
			var again RequestHead
			if n2, err := ParseRequestHead(data[:n], &again, lim); n2 != n || err != nil {
				t.Fatalf("the head alone parses to n=%d err=%v, with what follows n=%d", n2, err, n)
			}
			crossCheckFuzz(t, data[:n], &h)
		}
	})
}

// crossCheckFuzz: where net/http accepts what we accept, both agree on
// method, target and framing (a disagreement there is what smuggling needs).
func crossCheckFuzz(t *testing.T, head []byte, h *RequestHead) {
	std, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return
	}
	if string(h.Method) != std.Method || string(h.Target) != std.RequestURI {
		t.Fatalf("%q: ours %q %q, net/http %q %q", head, h.Method, h.Target, std.Method, std.RequestURI)
	}
	wantLength := h.ContentLength
	if wantLength < 0 && !h.Chunked {
		wantLength = 0
	}
	if wantLength != std.ContentLength {
		t.Fatalf("%q: ours CL=%d chunked=%v, net/http CL=%d", head, h.ContentLength, h.Chunked, std.ContentLength)
	}
}

func FuzzParseResponseHead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var h ResponseHead
		for _, lim := range []Limits{{}, fuzzLimits} {
			n, err := ParseResponseHead(data, &h, lim)
			checkOutcome(t, data, n, err)
			var e *Error
			if errors.As(err, &e) && e.Status != 502 {
				t.Fatalf("response refused with %d, want 502", e.Status)
			}
			if err != nil {
				continue
			}
			checkFields(t, h.Fields)
			if h.Status < 100 || h.Status > 599 || h.Chunked && h.ContentLength >= 0 {
				t.Fatalf("accepted status %d chunked %v CL %d", h.Status, h.Chunked, h.ContentLength)
			}
		}
	})
}

// FuzzChunkedReader decodes data as a chunked body (it must not panic,
// and what it accepts must re-encode and decode to the same bytes and
// trailers), and encodes data with ChunkedWriter in pieces (decoding must
// give data back).
func FuzzChunkedReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		body, trailers, err := decodeChunked(data, 64, fuzzLimits)
		var e *Error
		if err != nil && err != io.ErrUnexpectedEOF && !errors.As(err, &e) {
			t.Fatalf("error %v is neither io.ErrUnexpectedEOF nor *Error", err)
		}
		if err == nil {
			checkFields(t, trailers)
			// Read back with a larger buffer: the writer adds a SP after
			// each colon, so a trailer line that just fitted may not.
			again, trailers2, err := decodeChunked(encodeChunked(body, 7, trailers), 4096, fuzzLimits)
			if err != nil || !bytes.Equal(again, body) || len(trailers2) != len(trailers) {
				t.Fatalf("re-encoded body decodes to %q %v (%d trailers), want %q (%d)", again, err, len(trailers2), body, len(trailers))
			}
		}
		for _, piece := range []int{1, 5, 4096} {
			if piece == 1 && len(data) > 512 {
				continue // a chunk per byte is slow on large inputs
			}
			got, _, err := decodeChunked(encodeChunked(data, piece, nil), 64, Limits{})
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("encoded in pieces of %d, decodes to %q %v, want %q", piece, got, err, data)
			}
		}
	})
}

func decodeChunked(data []byte, bufSize int, lim Limits) ([]byte, []Field, error) {
	var c ChunkedReader
	c.Reset(bufio.NewReaderSize(bytes.NewReader(data), bufSize), lim)
	body, err := io.ReadAll(&c)
	return body, c.Trailers(), err
}

func encodeChunked(data []byte, piece int, trailers []Field) []byte {
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	var w ChunkedWriter
	w.Reset(bw)
	for len(data) > 0 {
		n := min(piece, len(data))
		w.Write(data[:n])
		data = data[n:]
	}
	w.Close(trailers)
	bw.Flush()
	return out.Bytes()
}
