package proxy

import "testing"

func TestDotSegment(t *testing.T) {
	cases := map[string]bool{
		"/":                    false,
		"/a/b":                 false,
		"/a/.b":                false,
		"/a/b.":                false,
		"/a/.../b":             false,
		"/a/..b":               false,
		"/a/./b":               true,
		"/a/../b":              true,
		"/a/..":                true,
		"/.":                   true,
		"/public/%2e%2e/admin": true,
		"/public/%2E./admin":   true,
		"/a/%2e":               true,
		"/a/%2f..":             false,
		"*":                    false,
	}
	for path, want := range cases {
		if got := dotSegment([]byte(path)); got != want {
			t.Errorf("dotSegment(%q) = %v, want %v", path, got, want)
		}
	}
}
