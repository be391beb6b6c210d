package config

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/CONFIG.md and docs/config.schema.json")

// The committed reference and schema are what the structs generate.
func TestDocsUpToDate(t *testing.T) {
	for path, want := range map[string][]byte{
		"../docs/CONFIG.md":          []byte(Reference()),
		"../docs/config.schema.json": Schema(),
	} {
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the config structs generate: regenerate it with `go run ./config/gen` "+
				"(or `go test ./config -update`) and commit it", path)
		}
	}
}

// visit calls fn for every decoded field of the format, with its path.
func visit(t reflect.Type, path string, fn func(path string, f *field)) {
	info := infoOf(t)
	for i := range info.fields {
		f := &info.fields[i]
		p := join(path, f.name)
		fn(p, f)
		if st := structOf(f.typ); st != nil {
			visit(st, p, fn)
		}
	}
}

// Every field has a doc, and its default, bounds, kind and enum make sense,
// so the reference cannot drift from the decoder.
func TestEveryFieldDocumented(t *testing.T) {
	n := 0
	visit(reflect.TypeFor[Config](), "", func(path string, f *field) {
		n++
		if len(f.doc) < 10 || !strings.HasSuffix(f.doc, ".") {
			t.Errorf("%s: doc %q: want a sentence", path, f.doc)
		}
		if f.hasDef {
			v := reflect.New(f.typ).Elem()
			if err := fromString(v, f.def); err != nil {
				t.Errorf("%s: default %q: %v", path, f.def, err)
			}
			if f.required {
				t.Errorf("%s: required with a default", path)
			}
		}
		if f.kind != "" && kindText[f.kind] == "" {
			t.Errorf("%s: kind %q is not in kindText", path, f.kind)
		}
		for _, b := range []string{f.min, f.max} {
			if b == "" {
				continue
			}
			typ := f.typ
			if typ.Kind() == reflect.Slice {
				typ = reflect.TypeFor[int]()
			}
			if err := fromString(reflect.New(typ).Elem(), b); err != nil {
				t.Errorf("%s: bound %q: %v", path, b, err)
			}
		}
		if f.enum != nil && f.hasDef && !strings.Contains(","+strings.Join(f.enum, ",")+",", ","+f.def+",") {
			t.Errorf("%s: default %q is not in the enum %v", path, f.def, f.enum)
		}
	})
	if n < 100 {
		t.Errorf("visited %d fields, want the whole tree (over 100)", n)
	}
	ref := Reference()
	var schema map[string]any
	if err := json.Unmarshal(Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	visit(reflect.TypeFor[Config](), "", func(path string, f *field) {
		if !strings.Contains(ref, "| `"+f.name+"` |") {
			t.Errorf("%s: not in the reference", path)
		}
		if !strings.Contains(string(Schema()), `"description": `+jsonString(f.doc)) {
			t.Errorf("%s: not in the schema", path)
		}
	})
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
