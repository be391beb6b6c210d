package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/upstream"
)

// Every request counts once in its endpoint's in-flight count and is done
// once: after the answers the counts are back to 0, with a picker (which
// counts the start itself) and with a hash table (whose lookup does not).
func TestInFlightBackToZero(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("hashed=%v", hashed), func(t *testing.T) {
			cl := newCluster(t, "app", upstream.Config{}, be)
			if hashed {
				rh := &balancer.RingConfig{MinSize: 64}
				set, err := balancer.NewSet(balancer.SetConfig{Tables: []balancer.TableBuilder{rh}})
				if err != nil {
					t.Fatal(err)
				}
				set.Update(0, []balancer.Endpoint{{Addr: be}})
				cl.Set, cl.Table = set, rh
				cl.Hash = &balancer.HashPolicy{Header: "x-user"}
			}
			addr, _ := startProxy(t, Config{}, one(&Route{Name: "r", Cluster: cl}))
			for i := range 5 {
				resp := raw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nX-User: u"+fmt.Sprint(i)+"\r\nConnection: close\r\n\r\n")
				if !strings.HasPrefix(resp, "HTTP/1.1 200") {
					t.Fatalf("request %d: %q", i, resp)
				}
			}
			for _, m := range cl.Set.Members(0) {
				if n := m.InFlight(); n != 0 {
					t.Errorf("endpoint %s: %d in flight after every answer, want 0", m.Addr(), n)
				}
			}
		})
	}
}
