package httpwire

// Byte classes, one table each (RFC 9110 section 5.6.2 for tchar, 5.5 for
// field values, RFC 3986 section 3.2.2 for hosts).
var (
	tchar      [256]bool // token characters
	valueChar  [256]bool // HTAB, SP, VCHAR and obs-text: field values, reasons
	targetChar [256]bool // request-target: VCHAR and obs-text (no CTL, no SP)
	hostChar   [256]bool // reg-name and IPv4: unreserved, sub-delims, '%'
	lowerByte  [256]byte // ASCII lowercase
)

func init() {
	for c := 0; c < 256; c++ {
		b := byte(c)
		lowerByte[c] = b
		if 'A' <= b && b <= 'Z' {
			lowerByte[c] = b + 'a' - 'A'
		}
		alnum := 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
		tchar[c] = alnum || contains("!#$%&'*+-.^_`|~", b)
		valueChar[c] = b == '\t' || b >= ' ' && b != 0x7f
		targetChar[c] = b > ' ' && b != 0x7f
		hostChar[c] = alnum || contains("-._~!$&'()*+,;=%", b)
	}
}

func contains(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}

// EqualFold reports whether b equals lower, ignoring ASCII case in b. lower
// must be lowercase ASCII (a field name as written in the RFCs, lowercased).
// It does not allocate.
func EqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if lowerByte[b[i]] != lower[i] {
			return false
		}
	}
	return true
}

// equalFoldBytes is EqualFold with both sides in any case.
func equalFoldBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerByte[a[i]] != lowerByte[b[i]] {
			return false
		}
	}
	return true
}

// ValidFieldName reports whether s is a valid field name: a non-empty
// token (RFC 9110 section 5.1).
func ValidFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tchar[s[i]] {
			return false
		}
	}
	return true
}

// ValidFieldValue reports whether s can be written as a field value and
// parsed back unchanged: only HTAB, SP, visible ASCII and obs-text (bytes
// 0x80-0xFF), and no SP or HTAB at either end (the parser trims those). The
// empty value is valid.
func ValidFieldValue(s string) bool {
	if s != "" && (isOWS(s[0]) || isOWS(s[len(s)-1])) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !valueChar[s[i]] {
			return false
		}
	}
	return true
}

func isOWS(b byte) bool { return b == ' ' || b == '\t' }

// trimOWS removes SP and HTAB from both ends of b.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && isOWS(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isOWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// validHost reports whether b is a valid Host field value or authority
// without userinfo (RFC 9110 section 7.2): a reg-name or IPv4 address, or an
// IP-literal in brackets, then an optional ':' and port digits. The empty
// value is valid (RFC 9110 section 7.2 asks for it when the target has no
// authority).
func validHost(b []byte) bool {
	i := 0
	if len(b) > 0 && b[0] == '[' {
		for i = 1; i < len(b) && b[i] != ']'; i++ {
			if !hostChar[b[i]] && b[i] != ':' {
				return false
			}
		}
		if i == len(b) || i == 1 {
			return false
		}
		i++
	} else {
		for i < len(b) && hostChar[b[i]] {
			i++
		}
	}
	if i == len(b) {
		return true
	}
	if b[i] != ':' {
		return false
	}
	for i++; i < len(b); i++ {
		if b[i] < '0' || b[i] > '9' {
			return false
		}
	}
	return true
}
