package httplimit

import (
	"net/netip"
	"strings"
)

// MaxForwardedHops is how many addresses of a forwarding header are
// examined, from the right; a chain of more trusted proxies than that ends
// at the last one examined.
const MaxForwardedHops = 32

// ClientIP returns the client address of a request whose connection came
// from remoteAddr (http.Request.RemoteAddr: "host:port" or a bare address)
// and whose forwarding header (X-Forwarded-For, or Forwarded when forwarded
// is true) has the field lines values, oldest first (http.Header.Values).
//
// When the peer is not in trusted, the header is ignored and the peer is the
// client: a client cannot change its key by sending the header itself. When
// the peer is trusted, the header's addresses are walked from the right
// (the most recently added) past trusted proxies, and the first untrusted
// address is the client. If every address is trusted, the leftmost is the
// client. A malformed element (not an address, "unknown", an obfuscated
// Forwarded identifier) ends the walk: the last trusted address examined is
// the client, so garbage is never believed. IPv4-mapped IPv6 addresses are
// unmapped and zones dropped. ok is false when remoteAddr holds no address
// (a Unix socket).
//
// ClientIP does not allocate.
func ClientIP(remoteAddr string, values []string, forwarded bool, trusted []netip.Prefix) (ip netip.Addr, ok bool) {
	a, _, ok := clientIP(remoteAddr, values, forwarded, trusted)
	return a, ok
}

// clientIP is ClientIP that also returns the address's text as found in
// remoteAddr or the header (without port, brackets or quotes), for keys
// built without allocating.
func clientIP(remoteAddr string, values []string, forwarded bool, trusted []netip.Prefix) (netip.Addr, string, bool) {
	peer, text, ok := parseHostPort(remoteAddr)
	if !ok {
		return netip.Addr{}, "", false
	}
	if !isTrusted(peer, trusted) {
		return peer, text, true
	}
	a, t := walkForwarded(peer, text, values, forwarded, trusted)
	return a, t, true
}

// walkForwarded walks the forwarding header's field lines values from the
// right, starting from the trusted peer (text: its text, or ""), past
// addresses in trusted, and returns the client and its text as found.
func walkForwarded(peer netip.Addr, text string, values []string, forwarded bool, trusted []netip.Prefix) (netip.Addr, string) {
	cur, curText := peer, text
	hops := 0
	for i := len(values) - 1; i >= 0; i-- {
		line := values[i]
		for line != "" {
			var elem string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				elem, line = line[j+1:], line[:j]
			} else {
				elem, line = line, ""
			}
			elem = strings.TrimSpace(elem)
			if elem == "" {
				continue // empty list elements are allowed (RFC 9110 §5.6.1)
			}
			if hops++; hops > MaxForwardedHops {
				return cur, curText
			}
			if forwarded {
				var ok bool
				if elem, ok = forwardedFor(elem); !ok {
					return cur, curText
				}
			}
			a, t, ok := parseHostPort(elem)
			if !ok {
				return cur, curText
			}
			if !isTrusted(a, trusted) {
				return a, t
			}
			cur, curText = a, t
		}
	}
	return cur, curText
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHostPort reads "1.2.3.4", "1.2.3.4:80", "::1", "[::1]" or
// "[::1]:80" and returns the address (unmapped, without zone) and its text.
func parseHostPort(s string) (netip.Addr, string, bool) {
	host := s
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, "", false
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" && !validPort(rest) {
			return netip.Addr{}, "", false
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		if !validPort(s[i:]) {
			return netip.Addr{}, "", false
		}
		host = s[:i]
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, "", false
	}
	if a.Zone() != "" {
		a = a.WithZone("")
		host = host[:strings.IndexByte(host, '%')]
	}
	if a.Is4In6() {
		a = a.Unmap()
		host = "" // the text is not the key's form; format a
	}
	return a, host, true
}

// validPort reports whether s is ":" followed by 1 to 5 digits.
func validPort(s string) bool {
	if len(s) < 2 || len(s) > 6 || s[0] != ':' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// forwardedFor returns the value of the for= parameter of one Forwarded
// element (RFC 7239 §4: pairs separated by ';'), unquoted.
func forwardedFor(elem string) (string, bool) {
	for elem != "" {
		var pair string
		if j := strings.IndexByte(elem, ';'); j >= 0 {
			pair, elem = elem[:j], elem[j+1:]
		} else {
			pair, elem = elem, ""
		}
		name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !strings.EqualFold(name, "for") {
			continue
		}
		if strings.HasPrefix(value, `"`) {
			if len(value) < 2 || !strings.HasSuffix(value, `"`) || strings.ContainsAny(value[1:len(value)-1], `"\`) {
				return "", false
			}
			value = value[1 : len(value)-1]
		}
		return value, value != ""
	}
	return "", false
}
