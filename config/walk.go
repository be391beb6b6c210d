package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spillwayhq/spillway/yamlfile"
)

// MaxListItems bounds every list in a file.
const MaxListItems = 10000

// Pos is a position in a file: 1-based line and column (in characters);
// the zero Pos is unknown.
type Pos struct{ Line, Column int }

// positions maps the address of every decoded value (a *string, *[]T,
// *Listener, ...) to where it was written. Values filled by defaults have
// none.
type positions struct{ m map[any]Pos }

func (p *positions) at(ptr any) (Pos, bool) {
	if p == nil {
		return Pos{}, false
	}
	pos, ok := p.m[ptr]
	return pos, ok
}

// decoder walks a file's tree into the structs by reflection.
type decoder struct {
	*yamlfile.Reader
	pos    positions
	dir    string // the file's directory, for relative paths
	lookup func(string) (string, bool)
	// files records the string fields read from a file: reference, by
	// address, with the path read (certificates are reloaded from them).
	files   map[any]string
	lastRef string // the path the last str call read, "" for none
}

// mark records where the value at v (addressable) was written.
func (d *decoder) mark(v reflect.Value, n *yaml.Node) {
	d.pos.m[v.Addr().Interface()] = Pos{n.Line, n.Column}
}

// value decodes n into v as field f says; path names it in messages.
func (d *decoder) value(n *yaml.Node, v reflect.Value, f *field, path string, index int) {
	n = yamlfile.Resolve(n)
	d.mark(v, n)
	switch t := v.Type(); {
	case t == rulesDocType:
		d.rulesDoc(n, v, path)
	case t == durationType, t == bytesType, t.Kind() == reflect.Bool, t.Kind() == reflect.Int, t.Kind() == reflect.Float64:
		if n, ok := d.scalar(n, path, true); ok {
			d.number(n, v, f, path)
		}
	case t.Kind() == reflect.String:
		if s, ok := d.str(n, f, path); ok {
			v.SetString(s)
			if d.lastRef != "" {
				d.files[v.Addr().Interface()] = d.lastRef
			}
		}
	case t.Kind() == reflect.Slice:
		d.list(n, v, f, path)
	case t.Kind() == reflect.Map:
		d.stringMap(n, v, f, path)
	case t.Kind() == reflect.Struct:
		d.object(n, v, path, index)
	case t.Kind() == reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		d.object(n, v.Elem(), path, index)
	default:
		panic("config: no decoder for " + t.String()) // a struct tag error, found by the tests
	}
}

// object decodes a mapping into struct v, then applies the defaults of the
// fields not given and reports required ones missing.
func (d *decoder) object(n *yaml.Node, v reflect.Value, path string, index int) {
	d.mark(v, n)
	info := infoOf(v.Type())
	pre := path + ": "
	if path == "" {
		pre = ""
	}
	var given map[string]yamlfile.Field
	switch {
	case n.Kind == yaml.MappingNode:
		given = d.Fields(n, pre, info.names, true)
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
	case n.Kind == yaml.ScalarNode && info.shorthand >= 0:
		f := &info.fields[info.shorthand]
		given = map[string]yamlfile.Field{f.name: {Key: n, Val: n}}
	default:
		d.Problem(n, "%swant a mapping (%s), got %s", pre, strings.Join(info.names, ", "), yamlfile.Describe(n))
		return
	}
	for i := range info.fields {
		f := &info.fields[i]
		fv := v.Field(f.index)
		if g, ok := given[f.name]; ok {
			d.value(g.Val, fv, f, join(path, f.name), index)
			continue
		}
		if f.required {
			d.Problem(n, "%smissing %s (%s)", pre, f.name, strings.TrimSuffix(f.doc, "."))
			continue
		}
		d.setDefault(fv, f, index)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// setDefault gives an absent field its default; nested structs get theirs.
func (d *decoder) setDefault(v reflect.Value, f *field, index int) {
	if f.hasDef {
		if err := fromString(v, strings.ReplaceAll(f.def, "<index>", strconv.Itoa(index))); err != nil {
			panic("config: bad default of " + f.name + ": " + err.Error()) // found by the tests
		}
		return
	}
	if v.Kind() == reflect.Struct {
		info := infoOf(v.Type())
		for i := range info.fields {
			d.setDefault(v.Field(info.fields[i].index), &info.fields[i], index)
		}
	}
}

// fromString sets v from a default or a bound written in the file's syntax.
func fromString(v reflect.Value, s string) error {
	switch t := v.Type(); {
	case t == durationType:
		x, err := ParseDuration(s)
		v.SetInt(int64(x))
		return err
	case t == bytesType:
		x, err := ParseBytes(s)
		v.SetInt(int64(x))
		return err
	case t.Kind() == reflect.String:
		v.SetString(s)
	case t.Kind() == reflect.Bool:
		x, err := strconv.ParseBool(s)
		v.SetBool(x)
		return err
	case t.Kind() == reflect.Int:
		x, err := strconv.Atoi(s)
		v.SetInt(int64(x))
		return err
	case t.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		v.SetFloat(x)
		return err
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		v.Set(reflect.ValueOf(strings.Split(s, ",")).Convert(t))
	default:
		return fmt.Errorf("no default syntax for %s", t)
	}
	return nil
}

// scalar returns n with ${ENV} references expanded when it is a string
// holding some. With retag (fields that are not strings) the result is
// read again as YAML reads a plain scalar, quoted or not, so that
// max_connections: ${MAX} and {max_connections: "${MAX}"} are numbers.
func (d *decoder) scalar(n *yaml.Node, path string, retag bool) (*yaml.Node, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" || !strings.Contains(n.Value, "${") {
		return n, true
	}
	s, err := expand(n.Value, d.lookup)
	if err != nil {
		d.Problem(n, "%s: %v", path, err)
		return nil, false
	}
	c := *n
	c.Value = s
	if retag {
		c.Tag, c.Style = "", 0
		c.Tag = c.ShortTag()
	}
	return &c, true
}

// number decodes a Duration, Bytes, bool, int or float64 field.
func (d *decoder) number(n *yaml.Node, v reflect.Value, f *field, path string) {
	switch t := v.Type(); {
	case t == durationType:
		d.duration(n, v, f, path)
	case t == bytesType:
		d.bytes(n, v, f, path)
	case t.Kind() == reflect.Bool:
		if b, ok := d.Bool(n, path); ok {
			v.SetBool(b)
		}
	case t.Kind() == reflect.Int:
		d.integer(n, v, f, path)
	default:
		d.float(n, v, f, path)
	}
}

// str decodes a string field: ${ENV}, file: references, kind and enum.
func (d *decoder) str(n *yaml.Node, f *field, path string) (string, bool) {
	n, ok := d.scalar(n, path, false)
	if !ok {
		return "", false
	}
	var s string
	d.lastRef = ""
	switch {
	case n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float" || n.Tag == "!!bool") && (f.enum != nil || f.kind == "status" || f.kind == "retry-on" || f.kind == "class"):
		s = n.Value // min_version: 1.3, expected: [204], on: [503], class: 0, access_log: true (refused by name)
	default:
		if s, ok = d.String(n, path); !ok {
			return "", false
		}
	}
	if f.fileRefs() && strings.HasPrefix(s, "file:") {
		var err error
		ref := s
		if s, err = readRef(s, d.dir); err != nil {
			d.Problem(n, "%s: %v", path, err)
			return "", false
		}
		d.lastRef = refPath(ref, d.dir)
	}
	s, err := checkKind(f.kind, s, d.dir)
	if err != nil {
		d.Problem(n, "%s: %v", path, err)
		return "", false
	}
	if f.enum != nil && !slices.Contains(f.enum, s) {
		d.Problem(n, "%s: want one of %s, got %q", path, strings.Join(f.enum, ", "), s)
		return "", false
	}
	return s, true
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, f *field, path string) {
	var x Duration
	var err error
	switch {
	case n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float"):
		sec, ok := d.Number(n, path)
		if !ok {
			return
		}
		x, err = durationSeconds(sec)
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		x, err = ParseDuration(n.Value)
	default:
		d.Problem(n, "%s: want a duration such as 250ms, 10s or 1m30s (or a number of seconds), got %s", path, yamlfile.Describe(n))
		return
	}
	if err == nil {
		err = bounds(f, int64(x), func(s string) (int64, error) { b, err := ParseDuration(s); return int64(b), err }, func(i int64) string { return Duration(i).String() })
	}
	if err != nil {
		d.Problem(n, "%s: %v", path, err)
		return
	}
	v.SetInt(int64(x))
}

func (d *decoder) bytes(n *yaml.Node, v reflect.Value, f *field, path string) {
	var x Bytes
	var err error
	switch {
	case n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!str"):
		x, err = ParseBytes(n.Value)
	default:
		d.Problem(n, "%s: %v, got %s", path, errBytes, yamlfile.Describe(n))
		return
	}
	if err == nil {
		err = bounds(f, int64(x), func(s string) (int64, error) { b, err := ParseBytes(s); return int64(b), err }, func(i int64) string { return Bytes(i).String() })
	}
	if err != nil {
		d.Problem(n, "%s: %v", path, err)
		return
	}
	v.SetInt(int64(x))
}

func (d *decoder) integer(n *yaml.Node, v reflect.Value, f *field, path string) {
	x, ok := d.Integer(n, path)
	if !ok {
		return
	}
	if err := bounds(f, x, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, func(i int64) string { return strconv.FormatInt(i, 10) }); err != nil {
		d.Problem(n, "%s: %v", path, err)
		return
	}
	v.SetInt(x)
}

func (d *decoder) float(n *yaml.Node, v reflect.Value, f *field, path string) {
	x, ok := d.Number(n, path)
	if !ok {
		return
	}
	if f.min != "" {
		if lo, _ := strconv.ParseFloat(f.min, 64); x < lo {
			d.Problem(n, "%s: must be at least %s, got %s", path, f.min, n.Value)
			return
		}
	}
	if f.max != "" {
		if hi, _ := strconv.ParseFloat(f.max, 64); x > hi {
			d.Problem(n, "%s: must be at most %s, got %s", path, f.max, n.Value)
			return
		}
	}
	v.SetFloat(x)
}

// bounds checks x against the field's min and max tags.
func bounds(f *field, x int64, parse func(string) (int64, error), format func(int64) string) error {
	if f.min != "" {
		if lo, _ := parse(f.min); x < lo {
			return fmt.Errorf("must be at least %s, got %s", f.min, format(x))
		}
	}
	if f.max != "" {
		if hi, _ := parse(f.max); x > hi {
			return fmt.Errorf("must be at most %s, got %s", f.max, format(x))
		}
	}
	return nil
}

// list decodes a sequence (or one scalar, read as a list of one).
func (d *decoder) list(n *yaml.Node, v reflect.Value, f *field, path string) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		n = &yaml.Node{Kind: yaml.SequenceNode, Line: n.Line, Column: n.Column}
	}
	items := d.List(n, path, MaxListItems)
	if n.Kind != yaml.SequenceNode && n.Kind != yaml.ScalarNode {
		return // reported by List
	}
	if lo, _ := strconv.Atoi(f.min); len(items) < lo {
		d.Problem(n, "%s: want at least %d %s, got %d", path, lo, plural(lo, "entry", "entries"), len(items))
	}
	s := reflect.MakeSlice(v.Type(), len(items), len(items))
	for i, it := range items {
		d.value(it, s.Index(i), f, fmt.Sprintf("%s[%d]", path, i), i)
	}
	v.Set(s)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// stringMap decodes a mapping of names (checked against the field's kind)
// to string values (with ${ENV} and, when the field allows, file:).
func (d *decoder) stringMap(n *yaml.Node, v reflect.Value, f *field, path string) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // add: with nothing under it
	}
	if n.Kind != yaml.MappingNode {
		d.Problem(n, "%s: want a mapping of names to values, got %s", path, yamlfile.Describe(n))
		return
	}
	if len(n.Content)/2 > MaxListItems {
		d.Problem(n, "%s: at most %d entries, got %d", path, MaxListItems, len(n.Content)/2)
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	valueField := *f
	valueField.kind = ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], yamlfile.Resolve(n.Content[i+1])
		name, ok := d.String(k, path+" (a name)")
		if !ok {
			continue
		}
		if _, err := checkKind(f.kind, name, d.dir); err != nil {
			d.Problem(k, "%s: %v", path, err)
			continue
		}
		if m.MapIndex(reflect.ValueOf(name)).IsValid() {
			d.Problem(k, "%s: %s is set twice", path, name)
			continue
		}
		if s, ok := d.str(val, &valueField, path+"."+name); ok {
			m.SetMapIndex(reflect.ValueOf(name), reflect.ValueOf(s))
		}
	}
	v.Set(m)
}
