package discovery_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/discovery"
)

// A DNS source over SRV records, feeding an endpoint set. Here the
// nameserver is a small one on loopback (below) that knows two backends;
// without Resolver the source asks the nameservers of /etc/resolv.conf. Run
// blocks until ctx ends, re-resolving when the answer's TTL expires (30 s
// here, clamped to [MinTTL, MaxTTL]), so a service runs it on a goroutine of
// its own. The backup record (priority 20) is left to health checking.
func ExampleDNS() {
	ns, stop := startNameserver("_http._tcp.backend.example.com.",
		dnsmessage.SRVResource{Priority: 10, Weight: 3, Port: 8080, Target: dnsmessage.MustNewName("b1.example.com.")},
		dnsmessage.SRVResource{Priority: 10, Weight: 1, Port: 8080, Target: dnsmessage.MustNewName("b2.example.com.")},
		dnsmessage.SRVResource{Priority: 20, Weight: 1, Port: 8080, Target: dnsmessage.MustNewName("backup.example.com.")},
	)
	defer stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &discovery.DNS{
		Name:     "_http._tcp.backend.example.com",
		SRV:      true,
		MaxTTL:   time.Minute,
		Resolver: &discovery.Client{Servers: []string{ns}},
		OnError:  func(err error) { fmt.Println("discovery:", err, "(keeping the last list)") },
	}
	err := src.Run(ctx, func(eps []balancer.Endpoint) {
		for _, e := range eps { // hand eps to the endpoint set here (balancer.Set.Update)
			fmt.Println(e.Addr, "weight", e.Weight)
		}
		cancel() // one list is all this example wants
	})
	fmt.Println(err)
	// Output:
	// b1.example.com:8080 weight 3
	// b2.example.com:8080 weight 1
	// context canceled
}

// startNameserver answers DNS queries over UDP on loopback: the SRV records
// given for name (TTL 30 s), an empty answer for other types of name, and
// NXDOMAIN for other names. stop closes it and waits for it to end.
func startNameserver(name string, srvs ...dnsmessage.SRVResource) (addr string, stop func()) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return // closed
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 {
				continue
			}
			a := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true}, Questions: q.Questions}
			switch qs := q.Questions[0]; {
			case qs.Name.String() != name:
				a.RCode = dnsmessage.RCodeNameError
			case qs.Type == dnsmessage.TypeSRV:
				for _, s := range srvs {
					h := dnsmessage.ResourceHeader{Name: qs.Name, Type: dnsmessage.TypeSRV, Class: dnsmessage.ClassINET, TTL: 30}
					a.Answers = append(a.Answers, dnsmessage.Resource{Header: h, Body: &s})
				}
			}
			if out, err := a.Pack(); err == nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String(), func() { pc.Close(); <-done }
}
