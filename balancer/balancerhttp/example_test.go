package balancerhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/balancer/balancerhttp"
)

// Two backends behind one virtual host: the client names the service, the
// Transport picks the endpoint.
func Example() {
	hello := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from "+r.Host) }
	b1 := httptest.NewServer(http.HandlerFunc(hello))
	defer b1.Close()
	b2 := httptest.NewServer(http.HandlerFunc(hello))
	defer b2.Close()

	set, _ := balancer.NewSet(balancer.SetConfig{})
	set.Update(0, []balancer.Endpoint{{Addr: b1.Listener.Addr().String()}, {Addr: b2.Listener.Addr().String()}})
	rt, err := balancerhttp.New(balancerhttp.Config{Set: set})
	if err != nil {
		panic(err)
	}
	c := &http.Client{Transport: rt}
	defer c.CloseIdleConnections()
	for range 2 {
		resp, err := c.Get("http://orders.internal/status")
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 hello from orders.internal
	// 200 hello from orders.internal
}
