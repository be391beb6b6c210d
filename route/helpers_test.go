package route

import (
	"strings"

	"github.com/spillwayhq/spillway/request"
)

// fields is a test request.Header: name/value pairs in the order received,
// looked up case-insensitively without allocating.
type fields []string

func (f fields) Get(name string) (string, bool) {
	for i := 0; i+1 < len(f); i += 2 {
		if strings.EqualFold(f[i], name) {
			return f[i+1], true
		}
	}
	return "", false
}

func (f fields) Values(name string, fn func(string) bool) {
	for i := 0; i+1 < len(f); i += 2 {
		if strings.EqualFold(f[i], name) && !fn(f[i+1]) {
			return
		}
	}
}

// req is a request as a test writes it.
type req struct {
	method, host, path string
	hdr                fields
}

// view returns r as a View (method GET when r gives none).
func (r req) view() *request.View {
	v := &request.View{Method: r.method, Host: r.host, Path: r.path, Major: 1, Minor: 1}
	if v.Method == "" {
		v.Method = "GET"
	}
	if r.hdr != nil {
		v.Header = r.hdr
	}
	return v
}

// build returns a table of ms whose values are their indices, frozen or
// not; it panics on a bad Match (the cases are written to be valid).
func build(ms []Match, freeze bool) *Table[int] {
	t := new(Table[int])
	for i, m := range ms {
		if err := t.Add(m, i); err != nil {
			panic(err)
		}
	}
	if freeze {
		t.Freeze()
	}
	return t
}
