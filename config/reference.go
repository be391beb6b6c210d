package config

import (
	_ "embed"
	"fmt"
	"reflect"
	"strings"
)

// intro is the hand-written top of docs/CONFIG.md.
//
//go:embed intro.md
var intro string

// Reference returns docs/CONFIG.md: the hand-written introduction
// (config/intro.md), then one table per mapping of the format, with every
// field's type, default and meaning, generated from the struct tags.
func Reference() string {
	var b strings.Builder
	b.WriteString(intro)
	b.WriteString("\n## Reference\n\n")
	b.WriteString("Generated from the structs of package config by `go run ./config/gen`; do not edit below this line.\n")
	b.WriteString("Durations are Go durations (`250ms`, `10s`, `1m30s`) or numbers of seconds; sizes are whole numbers\n")
	b.WriteString("of bytes or whole numbers with `KiB`, `MiB` or `GiB`. A list of one plain value may be written as that value.\n")
	type section struct {
		path string
		t    reflect.Type
	}
	queue := []section{{"", reflect.TypeFor[Config]()}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		title := "`" + s.path + "`"
		if s.path == "" {
			title = "Top level"
		}
		fmt.Fprintf(&b, "\n### %s\n\n| Field | Type | Default | Description |\n|---|---|---|---|\n", title)
		info := infoOf(s.t)
		for i := range info.fields {
			f := &info.fields[i]
			path := join(s.path, f.name)
			st := structOf(f.typ)
			if st != nil {
				if f.typ.Kind() == reflect.Slice {
					path += "[]"
				}
				queue = append(queue, section{path, st})
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.name, cell(typeText(f, path)), cell(defaultCell(f)), cell(describe(f)))
		}
	}
	return b.String()
}

// structOf returns the struct type a field's value is a mapping of (through
// a pointer or a list), or nil.
func structOf(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == rulesDocType {
		return nil
	}
	return t
}

var kindText = map[string]string{
	"listen": "host:port", "listen-or-off": "host:port or off", "endpoint": "host:port", "name": "name",
	"token": "token", "alpn": "ALPN name", "method": "method", "host": "host", "path": "path", "regex": "regular expression",
	"cidr": "IP or CIDR", "dnsname": "DNS name", "status": "status or range", "filepath": "file path",
	"class": "class", "retry-on": "error kind or status", "rules": "list of rules (rules file format)",
	"identities": "mapping of names to {header: name}",
}

var plurals = map[string]string{"name": "names", "token": "tokens", "method": "methods", "host": "hosts",
	"IP or CIDR": "IPs or CIDRs", "status or range": "statuses or ranges", "error kind or status": "error kinds or statuses", "ALPN name": "ALPN names", "string": "strings"}

// typeText names a field's type for the reference.
func typeText(f *field, path string) string {
	switch t := f.typ; {
	case t.Kind() == reflect.Slice && structOf(t) == nil:
		one := scalarText(f, t.Elem())
		if many, ok := plurals[one]; ok {
			return "list of " + many
		}
		return "list of " + one
	case t.Kind() == reflect.Slice:
		if infoOf(structOf(t)).shorthand >= 0 {
			return "list of host:port or mappings (`" + path + "`)"
		}
		return "list of mappings (`" + path + "`)"
	case t.Kind() == reflect.Map:
		return "mapping of " + kindText[f.kind] + " to string"
	case structOf(t) != nil:
		return "mapping (`" + path + "`)"
	}
	return scalarText(f, f.typ)
}

func scalarText(f *field, t reflect.Type) string {
	switch {
	case t == rulesDocType:
		return kindText[f.kind]
	case t == durationType:
		return "duration"
	case t == bytesType:
		return "size"
	case f.enum != nil:
		return "`" + strings.Join(f.enum, "` | `") + "`"
	case t.Kind() == reflect.String && kindText[f.kind] != "":
		return kindText[f.kind]
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.Int:
		return "integer"
	}
	return "number"
}

func defaultCell(f *field) string {
	switch {
	case f.required:
		return "required"
	case f.hasDef:
		return "`" + strings.Trim(f.defaultText(), `"`) + "`"
	}
	return ""
}

// describe is the doc text with the bounds and reference rules appended.
func describe(f *field) string {
	d := f.doc
	switch {
	case f.min != "" && f.max != "" && f.typ.Kind() != reflect.Slice:
		d += fmt.Sprintf(" From %s to %s.", f.min, f.max)
	case f.min != "" && f.typ.Kind() != reflect.Slice:
		d += fmt.Sprintf(" At least %s.", f.min)
	case f.max != "":
		d += fmt.Sprintf(" At most %s.", f.max)
	}
	switch {
	case f.secret:
		d += " Secret: may be `file:`, hidden by Redacted."
	case f.file:
		d += " May be `file:`."
	}
	return d
}

// cell escapes a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
