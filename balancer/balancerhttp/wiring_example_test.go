package balancerhttp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/balancer/balancerhttp"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/discovery"
	"github.com/spillwayhq/spillway/health"
)

// The whole wiring: endpoints from discovery, active HTTP checks and
// passive outlier detection feeding a Set, least-request picks with slow
// start. Of the two loopback backends here, "blue" fails its health check,
// so requests for orders.internal go to "green" only. In production the
// source would be &discovery.DNS{Name: "orders.internal", Port: 8080}.
func ExampleFollow() {
	blue := backend("blue", http.StatusServiceUnavailable)
	defer blue.Close()
	green := backend("green", http.StatusOK)
	defer green.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clock.NewReal()
	set, _ := balancer.NewSet(balancer.SetConfig{SlowStart: 30}) // ramp returning endpoints over 30 s
	greenUp := make(chan struct{})
	apply := balancerhttp.HealthCallback(set, clk)
	checker, _ := health.NewChecker(&health.HTTPCheck{Path: "/healthz"},
		health.ActiveConfig{Interval: 2, Fall: 3, Rise: 2, Jitter: -1}, // no jitter: the first check at once
		health.CheckerOptions{Name: "orders", Logger: slog.New(slog.DiscardHandler),
			OnChange: func(a string, healthy bool, reason string) {
				apply(a, healthy, reason)
				if a == addr(green) && healthy {
					close(greenUp) // only for this example: wait for the first check
				}
			}})
	outliers, _ := health.NewDetector(health.OutlierConfig{}) // 5 consecutive 5xx or gateway failures eject
	src := discovery.Static(balancer.Endpoint{Addr: addr(blue)}, balancer.Endpoint{Addr: addr(green)})
	followed := make(chan error, 1)
	go func() { followed <- balancerhttp.Follow(ctx, set, src, checker, outliers, clk) }()
	checker.Start()
	defer checker.Stop()
	<-greenUp // targets start unhealthy; one passed check puts green in service, blue stays out

	lb, _ := balancerhttp.New(balancerhttp.Config{Set: set, Outlier: outliers, Clock: clk})
	orders := &http.Client{Transport: lb}
	defer orders.CloseIdleConnections()
	for range 3 {
		resp, err := orders.Get("http://orders.internal/status")
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	cancel()
	fmt.Println("Follow:", <-followed)
	// Output:
	// 200 green
	// 200 green
	// 200 green
	// Follow: context canceled
}

// backend is a loopback server named name whose /healthz answers status.
func backend(name string, status int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(status)
			return
		}
		io.WriteString(w, name)
	}))
}

func addr(s *httptest.Server) string { return s.Listener.Addr().String() }
