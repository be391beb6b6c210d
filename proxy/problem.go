package proxy

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

// Problem is one pre-built refusal the gateway answers itself: an RFC 9457
// problem+json body and the fixed part of an HTTP/1.1 response head. It is
// built once per generation (or once per process for protocol errors) and
// written with one call; nothing about it is formatted per request.
type Problem struct {
	Status int
	// Reason is the verdict's reason code ("no-route", "upstream-timeout",
	// …): the problem's "reason" member and, in part 3, the metric label.
	Reason string
	// Body is the problem+json document.
	Body []byte
	// head is the status line and fields up to, not including, the
	// Connection field and the blank line; bare is head without the
	// Spillway-Reason field (Config.OmitReason).
	head, bare []byte
}

// problemDoc is the JSON shape of a Problem's body.
type problemDoc struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Status  int    `json:"status"`
	Detail  string `json:"detail"`
	Reason  string `json:"reason"`
	Cluster string `json:"cluster,omitempty"`
}

// NewProblem builds a refusal with status, reason code and detail (a short
// sentence safe to show a client); cluster, when not empty, is named in the
// body so that "is this 502 ours or the backend's?" has an answer.
func NewProblem(status int, reason, detail, cluster string) *Problem {
	body, err := json.Marshal(problemDoc{
		Type: "about:blank", Title: http.StatusText(status), Status: status,
		Detail: detail, Reason: reason, Cluster: cluster,
	})
	if err != nil { // strings and ints always marshal
		panic("proxy: problem body: " + err.Error())
	}
	body = append(body, '\n')
	h := []byte("HTTP/1.1 ")
	h = strconv.AppendInt(h, int64(status), 10)
	h = append(h, ' ')
	h = append(h, http.StatusText(status)...)
	h = append(h, "\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"...)
	length := strconv.AppendInt([]byte("Content-Length: "), int64(len(body)), 10)
	length = append(length, "\r\n"...)
	bare := append(slices.Clip(h), length...)
	h = append(append(append(h, "Spillway-Reason: "...), reason...), "\r\n"...)
	h = append(h, length...)
	return &Problem{Status: status, Reason: reason, Body: body, head: h, bare: bare}
}

// appendH1 appends the whole HTTP/1.1 response to dst; keepAlive false
// adds "Connection: close", reason false leaves Spillway-Reason out. HEAD
// requests get the head only.
func (p *Problem) appendH1(dst []byte, keepAlive, head, reason bool) []byte {
	if reason {
		dst = append(dst, p.head...)
	} else {
		dst = append(dst, p.bare...)
	}
	if !keepAlive {
		dst = append(dst, "Connection: close\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	if head {
		return dst
	}
	return append(dst, p.Body...)
}

// writeHTTP writes p through a net/http ResponseWriter (the HTTP/2
// engine); reason false leaves Spillway-Reason out.
func (p *Problem) writeHTTP(w http.ResponseWriter, head, reason bool) {
	h := w.Header()
	h["Content-Type"] = problemType
	h["Cache-Control"] = noStore
	h["X-Content-Type-Options"] = noSniff
	if reason {
		h["Spillway-Reason"] = []string{p.Reason}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(p.Body))}
	w.WriteHeader(p.Status)
	if !head {
		_, _ = w.Write(p.Body)
	}
}

var (
	problemType = []string{"application/problem+json"}
	noStore     = []string{"no-store"}
	noSniff     = []string{"nosniff"}
)

// Protocol errors answered before any route is known, shared by every
// generation. Their details are fixed sentences: the reason a client sees
// for a malformed request comes from the parser (httpwire.Error) and is
// rendered by protocolProblem.
var (
	problemNoRoute       = NewProblem(http.StatusNotFound, "no-route", "no route matches this request", "")
	problemHeaderTimeout = NewProblem(http.StatusRequestTimeout, "header-timeout", "the request head did not arrive in time", "")
	problemBodyTimeout   = NewProblem(http.StatusRequestTimeout, "body-timeout", "the request body stopped arriving", "")
	problemBodyTooLarge  = NewProblem(http.StatusRequestEntityTooLarge, "body-too-large", "the request body is larger than this route accepts", "")
	problemUpgrade       = NewProblem(http.StatusBadRequest, "upgrade-refused", "this route does not allow that Upgrade", "")
	problemBadBody       = NewProblem(http.StatusBadRequest, "bad-body", "the request body is malformed", "")
)
