package rules

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/ratelimit"
)

func TestMatchPath(t *testing.T) {
	tests := []struct {
		pat, path string
		want      bool
	}{
		{"/login", "/login", true},
		{"/login", "/login2", false},
		{"/login", "/log", false},
		{"/login", "/login/x", false},
		{"/login", "/", false},
		{"/", "/", true},
		{"/", "/x", false},
		{"/*", "/", true},
		{"/*", "/a/b/c", true},
		{"/api/*", "/api", true},
		{"/api/*", "/api/v1/users", true},
		{"/api/*", "/apix", false},
		{"/api/*", "/", false},
		{"/users/{id}", "/users/42", true},
		{"/users/{id}", "/users", false},
		{"/users/{id}", "/users/42/posts", false},
		{"/users/{id}/posts", "/users/42/posts", true},
		{"/users/{id}/posts", "/users/42/likes", false},
		{"/files/{p...}", "/files", true},
		{"/files/{p...}", "/files/a/b", true},
		{"/files/{p...}", "/filesx", false},
		{"/a/{x}/{y}", "/a/1/2", true},
		{"/a/{x}/{y}", "/a/1", false},
		{"bad", "/bad", false},
		{"/x", "x", false},
	}
	for _, tc := range tests {
		if got := MatchPath(tc.pat, tc.path); got != tc.want {
			t.Errorf("MatchPath(%q, %q) = %v, want %v", tc.pat, tc.path, got, tc.want)
		}
	}
}

func TestMatch(t *testing.T) {
	m := Match{Methods: []string{"POST", "PUT"}, Paths: []string{"/login", "/users/{id}"}}
	tests := []struct {
		method, path, route string
		ok                  bool
	}{
		{"POST", "/login", "/login", true},
		{"PUT", "/users/7", "/users/{id}", true},
		{"GET", "/login", "", false},
		{"POST", "/other", "", false},
	}
	for _, tc := range tests {
		if route, ok := m.Matches(tc.method, tc.path); route != tc.route || ok != tc.ok {
			t.Errorf("Matches(%s %s) = %q, %v; want %q, %v", tc.method, tc.path, route, ok, tc.route, tc.ok)
		}
	}
	var all Match
	if route, ok := all.Matches("DELETE", "/anything"); route != "" || !ok {
		t.Errorf("zero Match: %q, %v", route, ok)
	}
	if n := testing.AllocsPerRun(100, func() { m.Matches("PUT", "/users/7") }); n != 0 {
		t.Errorf("Matches allocates %v times", n)
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{"": "/", "/": "/", "/login/": "/login", "/a/../login": "/login",
		"//login": "/login", "login": "/login", "/a/./b": "/a/b", "/..": "/"} {
		if got := CleanPath(in); got != want {
			t.Errorf("CleanPath(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { CleanPath("/api/v1/users") }); n != 0 {
		t.Errorf("CleanPath of a clean path allocates %v times", n)
	}
}

func TestRuleValidate(t *testing.T) {
	ok := Rule{ID: "r", Key: []KeyPart{{Kind: PartIP, Name: "ip"}}, Spec: ratelimit.Spec{Rate: 10, Per: 1}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(r *Rule)
		field  string
	}{
		{"empty id", func(r *Rule) { r.ID = "" }, "id"},
		{"no rate", func(r *Rule) { r.Spec.Rate = 0 }, "rate"},
		{"no per", func(r *Rule) { r.Spec.Per = 0 }, "per"},
		{"bad algorithm", func(r *Rule) { r.Spec.Algorithm = 99 }, "algorithm"},
		{"negative cost", func(r *Rule) { r.Cost = -1 }, "cost"},
		{"cost above default burst", func(r *Rule) { r.Cost = 11 }, "cost"},
		{"window cost above rate", func(r *Rule) { r.Spec.Algorithm = ratelimit.AlgFixedWindow; r.Cost = 11 }, "cost"},
		{"unknown part kind", func(r *Rule) { r.Key = []KeyPart{{Name: "x"}} }, "key[0]"},
		{"header part without header", func(r *Rule) { r.Key = []KeyPart{{Kind: PartHeader, Name: "header:"}} }, "key[0]"},
		{"non-canonical header", func(r *Rule) { r.Key = []KeyPart{{Kind: PartIdentity, Name: "u", Header: "x-user"}} }, "key[0]"},
		{"fail mode", func(r *Rule) { r.FailMode = 7 }, "failMode"},
		{"on missing", func(r *Rule) { r.OnMissing = 7 }, "onMissing"},
		{"lower-case method", func(r *Rule) { r.Match.Methods = []string{"get"} }, "match.methods[0]"},
		{"bad pattern", func(r *Rule) { r.Match.Paths = []string{"/a/{}"} }, "match.paths[0]"},
		{"duplicate wildcard", func(r *Rule) { r.Match.Paths = []string{"/a/{x}/{x}"} }, "match.paths[0]"},
	}
	for _, tc := range tests {
		r := ok
		r.Key = append([]KeyPart(nil), ok.Key...)
		tc.change(&r)
		err := r.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want a FieldError for %s", tc.name, err, tc.field)
		}
	}
}

func TestSetValidate(t *testing.T) {
	r := Rule{ID: "r", Spec: ratelimit.Spec{Rate: 1, Per: 1}}
	tests := []struct {
		name string
		set  Set
		want string
	}{
		{"duplicate id", Set{Rules: []Rule{r, r}}, "duplicate rule id"},
		{"bad proxy", Set{TrustedProxies: []netip.Prefix{{}}}, "trustedProxies[0]"},
		{"bad header", Set{ForwardedHeader: "X-Real-Ip"}, "forwardedHeader"},
		{"bad prefix", Set{IPv6Prefix: 200}, "ipv6Prefix"},
		{"bad identity", Set{Identities: map[string]Identity{"u": {Header: "bad header"}}}, "identities.u"},
	}
	for _, tc := range tests {
		if err := tc.set.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	var empty Set
	if err := empty.Validate(); err != nil {
		t.Errorf("zero Set: %v", err)
	}
}

func TestCapacity(t *testing.T) {
	tests := []struct {
		spec ratelimit.Spec
		want int
	}{
		{ratelimit.Spec{Rate: 10, Per: 1}, 10},
		{ratelimit.Spec{Rate: 2.5, Per: 1}, 3},
		{ratelimit.Spec{Rate: 10, Per: 1, Burst: 4}, 4},
		{ratelimit.Spec{Algorithm: ratelimit.AlgSlidingCounter, Rate: 7, Per: 1}, 7},
		{ratelimit.Spec{Algorithm: ratelimit.AlgLeakyQueue, Rate: 5, Per: 1, Burst: 20}, 20},
	}
	for _, tc := range tests {
		r := Rule{Spec: tc.spec}
		if got := r.Capacity(); got != tc.want {
			t.Errorf("Capacity(%+v) = %d, want %d", tc.spec, got, tc.want)
		}
	}
}

func TestParseKeyPart(t *testing.T) {
	ids := map[string]Identity{"user": {Header: "X-Auth-User"}, "org": {Header: "X-Org"}}
	tests := []struct {
		in   string
		want KeyPart
	}{
		{"ip", KeyPart{Kind: PartIP, Name: "ip"}},
		{"route", KeyPart{Kind: PartRoute, Name: "route"}},
		{"header:x-device-id", KeyPart{Kind: PartHeader, Name: "header:x-device-id", Header: "X-Device-Id"}},
		{"user", KeyPart{Kind: PartIdentity, Name: "user", Header: "X-Auth-User"}},
		{"org", KeyPart{Kind: PartIdentity, Name: "org", Header: "X-Org"}},
		{"apikey", KeyPart{Kind: PartIdentity, Name: "apikey", Header: "X-Api-Key"}},
	}
	for _, tc := range tests {
		if got, err := ParseKeyPart(tc.in, ids); err != nil || got != tc.want {
			t.Errorf("ParseKeyPart(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "IP", "header:", "header:a b", "nobody"} {
		if _, err := ParseKeyPart(bad, ids); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseKeyPart(%q): %v", bad, err)
		}
	}
}
