package config

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// field is one decoded struct field and what its tags say.
type field struct {
	name      string // yaml key
	index     int    // in the struct
	typ       reflect.Type
	doc       string
	def       string // default, in the file's syntax ("" none)
	hasDef    bool
	enum      []string
	kind      string // value syntax checked on strings (see checkKind)
	min, max  string // bounds, in the file's syntax
	required  bool
	secret    bool // may be file:, redacted by Redacted
	file      bool // may be file: (not redacted)
	shorthand bool // a scalar given for the struct sets this field
}

// structInfo is the decoded fields of a struct type, in declaration order.
type structInfo struct {
	fields    []field
	names     []string
	shorthand int // index in fields of the shorthand field, -1 if none
}

var infoCache sync.Map // reflect.Type → *structInfo

var (
	durationType = reflect.TypeFor[Duration]()
	bytesType    = reflect.TypeFor[Bytes]()
)

// infoOf returns t's decoded fields: the exported fields with a yaml tag
// other than "-".
func infoOf(t reflect.Type) *structInfo {
	if v, ok := infoCache.Load(t); ok {
		return v.(*structInfo)
	}
	info := &structInfo{shorthand: -1}
	for i := range t.NumField() {
		sf := t.Field(i)
		name := sf.Tag.Get("yaml")
		if !sf.IsExported() || name == "" || name == "-" {
			continue
		}
		def, hasDef := sf.Tag.Lookup("default")
		f := field{name: name, index: i, typ: sf.Type, doc: sf.Tag.Get("doc"), def: def, hasDef: hasDef,
			kind: sf.Tag.Get("kind"), min: sf.Tag.Get("min"), max: sf.Tag.Get("max"),
			required: sf.Tag.Get("required") == "true", secret: sf.Tag.Get("secret") == "true",
			file: sf.Tag.Get("file") == "true", shorthand: sf.Tag.Get("shorthand") == "true"}
		if e := sf.Tag.Get("enum"); e != "" {
			f.enum = strings.Split(e, ",")
		}
		if f.shorthand {
			info.shorthand = len(info.fields)
		}
		info.fields = append(info.fields, f)
		info.names = append(info.names, name)
	}
	v, _ := infoCache.LoadOrStore(t, info)
	return v.(*structInfo)
}

// fileRefs reports whether the field's strings may be file: references.
func (f *field) fileRefs() bool { return f.secret || f.file }

// defaultText is the field's default as the reference shows it.
func (f *field) defaultText() string {
	if !f.hasDef {
		return ""
	}
	if f.typ.Kind() == reflect.Slice {
		return "[" + strings.Join(strings.Split(f.def, ","), ", ") + "]"
	}
	if f.typ.Kind() == reflect.String {
		return strconv.Quote(f.def)
	}
	return f.def
}
