package discovery

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/spillwayhq/spillway/balancer"
)

// zoneKey names an RRset of the test server's zone.
type zoneKey struct {
	name string // lower case, with the final dot
	typ  dnsmessage.Type
}

// dnsServer is a tiny authoritative DNS server on 127.0.0.1, UDP and TCP on
// the same port, answering from a fixed zone.
type dnsServer struct {
	addr string
	zone map[zoneKey][]dnsmessage.Resource

	rcode       dnsmessage.RCode // answer every query with this code when not 0
	silent      bool             // read queries, never answer
	truncateUDP bool             // answer UDP with TC set and no records
	strayFirst  bool             // send a reply with a wrong ID before the right one

	udpQueries, tcpQueries atomic.Int32
	ednsSize               atomic.Int32 // the UDP size of the last query's OPT record
	seen                   chan struct{}
}

func rr(name string, typ dnsmessage.Type, ttl uint32, body dnsmessage.ResourceBody) dnsmessage.Resource {
	return dnsmessage.Resource{
		Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET, TTL: ttl},
		Body:   body,
	}
}

func aRR(name string, ttl uint32, ip string) dnsmessage.Resource {
	return rr(name, dnsmessage.TypeA, ttl, &dnsmessage.AResource{A: netip.MustParseAddr(ip).As4()})
}

func aaaaRR(name string, ttl uint32, ip string) dnsmessage.Resource {
	return rr(name, dnsmessage.TypeAAAA, ttl, &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr(ip).As16()})
}

func srvRR(name string, ttl uint32, prio, weight, port uint16, target string) dnsmessage.Resource {
	return rr(name, dnsmessage.TypeSRV, ttl, &dnsmessage.SRVResource{Priority: prio, Weight: weight, Port: port, Target: dnsmessage.MustNewName(target)})
}

func testZone() map[zoneKey][]dnsmessage.Resource {
	return map[zoneKey][]dnsmessage.Resource{
		{"svc.test.", dnsmessage.TypeA}:    {aRR("svc.test.", 30, "10.0.0.1"), aRR("svc.test.", 20, "10.0.0.2")},
		{"svc.test.", dnsmessage.TypeAAAA}: {aaaaRR("svc.test.", 40, "2001:db8::1")},
		{"v4only.test.", dnsmessage.TypeA}: {aRR("v4only.test.", 60, "10.0.0.9")},
		{"alias.test.", dnsmessage.TypeA}: {
			rr("alias.test.", dnsmessage.TypeCNAME, 10, &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("svc.test.")}),
			aRR("svc.test.", 30, "10.0.0.1"),
		},
		{"_http._tcp.svc.test.", dnsmessage.TypeSRV}: {
			srvRR("_http._tcp.svc.test.", 90, 10, 5, 8080, "a.svc.test."),
			srvRR("_http._tcp.svc.test.", 70, 10, 1, 8081, "b.svc.test."),
			srvRR("_http._tcp.svc.test.", 90, 20, 9, 8080, "backup.svc.test."),
		},
	}
}

// startDNSServer serves zone until the test ends; opts set its behaviour
// before it starts.
func startDNSServer(t *testing.T, zone map[zoneKey][]dnsmessage.Resource, opts ...func(*dnsServer)) *dnsServer {
	t.Helper()
	s := &dnsServer{zone: zone, seen: make(chan struct{}, 64)}
	for _, o := range opts {
		o(s)
	}
	var pc net.PacketConn
	var ln net.Listener
	for i := 0; ; i++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if i == 20 {
			t.Fatalf("no port free for both UDP and TCP: %v", err)
		}
	}
	s.addr = pc.LocalAddr().String()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.serveUDP(pc) }()
	go func() { defer wg.Done(); s.serveTCP(ln, &wg) }()
	t.Cleanup(func() { pc.Close(); ln.Close(); wg.Wait() })
	return s
}

func (s *dnsServer) serveUDP(pc net.PacketConn) {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		s.udpQueries.Add(1)
		select {
		case s.seen <- struct{}{}:
		default:
		}
		if s.silent {
			continue
		}
		reply, id := s.answer(buf[:n], true)
		if reply == nil {
			continue
		}
		if s.strayFirst {
			stray := append([]byte(nil), reply...)
			binary.BigEndian.PutUint16(stray, id+1)
			pc.WriteTo(stray, from)
		}
		pc.WriteTo(reply, from)
	}
}

func (s *dnsServer) serveTCP(ln net.Listener, wg *sync.WaitGroup) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(guard))
			var size [2]byte
			if _, err := io.ReadFull(conn, size[:]); err != nil {
				return
			}
			msg := make([]byte, binary.BigEndian.Uint16(size[:]))
			if _, err := io.ReadFull(conn, msg); err != nil {
				return
			}
			s.tcpQueries.Add(1)
			reply, _ := s.answer(msg, false)
			if reply == nil {
				return
			}
			conn.Write(binary.BigEndian.AppendUint16(nil, uint16(len(reply))))
			conn.Write(reply)
		}()
	}
}

// answer builds the reply to query; nil for a query it cannot parse.
func (s *dnsServer) answer(query []byte, udp bool) ([]byte, uint16) {
	var m dnsmessage.Message
	if err := m.Unpack(query); err != nil || len(m.Questions) != 1 {
		return nil, 0
	}
	for _, a := range m.Additionals {
		if a.Header.Type == dnsmessage.TypeOPT {
			s.ednsSize.Store(int32(a.Header.Class))
		}
	}
	q := m.Questions[0]
	reply := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: m.Header.ID, Response: true, Authoritative: true, RecursionDesired: m.Header.RecursionDesired},
		Questions: m.Questions,
	}
	name := strings.ToLower(q.Name.String())
	exists := false
	for k := range s.zone {
		exists = exists || k.name == name
	}
	switch {
	case s.rcode != 0:
		reply.Header.RCode = s.rcode
	case !exists:
		reply.Header.RCode = dnsmessage.RCodeNameError
	case udp && s.truncateUDP:
		reply.Header.Truncated = true
	default:
		reply.Answers = s.zone[zoneKey{name, q.Type}]
	}
	out, err := reply.Pack()
	if err != nil {
		panic(err)
	}
	return out, m.Header.ID
}

func TestClientLookupIPWithTTLs(t *testing.T) {
	srv := startDNSServer(t, testZone())
	c := &Client{Servers: []string{srv.addr}}
	ctx := context.Background()
	for _, tc := range []struct {
		network, host string
		want          []IPRecord
	}{
		{"ip", "svc.test", []IPRecord{ipRec("10.0.0.1", 30*time.Second), ipRec("10.0.0.2", 20*time.Second), ipRec("2001:db8::1", 40*time.Second)}},
		{"ip4", "SVC.Test.", []IPRecord{ipRec("10.0.0.1", 30*time.Second), ipRec("10.0.0.2", 20*time.Second)}},
		{"ip6", "svc.test", []IPRecord{ipRec("2001:db8::1", 40*time.Second)}},
		{"ip", "v4only.test", []IPRecord{ipRec("10.0.0.9", time.Minute)}},    // AAAA: no data, not an error
		{"ip4", "alias.test", []IPRecord{ipRec("10.0.0.1", 10*time.Second)}}, // capped by the CNAME's TTL
	} {
		got, err := c.LookupIP(ctx, tc.network, tc.host)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("LookupIP(%s, %s) = %v, %v; want %v", tc.network, tc.host, got, err, tc.want)
		}
	}
	if got := srv.ednsSize.Load(); got != ednsSize {
		t.Errorf("queries advertised an EDNS UDP size of %d, want %d", got, ednsSize)
	}
	if srv.tcpQueries.Load() != 0 {
		t.Errorf("%d TCP queries, want none", srv.tcpQueries.Load())
	}
}

func TestClientLookupSRV(t *testing.T) {
	srv := startDNSServer(t, testZone())
	c := &Client{Servers: []string{srv.addr}}
	got, err := c.LookupSRV(context.Background(), "_http._tcp.svc.test")
	want := []SRVRecord{
		{Target: "a.svc.test.", Port: 8080, Priority: 10, Weight: 5, TTL: 90 * time.Second},
		{Target: "b.svc.test.", Port: 8081, Priority: 10, Weight: 1, TTL: 70 * time.Second},
		{Target: "backup.svc.test.", Port: 8080, Priority: 20, Weight: 9, TTL: 90 * time.Second},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LookupSRV = %v, %v; want %v", got, err, want)
	}
}

func TestClientNXDomainIsFinal(t *testing.T) {
	first := startDNSServer(t, testZone())
	second := startDNSServer(t, testZone())
	c := &Client{Servers: []string{first.addr, second.addr}}
	_, err := c.LookupIP(context.Background(), "ip", "nosuch.test")
	if !errors.Is(err, ErrNoRecords) || !strings.Contains(err.Error(), "NXDOMAIN") {
		t.Fatalf("LookupIP(nosuch) = %v, want ErrNoRecords (NXDOMAIN)", err)
	}
	if n := second.udpQueries.Load(); n != 0 {
		t.Fatalf("the second server was asked %d times after an NXDOMAIN, want 0", n)
	}
	if n := first.udpQueries.Load(); n != 1 {
		t.Fatalf("the first server was asked %d times, want 1 (no AAAA query after NXDOMAIN)", n)
	}
}

func TestClientTruncatedAnswerRetriedOverTCP(t *testing.T) {
	zone := testZone()
	var big []dnsmessage.Resource
	for i := range 80 { // about 3.5 KB: more than the advertised 1232 bytes
		big = append(big, srvRR("_big._tcp.svc.test.", 30, 1, uint16(i), 8000+uint16(i), fmt.Sprintf("host-%02d.svc.test.", i)))
	}
	zone[zoneKey{"_big._tcp.svc.test.", dnsmessage.TypeSRV}] = big
	srv := startDNSServer(t, zone, func(s *dnsServer) { s.truncateUDP = true })
	got, err := (&Client{Servers: []string{srv.addr}}).LookupSRV(context.Background(), "_big._tcp.svc.test")
	if err != nil || len(got) != 80 {
		t.Fatalf("LookupSRV = %d records, %v; want 80", len(got), err)
	}
	if got[79].Target != "host-79.svc.test." || got[79].Port != 8079 || got[79].Weight != 79 {
		t.Fatalf("last record %+v", got[79])
	}
	if u, c := srv.udpQueries.Load(), srv.tcpQueries.Load(); u != 1 || c != 1 {
		t.Fatalf("%d UDP and %d TCP queries, want 1 and 1", u, c)
	}
}

func TestClientIgnoresStrayReplies(t *testing.T) {
	srv := startDNSServer(t, testZone(), func(s *dnsServer) { s.strayFirst = true })
	got, err := (&Client{Servers: []string{srv.addr}}).LookupIP(context.Background(), "ip4", "v4only.test")
	if want := []IPRecord{ipRec("10.0.0.9", time.Minute)}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LookupIP = %v, %v; want %v", got, err, want)
	}
}

// The silent server costs a lookup its Timeout; the failing and the good
// server must answer within it. A loaded machine can be slower than a short
// Timeout, so a lookup that ends in a timeout is tried again on fresh
// servers with a timeout four times as long, up to 3.2 s: a client that does
// not fail over still fails the test, after about 8 s.
func TestClientFailsOverToTheNextServer(t *testing.T) {
	for timeout := 50 * time.Millisecond; ; timeout *= 4 {
		err := failOver(t, timeout)
		if err == nil {
			return
		}
		if !timedOut(err) || timeout >= 3200*time.Millisecond {
			t.Fatal(err)
		}
		t.Logf("Timeout %v: %v; again with a longer one", timeout, err)
	}
}

// failOver runs TestClientFailsOverToTheNextServer's lookups with the given
// per-server timeout on fresh servers. It returns the error of a lookup
// that timed out where an answer was due, and fails t on any other wrong
// result.
func failOver(t *testing.T, timeout time.Duration) error {
	silent := startDNSServer(t, testZone(), func(s *dnsServer) { s.silent = true })
	failing := startDNSServer(t, testZone(), func(s *dnsServer) { s.rcode = dnsmessage.RCodeServerFailure })
	good := startDNSServer(t, testZone())
	c := &Client{Servers: []string{silent.addr, failing.addr, good.addr}, Timeout: timeout}
	got, err := c.LookupIP(context.Background(), "ip4", "v4only.test")
	if timedOut(err) {
		return fmt.Errorf("three servers: %w", err)
	}
	if want := []IPRecord{ipRec("10.0.0.9", time.Minute)}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LookupIP = %v, %v; want %v from the third server", got, err, want)
	}
	if silent.udpQueries.Load() != 1 || failing.udpQueries.Load() != 1 {
		t.Fatalf("queries: silent %d, failing %d; want 1 each", silent.udpQueries.Load(), failing.udpQueries.Load())
	}

	c.Servers = []string{silent.addr, failing.addr}
	_, err = c.LookupIP(context.Background(), "ip4", "v4only.test")
	if timedOut(err) {
		return fmt.Errorf("silent and failing servers: %w", err)
	}
	if err == nil || !strings.Contains(err.Error(), "ServerFailure") {
		t.Fatalf("all servers failing: err = %v, want the last server's failure", err)
	}
	return nil
}

// timedOut reports whether err is an exchange's timeout: its context's, or
// the connection deadline set from it, whichever fired first.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

func TestClientCancelDuringQuery(t *testing.T) {
	srv := startDNSServer(t, testZone(), func(s *dnsServer) { s.silent = true })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := (&Client{Servers: []string{srv.addr}, Timeout: time.Hour}).LookupIP(ctx, "ip", "svc.test")
		done <- err
	}()
	select {
	case <-srv.seen:
	case <-time.After(guard):
		t.Fatal("the query never arrived")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("LookupIP = %v, want context.Canceled", err)
		}
	case <-time.After(guard):
		t.Fatal("LookupIP did not return after cancel")
	}
}

func TestClientRejectsBadInput(t *testing.T) {
	c := &Client{Servers: []string{"127.0.0.1:1"}}
	if _, err := c.LookupIP(context.Background(), "tcp", "svc.test"); err == nil {
		t.Error("LookupIP with network tcp succeeded")
	}
	if _, err := c.LookupIP(context.Background(), "ip", "a..b"); err == nil {
		t.Error("LookupIP of a name with an empty label succeeded")
	}
}

func TestParseResolvConf(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"nameserver 10.0.0.53\n", []string{"10.0.0.53:53"}},
		{"# generated\nsearch example.com\nnameserver 127.0.0.53 # stub\noptions edns0\n", []string{"127.0.0.53:53"}},
		{"nameserver 1.1.1.1\nnameserver 2606:4700::1111\nnameserver 8.8.8.8\nnameserver 9.9.9.9\n",
			[]string{"1.1.1.1:53", "[2606:4700::1111]:53", "8.8.8.8:53"}}, // at most three
		{"nameserver fe80::1%eth0\n", []string{"[fe80::1%eth0]:53"}},
		{"nameserver not-an-ip\n;nameserver 10.0.0.1\nnameserver\n", nil},
		{"", nil},
	} {
		if got := parseResolvConf([]byte(tc.in)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseResolvConf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWithPort(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":      "10.0.0.1:53",
		"10.0.0.1:5353": "10.0.0.1:5353",
		"::1":           "[::1]:53",
		"[::1]":         "[::1]:53",
		"[::1]:5353":    "[::1]:5353",
	} {
		if got := withPort(in); got != want {
			t.Errorf("withPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDNSSourceOverLoopback runs the DNS source with the real client
// against the loopback server: SRV answer to endpoints, TTL to delay.
func TestDNSSourceOverLoopback(t *testing.T) {
	srv := startDNSServer(t, testZone())
	var r recorder
	st := newStepper()
	run(t, &DNS{Name: "_http._tcp.svc.test", SRV: true, Resolver: &Client{Servers: []string{srv.addr}},
		OnError: r.onError, sleep: st.sleep}, r.update)
	if got := st.next(t); got != 70*time.Second {
		t.Fatalf("waits %v, want 70s (the smallest TTL)", got)
	}
	lists, errs := r.take()
	want := []balancer.Endpoint{ep("a.svc.test:8080", 5), ep("b.svc.test:8081", 1)}
	if len(lists) != 1 || !reflect.DeepEqual(lists[0], want) || len(errs) != 0 {
		t.Fatalf("lists %v errors %v, want %v", lists, errs, want)
	}
}

func TestClientServers(t *testing.T) {
	dir := t.TempDir()
	saved := resolvConf
	t.Cleanup(func() { resolvConf = saved })

	resolvConf = filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolvConf, []byte("search corp\nnameserver 10.1.2.3\nnameserver ::1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := (&Client{}).servers(), []string{"10.1.2.3:53", "[::1]:53"}; !reflect.DeepEqual(got, want) {
		t.Errorf("from resolv.conf: %q, want %q", got, want)
	}
	if got, want := (&Client{Servers: []string{"10.9.9.9", "10.8.8.8:5353"}}).servers(), []string{"10.9.9.9:53", "10.8.8.8:5353"}; !reflect.DeepEqual(got, want) {
		t.Errorf("explicit: %q, want %q", got, want)
	}
	if err := os.WriteFile(resolvConf, []byte("options ndots:5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.53:53", "127.0.0.1:53", "[::1]:53"}
	if got := (&Client{}).servers(); !reflect.DeepEqual(got, want) {
		t.Errorf("resolv.conf without nameservers: %q, want %q", got, want)
	}
	resolvConf = filepath.Join(dir, "missing")
	if got := (&Client{}).servers(); !reflect.DeepEqual(got, want) {
		t.Errorf("no resolv.conf: %q, want %q", got, want)
	}
}
