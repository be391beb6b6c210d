package admit_test

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/admit"
	"github.com/spillwayhq/spillway/limit"
)

// A service protected in a few lines: the gradient algorithm finds the
// concurrency limit from latency, a CoDel queue absorbs bursts of up to
// 100 ms, and the excess is refused with 503 + Retry-After, sheddable
// requests first.
func ExampleGate_Handler() {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello\n")) })

	alg, _ := limit.NewGradient(limit.GradientConfig{})
	lim, _ := limit.NewLimiter(alg, limit.LimiterConfig{
		Queue: limit.QueueConfig{Discipline: limit.CoDel, MaxWait: 0.1},
	})
	gate, _ := admit.New(admit.Config{Limiter: lim})
	http.Handle("/", gate.Handler(app, admit.HTTPOptions{}))
	prometheus.MustRegister(gate.Collector())
	// http.ListenAndServe(":8080", nil)
}
