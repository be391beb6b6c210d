package config

import "reflect"

// RedactedValue replaces every secret in a Redacted copy.
const RedactedValue = "[redacted]"

// Redacted returns a deep copy of c in which every non-empty value of a
// field tagged secret (TLS keys, the values of headers added) reads
// RedactedValue, for showing a running configuration (an admin /config
// endpoint, a log line). The copy keeps the derived values (compiled
// expressions, the clusters' client TLS) but not the listeners' server TLS,
// which holds the private keys (ServerTLS returns nil), and has no
// positions (Pos).
func (c *Config) Redacted() *Config {
	out := &Config{}
	copyValue(reflect.ValueOf(out).Elem(), reflect.ValueOf(c).Elem(), false)
	out.pos = nil
	for i := range out.Listeners {
		out.Listeners[i].tls = nil // it holds the private keys
	}
	return out
}

// copyValue deep-copies src into dst (both of one type), replacing the
// strings of secret fields.
func copyValue(dst, src reflect.Value, secret bool) {
	switch src.Kind() {
	case reflect.Struct:
		dst.Set(src) // unexported fields too; exported ones are replaced below
		info := infoOf(src.Type())
		for _, f := range info.fields {
			copyValue(dst.Field(f.index), src.Field(f.index), f.secret)
		}
	case reflect.Pointer:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		dst.Set(reflect.New(src.Type().Elem()))
		copyValue(dst.Elem(), src.Elem(), secret)
	case reflect.Slice:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		dst.Set(reflect.MakeSlice(src.Type(), src.Len(), src.Len()))
		for i := range src.Len() {
			copyValue(dst.Index(i), src.Index(i), secret)
		}
	case reflect.Map:
		if src.IsNil() {
			dst.SetZero()
			return
		}
		dst.Set(reflect.MakeMapWithSize(src.Type(), src.Len()))
		it := src.MapRange()
		for it.Next() {
			v := reflect.New(src.Type().Elem()).Elem()
			copyValue(v, it.Value(), secret)
			dst.SetMapIndex(it.Key(), v)
		}
	case reflect.String:
		if secret && src.Len() > 0 {
			dst.SetString(RedactedValue)
			return
		}
		dst.Set(src)
	default:
		dst.Set(src)
	}
}
