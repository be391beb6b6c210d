package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// Three requests a minute per client IP, at one instant: three pass with
// the RateLimit field counting down, the fourth is refused with
// Retry-After and a problem+json body. (GCRA: T = 20 s, τ = 40 s; the
// fourth finds TAT − now = 60 s and may retry 20 s later.)
func Example() {
	set, err := rules.Parse("rules.yaml", []byte(`rules:
  - {id: per-ip, key: [ip], rate: 3, per: 1m}
`))
	if err != nil {
		panic(err)
	}
	lim, err := httplimit.New(set, httplimit.Config{Clock: &clock.Manual{}})
	if err != nil {
		panic(err)
	}
	h := lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello\n")
	}))
	for range 4 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
		if w.Code != 200 {
			fmt.Println("Retry-After:", w.Header().Get("Retry-After"))
			fmt.Print(w.Body)
		}
	}
	// Output:
	// 200 "per-ip";q=3;w=60 "per-ip";r=2;t=20
	// 200 "per-ip";q=3;w=60 "per-ip";r=1;t=40
	// 200 "per-ip";q=3;w=60 "per-ip";r=0;t=60
	// 429 "per-ip";q=3;w=60 "per-ip";r=0;t=20
	// Retry-After: 20
	// {"type":"about:blank","title":"Too Many Requests","status":429,"detail":"Rule \"per-ip\" allows 3 requests per minute. Try again in about 20 seconds.","rule":"per-ip"}
}
