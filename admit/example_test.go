package admit_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/limit"
)

// A service protected in a few lines: the gradient algorithm finds the
// concurrency limit from latency, a CoDel queue absorbs bursts of up to
// 100 ms, and the excess is refused with 503 + Retry-After, sheddable
// requests first. A request whose caller has no time left
// (Spillway-Timeout: 0m) is refused before any work.
func ExampleGate_Handler() {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })

	alg, _ := limit.NewGradient(limit.GradientConfig{})
	lim, _ := limit.NewLimiter(alg, limit.LimiterConfig{
		Queue: limit.QueueConfig{Discipline: limit.CoDel, MaxWait: 0.1},
	})
	gate, err := admit.New(admit.Config{Limiter: lim})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry() // or prometheus.MustRegister for the default registry
	reg.MustRegister(gate.Collector())
	mux := http.NewServeMux()
	mux.Handle("/", gate.Handler(app, admit.HTTPOptions{}))
	srv := httptest.NewServer(mux) // in production: http.ListenAndServe(":8080", mux)
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	for _, budget := range []string{"250m", "0m"} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("Spillway-Criticality", "sheddable")
		req.Header.Set("Spillway-Timeout", budget)
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			var problem struct{ Reason string }
			json.Unmarshal(body, &problem)
			body = []byte(problem.Reason)
		}
		fmt.Println(budget, resp.StatusCode, string(body))
	}
	// Output:
	// 250m 200 hello
	// 0m 503 deadline
}
