package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spillwayhq/spillway/shed"
)

// MaxRefBytes bounds what one file: reference may read.
const MaxRefBytes = 1 << 20

// expand replaces ${NAME} in s with the environment's value of NAME, and
// $${ with a literal ${. An unset NAME, an unclosed ${ or a bad name is an
// error.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' { // $${ is a literal ${
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("${ without a closing } (write $${ for a literal ${)")
		}
		name := s[i+2 : i+end]
		if !envName.MatchString(name) {
			return "", fmt.Errorf("${%s}: not a variable name (letters, digits and _, not starting with a digit)", name)
		}
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// readRef reads a file: reference: the named regular file, at most
// MaxRefBytes, with one trailing newline removed. A relative path is taken
// from dir.
func readRef(ref, dir string) (string, error) {
	path := refPath(ref, dir)
	if path == "" {
		return "", errors.New("file: names no file (want file:/path)")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", path, unwrapPath(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRefBytes+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("cannot read %s: %v", path, unwrapPath(err))
	case len(data) > MaxRefBytes:
		return "", fmt.Errorf("%s is larger than %d bytes", path, MaxRefBytes)
	}
	s := strings.TrimSuffix(string(data), "\n")
	return strings.TrimSuffix(s, "\r"), nil
}

// refPath is the path a file: reference names ("" for none), relative
// ones taken from dir.
func refPath(ref, dir string) string {
	path := strings.TrimPrefix(ref, "file:")
	if path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	return path
}

// unwrapPath drops the *os.PathError's operation and path, which the
// caller's message already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkKind checks s against a field's kind and returns it normalised
// (method names upper-cased, hosts lower-cased, "off" as "").
func checkKind(kind, s, dir string) (string, error) {
	switch kind {
	case "filepath":
		if s == "" {
			return s, errors.New("want a file path, got \"\"")
		}
		if !filepath.IsAbs(s) {
			return filepath.Join(dir, s), nil
		}
	case "name":
		if !nameRE.MatchString(s) {
			return s, fmt.Errorf("want a name of 1 to 64 letters, digits, '.', '_' or '-', got %q", s)
		}
	case "listen-or-off":
		if s == "" || s == "off" {
			return "", nil
		}
		return s, checkAddr(s, true)
	case "listen", "endpoint":
		return s, checkAddr(s, kind == "listen")
	case "cidr":
		return s, checkPrefix(s)
	case "token":
		if !isToken(s) {
			return s, fmt.Errorf("want a header name or token (letters, digits and !#$%%&'*+-.^_`|~), got %q", s)
		}
	case "alpn":
		if s == "" || len(s) > 255 || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			return s, fmt.Errorf("want an ALPN protocol name such as h2 or http/1.1, got %q", s)
		}
	case "method":
		if !isToken(s) {
			return s, fmt.Errorf("want a method name such as GET, got %q", s)
		}
		return strings.ToUpper(s), nil
	case "host":
		return checkHost(s)
	case "path":
		if !strings.HasPrefix(s, "/") || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return s, fmt.Errorf("want a path starting with / and without spaces or control characters, got %q", s)
		}
	case "regex":
		if _, err := regexp.Compile(s); err != nil {
			return s, fmt.Errorf("%q does not compile: %v", s, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	case "dnsname":
		return s, checkDNSName(s)
	case "status":
		_, _, err := parseStatus(s)
		return s, err
	case "retry-on":
		if _, ok := retryKinds[s]; ok {
			return s, nil
		}
		if _, _, err := parseStatus(s); err != nil {
			return s, fmt.Errorf("want an error kind (connect-failure, reset, timeout), a status (503) or a range (\"500-599\"), got %q", s)
		}
	case "class":
		if _, ok := shed.ParseClass(s); !ok {
			return s, fmt.Errorf("want a class: critical, default, sheddable, or 0 to %d, got %q", shed.MaxClasses-1, s)
		}
	}
	return s, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// checkAddr checks a "host:port"; listen allows an empty host and port 0.
func checkAddr(s string, listen bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if !strings.Contains(s, ":") || strings.Count(s, ":") > 1 && !strings.Contains(s, "]") {
			return fmt.Errorf("want host:port, got %q (no port)", s)
		}
		return fmt.Errorf("want host:port, got %q", s)
	}
	n, err := strconv.Atoi(port)
	switch {
	case err != nil || strings.HasPrefix(port, "+") || strings.HasPrefix(port, "-"):
		return fmt.Errorf("%q: port %q is not a number", s, port)
	case n > 65535 || (!listen && n == 0):
		lo := 1
		if listen {
			lo = 0
		}
		return fmt.Errorf("%q: port %d is out of range (%d to 65535)", s, n, lo)
	case host == "" && !listen:
		return fmt.Errorf("%q: no host", s)
	case strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == '/' || r == 0x7f }):
		return fmt.Errorf("%q: %q is not a host name or IP address", s, host)
	}
	return nil
}

// checkPrefix checks a CIDR prefix ("10.0.0.0/8") or a single address.
func checkPrefix(s string) error {
	if !strings.Contains(s, "/") {
		if a, err := netip.ParseAddr(s); err != nil || a.Zone() != "" {
			return fmt.Errorf("%q is not an IP address or CIDR prefix", s)
		}
		return nil
	}
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not an IP address or CIDR prefix", s)
	case p.Masked() != p:
		return fmt.Errorf("%q has bits set past the prefix length (did you mean %s?)", s, p.Masked())
	}
	return nil
}

// prefixOf parses what checkPrefix accepted.
func prefixOf(s string) netip.Prefix {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p
	}
	a, _ := netip.ParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen())
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

var hostRE = regexp.MustCompile(`^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?$`)

// checkHost checks an exact host or a "*." wildcard and lower-cases it.
func checkHost(s string) (string, error) {
	h := strings.ToLower(s)
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return h, nil
	}
	if len(h) > 253 || !hostRE.MatchString(h) {
		return s, fmt.Errorf("want a host name (api.example.com) or a wildcard (*.example.com), without port, got %q", s)
	}
	return h, nil
}

// checkDNSName checks a name to resolve: at most 253 characters, labels of
// 1 to 63 (discovery.DNS's own rule).
func checkDNSName(s string) error {
	n := strings.TrimSuffix(s, ".")
	if n == "" || len(n) > 253 {
		return fmt.Errorf("want a DNS name of 1 to 253 characters, got %q", s)
	}
	for label := range strings.SplitSeq(n, ".") {
		if len(label) == 0 || len(label) > 63 {
			return fmt.Errorf("%q: labels must have 1 to 63 characters", s)
		}
	}
	return nil
}

// parseStatus reads "204" or "200-399" (within 100–599).
func parseStatus(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := lo, error(nil)
	if isRange {
		hi, err2 = strconv.Atoi(strings.TrimSpace(b))
	}
	if err1 != nil || err2 != nil || lo < 100 || hi > 599 || lo > hi {
		return 0, 0, fmt.Errorf("want a status (204) or a range (\"200-399\") within 100-599, got %q", s)
	}
	return lo, hi, nil
}
