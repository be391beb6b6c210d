package route

import "testing"

func TestRewritePrefix(t *testing.T) {
	cases := []struct{ path, prefix, repl, want string }{
		{"/api/users", "/api", "/v2", "/v2/users"},
		{"/api", "/api", "/v2", "/v2"},
		{"/api/", "/api", "/v2", "/v2/"},
		{"/api/users", "/api", "/", "/users"},
		{"/api", "/api", "/", "/"},
		{"/api/users", "/api", "", "/users"},
		{"/api", "/api", "", "/"},
		{"/api/users", "/api/", "/v2", "/v2/users"},
		{"/api/users", "/api/", "/v2/", "/v2/users"},
		{"/api/", "/api/", "/v2/", "/v2/"},
		{"/api//x", "/api", "/v2", "/v2//x"},
		{"/apix", "/api", "/v2", "/apix"},
		{"/other", "/api", "/v2", "/other"},
		{"/api/x", "/api", "v2", "/v2/x"},
		{"/api", "/api", "v2", "/v2"},
		{"/x", "/", "/app", "/app/x"},
		{"/", "/", "/app", "/app"},
	}
	for _, c := range cases {
		got := string(RewritePrefix(nil, c.path, c.prefix, c.repl))
		if got != c.want {
			t.Errorf("RewritePrefix(%q, %q, %q) = %q, want %q", c.path, c.prefix, c.repl, got, c.want)
		}
	}
	if got := string(RewritePrefix([]byte("GET "), "/api/x", "/api", "/v2")); got != "GET /v2/x" {
		t.Errorf("with a dst: %q, want \"GET /v2/x\"", got)
	}
}

func TestHasPrefix(t *testing.T) {
	cases := []struct {
		path, prefix string
		want         bool
	}{
		{"/api", "/api", true},
		{"/api/", "/api", true},
		{"/api/x", "/api", true},
		{"/apix", "/api", false},
		{"/ap", "/api", false},
		{"/api", "/api/", false},
		{"/api/x", "/api/", true},
		{"/x", "/", true},
		{"*", "/", false},
		{"/x", "", true},
	}
	for _, c := range cases {
		if got := HasPrefix(c.path, c.prefix); got != c.want {
			t.Errorf("HasPrefix(%q, %q) = %v, want %v", c.path, c.prefix, got, c.want)
		}
	}
}

func TestAllocRewritePrefix(t *testing.T) {
	buf := make([]byte, 0, 64)
	n := testing.AllocsPerRun(100, func() {
		buf = RewritePrefix(buf[:0], "/api/users/7", "/api", "/v2")
	})
	if n != 0 {
		t.Fatalf("RewritePrefix into a buffer with room: %v allocations, want 0", n)
	}
}
