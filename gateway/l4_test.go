package gateway

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
)

// tcpEcho is a TCP backend that greets each connection with its name and
// a newline, then echoes what it reads. stop closes its listener and its
// open connections, so its address refuses from then on.
type tcpEcho struct {
	addr string
	stop func()
}

func newTCPEcho(t *testing.T, name string) *tcpEcho {
	t.Helper()
	addr, stop := rawServer(t, func(c net.Conn) {
		defer c.Close()
		if _, err := io.WriteString(c, name+"\n"); err == nil {
			_, _ = io.Copy(c, c)
		}
	})
	return &tcpEcho{addr: addr, stop: stop}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// greet opens a connection through the gateway, reads the backend's name,
// and checks one line comes back echoed.
func greet(t *testing.T, addr string, i int) string {
	t.Helper()
	c, br := dialRaw(t, addr)
	defer c.Close()
	name, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("connection %d: reading the greeting: %v", i, err)
	}
	line := fmt.Sprintf("ping %d\n", i)
	if _, err := io.WriteString(c, line); err != nil {
		t.Fatal(err)
	}
	if got, err := br.ReadString('\n'); err != nil || got != line {
		t.Fatalf("connection %d: echo %q (%v), want %q", i, got, err, line)
	}
	return name[:len(name)-1]
}

// waitStates polls the cluster's Set until every address has the state
// wanted (healthy or not), for at most 10 s.
func waitStates(t *testing.T, g *Gateway, cluster string, want map[string]bool) {
	t.Helper()
	set := g.cur.Load().clusters[cluster].px.Set
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		for addr, healthy := range want {
			st, _ := set.State(g.clk.Now(), addr)
			if (st == balancer.Healthy) != healthy {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster %s: health states not %v within 10s", cluster, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestL4RoundRobinSkipsUnhealthy: a tcp listener over three endpoints, one
// of them dead from the start. Once the active tcp checks have run, the
// connections alternate between the two live echo servers and none is
// dialled to the dead one (no dial failure); when one live server stops,
// its check fails and every connection goes to the other.
func TestL4RoundRobinSkipsUnhealthy(t *testing.T) {
	noLeaks(t)
	a, b, dead := newTCPEcho(t, "a"), newTCPEcho(t, "b"), deadAddr(t)
	g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: tcp, address: "127.0.0.1:0", protocol: tcp, cluster: echo}]
clusters:
  - name: echo
    picker: round_robin
    panic_threshold: 0
    endpoints: ["`+a.addr+`", "`+dead+`", "`+b.addr+`"]
    health: {active: {type: tcp, interval: 50ms, timeout: 1s, fall: 1, rise: 1}}
`)
	waitStates(t, g, "echo", map[string]bool{a.addr: true, b.addr: true, dead: false})
	addr := g.Addr("tcp")
	seen := map[string]int{}
	prev := ""
	for i := range 6 {
		name := greet(t, addr, i)
		if name == prev {
			t.Fatalf("connection %d went to %s like the one before: round robin over a and b must alternate", i, name)
		}
		prev = name
		seen[name]++
	}
	if seen["a"] != 3 || seen["b"] != 3 {
		t.Fatalf("six connections went %v, want a and b three times each", seen)
	}
	p := sockOf(t, g, "tcp").tcp
	if st := p.Stats(); st.DialFailures != 0 || st.NoEndpoint != 0 || st.Unreachable != 0 {
		t.Fatalf("stats %+v: the dead endpoint was dialled (or no endpoint was found)", st)
	}

	b.stop()
	waitStates(t, g, "echo", map[string]bool{a.addr: true, b.addr: false, dead: false})
	for i := range 4 {
		if name := greet(t, addr, 6+i); name != "a" {
			t.Fatalf("connection %d after b stopped went to %s, want a", 6+i, name)
		}
	}
	if st := p.Stats(); st.DialFailures != 0 {
		t.Fatalf("stats %+v: an endpoint marked unhealthy was dialled", st)
	}
}

// TestStaticEndpointsReadyAtStart: the first connection after Start finds
// the cluster's static endpoints (they were applied by a goroutine that
// could run after the listener served, closing the connection as if no
// endpoint existed; twenty fresh gateways gave it twenty chances).
func TestStaticEndpointsReadyAtStart(t *testing.T) {
	noLeaks(t)
	a := newTCPEcho(t, "a")
	for i := range 20 {
		g := start(t, `
version: 1
admin: {address: off}
listeners: [{name: tcp, address: "127.0.0.1:0", protocol: tcp, cluster: echo}]
clusters: [{name: echo, endpoints: ["`+a.addr+`"]}]
`)
		if name := greet(t, g.Addr("tcp"), i); name != "a" {
			t.Fatalf("gateway %d: first connection reached %q, want a", i, name)
		}
	}
}
