package discovery

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// DefaultTimeout bounds one exchange with one nameserver when
// Client.Timeout is zero.
const DefaultTimeout = 2 * time.Second

// resolvConf is the file a Client reads its nameservers from when
// Client.Servers is empty (a variable for tests).
var resolvConf = "/etc/resolv.conf"

// FallbackServers are the nameservers a Client with no Servers uses when
// /etc/resolv.conf is missing or names none: the systemd-resolved stub listener,
// then a resolver on the loopback address (IPv4, then IPv6).
var FallbackServers = []string{"127.0.0.53:53", "127.0.0.1:53", "[::1]:53"}

// maxServers is how many nameservers of resolv.conf are used (its MAXNS).
const maxServers = 3

// ednsSize is the UDP payload size advertised with EDNS(0): the size DNS
// flag day 2020 recommends, small enough never to fragment.
const ednsSize = 1232

// Client is the default Resolver: a small stub resolver that asks a
// recursive nameserver over UDP, repeats the question over TCP when the
// answer comes back truncated, and returns records with their TTLs (which
// net.Resolver does not expose). The zero value is ready to use and a Client
// is safe for concurrent use.
//
// Names are fully qualified: no search list, no ndots, no /etc/hosts. Each
// lookup re-reads the nameservers (resolv.conf is small and a lookup happens
// once per TTL) and tries them in order, moving to the next one only when a
// server times out, cannot be reached, or answers with a failure (SERVFAIL,
// REFUSED…); NXDOMAIN is final. Answers must carry the query's random ID and
// question; stray datagrams are ignored. Answers are trusted otherwise, as
// from any stub resolver: use a nameserver you trust, on a path you trust.
type Client struct {
	// Servers are the nameservers, "ip:port" or "ip" (port 53), tried in
	// order. Empty: the nameserver lines of /etc/resolv.conf (the first 3,
	// re-read at every lookup), or FallbackServers when there are none.
	Servers []string
	// Timeout bounds one exchange with one server: the UDP query, and the
	// TCP query when the UDP answer was truncated, each get this long. Zero
	// means DefaultTimeout. A lookup takes at most about
	// 2 × Timeout × servers (twice for "ip", which asks for A then AAAA).
	Timeout time.Duration
}

// LookupIP returns the A records (network "ip4"), the AAAA records ("ip6")
// or both ("ip") of host. Each record's TTL is the smaller of its own and
// the smallest CNAME TTL in the answer. A name with no record of a type
// gives an empty answer for it; a name that does not exist gives an error
// wrapping ErrNoRecords.
func (c *Client) LookupIP(ctx context.Context, network, host string) ([]IPRecord, error) {
	var types []dnsmessage.Type
	switch network {
	case "ip":
		types = []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA}
	case "ip4":
		types = []dnsmessage.Type{dnsmessage.TypeA}
	case "ip6":
		types = []dnsmessage.Type{dnsmessage.TypeAAAA}
	default:
		return nil, fmt.Errorf("discovery: unknown network %q", network)
	}
	var out []IPRecord
	for _, t := range types {
		answers, err := c.query(ctx, host, t)
		if err != nil {
			return nil, err
		}
		cname := cnameTTL(answers)
		for _, a := range answers {
			ttl := min(ttlOf(a.Header), cname)
			switch b := a.Body.(type) {
			case *dnsmessage.AResource:
				if t == dnsmessage.TypeA {
					out = append(out, IPRecord{IP: netip.AddrFrom4(b.A), TTL: ttl})
				}
			case *dnsmessage.AAAAResource:
				if t == dnsmessage.TypeAAAA {
					out = append(out, IPRecord{IP: netip.AddrFrom16(b.AAAA), TTL: ttl})
				}
			}
		}
	}
	return out, nil
}

// LookupSRV returns the SRV records of name ("_service._proto.domain"),
// TTLs capped by any CNAME TTL in the answer as for LookupIP.
func (c *Client) LookupSRV(ctx context.Context, name string) ([]SRVRecord, error) {
	answers, err := c.query(ctx, name, dnsmessage.TypeSRV)
	if err != nil {
		return nil, err
	}
	cname := cnameTTL(answers)
	var out []SRVRecord
	for _, a := range answers {
		if b, ok := a.Body.(*dnsmessage.SRVResource); ok {
			out = append(out, SRVRecord{Target: b.Target.String(), Port: b.Port,
				Priority: b.Priority, Weight: b.Weight, TTL: min(ttlOf(a.Header), cname)})
		}
	}
	return out, nil
}

func ttlOf(h dnsmessage.ResourceHeader) time.Duration { return time.Duration(h.TTL) * time.Second }

// cnameTTL is the smallest TTL of the CNAME records among answers, or the
// largest duration when there is none.
func cnameTTL(answers []dnsmessage.Resource) time.Duration {
	ttl := time.Duration(1<<63 - 1)
	for _, a := range answers {
		if a.Header.Type == dnsmessage.TypeCNAME {
			ttl = min(ttl, ttlOf(a.Header))
		}
	}
	return ttl
}

func typeName(t dnsmessage.Type) string {
	return strings.TrimPrefix(t.String(), "Type")
}

// query asks the servers in turn for the records of one type and returns
// the answer section of the first usable reply.
func (c *Client) query(ctx context.Context, name string, t dnsmessage.Type) ([]dnsmessage.Resource, error) {
	fq, err := fqdn(name)
	if err != nil {
		return nil, fmt.Errorf("discovery: name %q: %w", name, err)
	}
	qname, err := dnsmessage.NewName(fq)
	if err != nil {
		return nil, fmt.Errorf("discovery: name %q: %w", name, err)
	}
	q := dnsmessage.Question{Name: qname, Type: t, Class: dnsmessage.ClassINET}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var last error
	for _, server := range c.servers() {
		answers, err := exchange(ctx, server, q, timeout)
		if err == nil {
			return answers, nil
		}
		err = fmt.Errorf("discovery: %s %s via %s: %w", typeName(t), fq, server, err)
		if ctx.Err() != nil || errors.Is(err, ErrNoRecords) {
			return nil, err
		}
		last = err
	}
	return nil, last
}

// servers returns the nameservers to try, "host:port" each.
func (c *Client) servers() []string {
	if len(c.Servers) > 0 {
		out := make([]string, len(c.Servers))
		for i, s := range c.Servers {
			out[i] = withPort(s)
		}
		return out
	}
	if data, err := os.ReadFile(resolvConf); err == nil {
		if s := parseResolvConf(data); len(s) > 0 {
			return s
		}
	}
	return FallbackServers
}

// withPort adds port 53 to a server given as a bare address.
func withPort(s string) string {
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s
	}
	return net.JoinHostPort(strings.Trim(s, "[]"), "53")
}

// parseResolvConf returns the first maxServers nameservers of a resolv.conf,
// as "ip:53". Lines that are not "nameserver <ip>" are ignored, as are
// comments (# or ;) and malformed addresses.
func parseResolvConf(data []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() && len(out) < maxServers {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if _, err := netip.ParseAddr(f[1]); err != nil {
			continue
		}
		out = append(out, net.JoinHostPort(f[1], "53"))
	}
	return out
}

// errMismatch: a datagram that is not the answer to our question.
var errMismatch = errors.New("reply does not match the query")

// longAgo is a deadline in the past, to wake blocked reads and writes.
var longAgo = time.Unix(1, 0)

// exchange puts one question to one server: over UDP, then over TCP if the
// answer is truncated. It returns the answer section of a NOERROR reply, an
// error wrapping ErrNoRecords for NXDOMAIN, or another error.
func exchange(ctx context.Context, server string, q dnsmessage.Question, timeout time.Duration) ([]dnsmessage.Resource, error) {
	id := uint16(rand.Uint32())
	query, err := buildQuery(id, q)
	if err != nil {
		return nil, err
	}
	p, h, err := udpExchange(ctx, server, query, id, q, timeout)
	if err != nil {
		return nil, err
	}
	if h.Truncated {
		if p, h, err = tcpExchange(ctx, server, query, id, q, timeout); err != nil {
			return nil, fmt.Errorf("truncated over UDP, then over TCP: %w", err)
		}
	}
	switch h.RCode {
	case dnsmessage.RCodeSuccess:
	case dnsmessage.RCodeNameError:
		return nil, fmt.Errorf("%w (NXDOMAIN)", ErrNoRecords)
	default:
		return nil, fmt.Errorf("server answered %s", strings.TrimPrefix(h.RCode.String(), "RCode"))
	}
	answers, err := p.AllAnswers()
	if err != nil {
		return nil, fmt.Errorf("malformed answer: %w", err)
	}
	return answers, nil
}

func buildQuery(id uint16, q dnsmessage.Question) ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 2, 514), dnsmessage.Header{ID: id, RecursionDesired: true})
	b.EnableCompression()
	var opt dnsmessage.ResourceHeader
	err := errors.Join(b.StartQuestions(), b.Question(q), b.StartAdditionals(),
		opt.SetEDNS0(ednsSize, dnsmessage.RCodeSuccess, false), b.OPTResource(opt, dnsmessage.OPTResource{}))
	if err != nil {
		return nil, fmt.Errorf("building the query: %w", err)
	}
	msg, err := b.Finish()
	if err != nil {
		return nil, fmt.Errorf("building the query: %w", err)
	}
	// The first two bytes are room for the TCP length prefix.
	binary.BigEndian.PutUint16(msg, uint16(len(msg)-2))
	return msg, nil
}

// checkReply parses msg's header and question and checks they answer
// (id, q); it returns the parser positioned at the answers.
func checkReply(msg []byte, id uint16, q dnsmessage.Question) (*dnsmessage.Parser, dnsmessage.Header, error) {
	p := new(dnsmessage.Parser)
	h, err := p.Start(msg)
	if err != nil || h.ID != id || !h.Response {
		return nil, h, errMismatch
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 || qs[0].Type != q.Type || qs[0].Class != q.Class ||
		!strings.EqualFold(qs[0].Name.String(), q.Name.String()) {
		return nil, h, errMismatch
	}
	return p, h, nil
}

// withDeadline arms conn to fail as soon as ctx ends; call the returned stop
// before closing conn.
func withDeadline(ctx context.Context, conn net.Conn) (stop func() bool) {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	return context.AfterFunc(ctx, func() { conn.SetDeadline(longAgo) })
}

// ioErr turns an I/O error caused by ctx ending into ctx's error.
func ioErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func udpExchange(ctx context.Context, server string, query []byte, id uint16, q dnsmessage.Question, timeout time.Duration) (*dnsmessage.Parser, dnsmessage.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return nil, dnsmessage.Header{}, ioErr(ctx, err)
	}
	defer conn.Close()
	defer withDeadline(ctx, conn)()
	if _, err := conn.Write(query[2:]); err != nil {
		return nil, dnsmessage.Header{}, ioErr(ctx, err)
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, dnsmessage.Header{}, ioErr(ctx, err)
		}
		p, h, err := checkReply(buf[:n], id, q)
		if err == nil {
			return p, h, nil
		}
		// A stray or spoofed datagram: keep waiting for ours.
	}
}

func tcpExchange(ctx context.Context, server string, query []byte, id uint16, q dnsmessage.Question, timeout time.Duration) (*dnsmessage.Parser, dnsmessage.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return nil, dnsmessage.Header{}, ioErr(ctx, err)
	}
	defer conn.Close()
	defer withDeadline(ctx, conn)()
	if _, err := conn.Write(query); err != nil {
		return nil, dnsmessage.Header{}, ioErr(ctx, err)
	}
	var size [2]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, dnsmessage.Header{}, ioErr(ctx, err)
	}
	msg := make([]byte, binary.BigEndian.Uint16(size[:]))
	if _, err := io.ReadFull(conn, msg); err != nil {
		return nil, dnsmessage.Header{}, ioErr(ctx, err)
	}
	p, h, err := checkReply(msg, id, q)
	if err != nil {
		return nil, h, err
	}
	return p, h, nil
}
