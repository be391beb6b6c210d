package request

import (
	"net/textproto"
	"strings"
	"testing"
)

// mapHeader is a test Header over a canonical-key map.
type mapHeader map[string][]string

func (h mapHeader) Get(name string) (string, bool) {
	vs := h[textproto.CanonicalMIMEHeaderKey(name)]
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

func (h mapHeader) Values(name string, fn func(string) bool) {
	for _, v := range h[textproto.CanonicalMIMEHeaderKey(name)] {
		if !fn(v) {
			return
		}
	}
}

func TestGet(t *testing.T) {
	var v View
	if _, ok := v.Get("x-a"); ok {
		t.Fatal("a View without headers has x-a")
	}
	v.Header = mapHeader{"X-A": {"1", "2"}}
	if got, ok := v.Get("x-A"); !ok || got != "1" {
		t.Fatalf("Get = %q %v, want \"1\" true", got, ok)
	}
	var all []string
	v.Header.Values("X-a", func(s string) bool { all = append(all, s); return true })
	if strings.Join(all, ",") != "1,2" {
		t.Fatalf("Values = %v", all)
	}
}
