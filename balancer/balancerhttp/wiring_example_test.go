package balancerhttp_test

import (
	"context"
	"net/http"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/balancer/balancerhttp"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/discovery"
	"github.com/spillwayhq/spillway/health"
)

// The whole wiring: endpoints from DNS, active HTTP checks and passive
// outlier detection feeding a Set, least-request picks with slow start.
func ExampleFollow() {
	ctx := context.Background()
	clk := clock.NewReal()
	set, _ := balancer.NewSet(balancer.SetConfig{SlowStart: 30}) // ramp returning endpoints over 30 s
	checker, _ := health.NewChecker(&health.HTTPCheck{Path: "/healthz"},
		health.ActiveConfig{Interval: 2, Fall: 3, Rise: 2},
		health.CheckerOptions{Name: "orders", OnChange: balancerhttp.HealthCallback(set, clk)})
	outliers, _ := health.NewDetector(health.OutlierConfig{}) // 5 consecutive 5xx or gateway failures eject
	go balancerhttp.Follow(ctx, set, &discovery.DNS{Name: "orders.internal", Port: 8080}, checker, outliers, clk)
	checker.Start()
	lb, _ := balancerhttp.New(balancerhttp.Config{Set: set, Outlier: outliers, Clock: clk})
	orders := &http.Client{Transport: lb} // GET http://orders.internal/... goes to a healthy endpoint
	_ = orders
}
