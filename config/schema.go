package config

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"github.com/spillwayhq/spillway/shed"
)

// The JSON Schema generator: a small walk over the same struct tags as the
// decoder (written here rather than taken from a library, which would read
// other tags and know nothing of Duration, Bytes, shorthands or ${ENV}).

type object = map[string]any

// Schema returns docs/config.schema.json: a JSON Schema (draft 2020-12) of
// the file, with types, enums, bounds, defaults, descriptions, required
// fields and no unknown fields (keys starting x- aside). Values the file
// may give as ${ENV} references accept those too.
func Schema() []byte {
	s := structSchema(reflect.TypeFor[Config]())
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["title"] = "Spillway gateway configuration"
	s["description"] = "The file spillway serve and spillway validate read; see docs/CONFIG.md."
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		panic(err) // maps of strings, numbers and booleans always encode
	}
	return b.Bytes()
}

var envRef = object{"type": "string", "pattern": `\$\{[A-Za-z_][A-Za-z0-9_]*\}`}

const durationPattern = `^\s*(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)\s*$`

func structSchema(t reflect.Type) object {
	info := infoOf(t)
	props := object{}
	var required []string
	for i := range info.fields {
		f := &info.fields[i]
		p := fieldSchema(f)
		p["description"] = f.doc
		if f.hasDef && !strings.Contains(f.def, "<index>") {
			p["default"] = defaultJSON(f)
		}
		props[f.name] = p
		if f.required {
			required = append(required, f.name)
		}
	}
	s := object{"type": []string{"object", "null"}, "properties": props,
		"additionalProperties": false, "patternProperties": object{"^x-": object{}}}
	if required != nil {
		s["type"] = "object"
		s["required"] = required
	}
	if info.shorthand >= 0 {
		return object{"anyOf": []any{object{"type": "string"}, s}}
	}
	return s
}

func fieldSchema(f *field) object {
	t := f.typ
	switch {
	case t == rulesDocType:
		return rulesSchema(f.kind)
	case t.Kind() == reflect.Pointer:
		return structSchema(t.Elem())
	case t.Kind() == reflect.Struct && t != durationType && t != bytesType:
		return structSchema(t)
	case t.Kind() == reflect.Map:
		return object{"type": "object", "additionalProperties": object{"type": "string"}}
	case t.Kind() == reflect.Slice:
		item := itemSchema(f, t.Elem())
		arr := object{"type": "array", "items": item, "maxItems": MaxListItems}
		if n, err := strconv.Atoi(f.min); err == nil {
			arr["minItems"] = n
		}
		if t.Elem().Kind() == reflect.Struct && infoOf(t.Elem()).shorthand < 0 {
			return arr // a mapping alone is not a list of one
		}
		return object{"anyOf": []any{item, arr}}
	}
	return itemSchema(f, t)
}

// itemSchema is the schema of one value of type t for field f.
func itemSchema(f *field, t reflect.Type) object {
	var s object
	switch {
	case t.Kind() == reflect.Struct:
		return structSchema(t)
	case t == durationType:
		s = object{"anyOf": []any{object{"type": "string", "pattern": durationPattern}, object{"type": "number", "minimum": 0}}}
	case t == bytesType:
		s = object{"anyOf": []any{object{"type": "string", "pattern": `^\s*[0-9]+\s*(KiB|MiB|GiB)?\s*$`}, object{"type": "integer", "minimum": 0}}}
	case f.enum != nil:
		var vals []any
		for _, e := range f.enum {
			vals = append(vals, e)
			if x, err := strconv.ParseFloat(e, 64); err == nil {
				vals = append(vals, x) // min_version: 1.3
			}
		}
		s = object{"enum": vals}
	case f.kind == "status", f.kind == "retry-on":
		s = object{"anyOf": []any{object{"type": "string", "pattern": `^[1-5][0-9][0-9](-[1-5][0-9][0-9])?$`},
			object{"type": "integer", "minimum": 100, "maximum": 599}}}
		if f.kind == "retry-on" {
			s["anyOf"] = append(s["anyOf"].([]any), object{"enum": []any{"connect-failure", "reset", "timeout"}})
		}
	case f.kind == "class":
		s = object{"anyOf": []any{object{"type": "string"}, object{"type": "integer", "minimum": 0, "maximum": shed.MaxClasses - 1}}}
	case t.Kind() == reflect.String:
		return object{"type": "string"} // ${ENV} is a string too
	case t.Kind() == reflect.Bool:
		s = object{"type": "boolean"}
	default:
		s = object{"type": "number"}
		if t.Kind() == reflect.Int {
			s["type"] = "integer"
		}
		if x, err := strconv.ParseFloat(f.min, 64); err == nil {
			s["minimum"] = x
		}
		if x, err := strconv.ParseFloat(f.max, 64); err == nil {
			s["maximum"] = x
		}
	}
	return object{"anyOf": []any{s, envRef}}
}

// defaultJSON is a field's default as a JSON value.
func defaultJSON(f *field) any {
	switch t := f.typ; {
	case t == durationType, t == bytesType:
		return f.def
	case t.Kind() == reflect.Slice:
		return strings.Split(f.def, ",")
	case t.Kind() == reflect.Bool:
		return f.def == "true"
	case t.Kind() == reflect.Int, t.Kind() == reflect.Float64:
		x, _ := strconv.ParseFloat(f.def, 64)
		return x
	}
	return f.def
}
