package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// problem is an RFC 9457 problem document; Errors is the extension member
// listing a refused configuration's problems.
type problem struct {
	Type   string   `json:"type"`
	Title  string   `json:"title"`
	Status int      `json:"status"`
	Detail string   `json:"detail,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

func writeProblem(w http.ResponseWriter, status int, detail string, errs []string) {
	body, _ := json.Marshal(problem{ // strings and ints always marshal
		Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Errors: errs,
	})
	write(w, status, "application/problem+json", append(body, '\n'))
}

// writeJSON encodes v before writing anything, so that a value that does
// not encode is answered 500 rather than with half a document.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // read by people and tools, never embedded in HTML
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		writeProblem(w, http.StatusInternalServerError, "encoding the answer failed: "+err.Error(), nil)
		return
	}
	write(w, status, "application/json", buf.Bytes())
}

func writeText(w http.ResponseWriter, status int, s string) {
	write(w, status, "text/plain; charset=utf-8", []byte(s))
}

func write(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
