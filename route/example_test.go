package route_test

import (
	"fmt"

	"github.com/spillwayhq/spillway/request"
	"github.com/spillwayhq/spillway/route"
)

func Example() {
	var t route.Table[string]
	for _, r := range []struct {
		m       route.Match
		cluster string
	}{
		{route.Match{Hosts: []string{"api.example.com"}, Prefix: "/v1"}, "api-v1"},
		{route.Match{Hosts: []string{"*.example.com"}, Prefix: "/static/"}, "cdn"},
		{route.Match{Regex: "/v[2-9]/.*", Methods: []string{"GET"}}, "api-next"},
		{route.Match{Prefix: "/"}, "web"},
	} {
		if err := t.Add(r.m, r.cluster); err != nil {
			fmt.Println(err)
			return
		}
	}
	t.Freeze()
	for _, v := range []request.View{
		{Method: "GET", Host: "api.example.com", Path: "/v1/users"},
		{Method: "GET", Host: "api.example.com", Path: "/v1x"},
		{Method: "GET", Host: "img.example.com", Path: "/static/a.png"},
		{Method: "GET", Host: "other.org", Path: "/v2/users"},
		{Method: "POST", Host: "other.org", Path: "/v2/users"},
	} {
		cluster, i, _ := t.Lookup(&v)
		fmt.Println(v.Method, v.Host+v.Path, "→", i, cluster)
	}
	fmt.Println(string(route.RewritePrefix(nil, "/v1/users", "/v1", "/")))
	fmt.Println(t.Add(route.Match{}, "late"))
	fmt.Println(route.Match{Hosts: []string{"api.*.com"}}.Validate())
	// Output:
	// GET api.example.com/v1/users → 0 api-v1
	// GET api.example.com/v1x → 3 web
	// GET img.example.com/static/a.png → 1 cdn
	// GET other.org/v2/users → 2 api-next
	// POST other.org/v2/users → 3 web
	// /users
	// route: table is frozen: add every route before Freeze
	// route: Hosts[0]: "api.*.com": a wildcard must be the whole leftmost label, as in "*.example.com" (or "*" for any host)
}
