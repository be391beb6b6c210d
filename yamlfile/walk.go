package yamlfile

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Field is one field of a mapping: its key node and (alias-resolved) value.
type Field struct{ Key, Val *yaml.Node }

// maxMergeDepth bounds merge keys that merge mappings that merge mappings.
const maxMergeDepth = 8

// Fields returns the fields of mapping n by name, reporting (prefixed by
// pre, e.g. `rule "a": `) keys that are not strings, names not in known,
// and names given twice. YAML merge keys (<<: *defaults, <<: [*a, *b]) are
// followed: fields written in n win over merged ones, and earlier merges
// over later ones. With extensions, names starting "x-" are skipped: a
// place for anchors that the schema does not know (x-strict: &strict …).
func (r *Reader) Fields(n *yaml.Node, pre string, known []string, extensions bool) map[string]Field {
	out := make(map[string]Field)
	r.collect(n, pre, known, extensions, out, false, 0)
	return out
}

func (r *Reader) collect(n *yaml.Node, pre string, known []string, ext bool, out map[string]Field, merged bool, depth int) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content) && !r.Full(); i += 2 {
		k, v := n.Content[i], Resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			r.Problem(k, "%sfield names must be strings, got %s", pre, Describe(k))
			continue
		}
		if ext && strings.HasPrefix(k.Value, "x-") {
			continue
		}
		if !slices.Contains(known, k.Value) {
			r.Problem(k, "%sunknown field %q (want %s)", pre, k.Value, strings.Join(known, ", "))
			continue
		}
		if prev, dup := out[k.Value]; dup {
			if !merged {
				r.Problem(k, "%s%s is set twice (first at line %d)", pre, k.Value, prev.Key.Line)
			}
			continue
		}
		out[k.Value] = Field{k, v}
	}
	for _, m := range merges {
		if depth >= maxMergeDepth {
			r.Problem(m, "%smerge keys nested too deep", pre)
			return
		}
		switch m.Kind {
		case yaml.MappingNode:
			r.collect(m, pre, known, ext, out, true, depth+1)
		case yaml.SequenceNode:
			for _, x := range m.Content {
				if x = Resolve(x); x.Kind == yaml.MappingNode {
					r.collect(x, pre, known, ext, out, true, depth+1)
				} else {
					r.Problem(x, "%s<<: want a mapping, got %s", pre, Describe(x))
				}
			}
		default:
			r.Problem(m, "%s<<: want a mapping, got %s", pre, Describe(m))
		}
	}
}

// List returns the (alias-resolved) items of a sequence, or n itself when
// it is a single scalar (key: user reads as key: [user]), reporting more
// than maxItems items and anything else.
func (r *Reader) List(n *yaml.Node, what string, maxItems int) []*yaml.Node {
	switch n.Kind {
	case yaml.ScalarNode:
		return []*yaml.Node{n}
	case yaml.SequenceNode:
		if len(n.Content) > maxItems {
			r.Problem(n, "%s: at most %d entries, got %d", what, maxItems, len(n.Content))
			return nil
		}
		out := make([]*yaml.Node, len(n.Content))
		for i, x := range n.Content {
			out[i] = Resolve(x)
		}
		return out
	}
	r.Problem(n, "%s: want a list, got %s", what, Describe(n))
	return nil
}

// String returns the value of a string scalar, or reports what n is.
func (r *Reader) String(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		r.Problem(n, "%s: want a string, got %s", what, Describe(n))
		return "", false
	}
	return n.Value, true
}

// Number returns the value of a finite int or float scalar, or reports
// what n is.
func (r *Reader) Number(n *yaml.Node, what string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		r.Problem(n, "%s: want a number, got %s", what, Describe(n))
		return 0, false
	}
	var f float64
	if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		r.Problem(n, "%s: want a finite number, got %q", what, n.Value)
		return 0, false
	}
	return f, true
}

// Integer returns the value of a whole-number scalar of at most 2⁵³ in
// magnitude (1e3 and 5.0 count), or reports what n is.
func (r *Reader) Integer(n *yaml.Node, what string) (int64, bool) {
	f, ok := r.Number(n, what)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		r.Problem(n, "%s: want a whole number, got %s", what, n.Value)
		return 0, false
	}
	return int64(f), true
}

// Bool returns the value of a true/false scalar, or reports what n is
// (yes, no, on and off are strings, as in YAML 1.2).
func (r *Reader) Bool(n *yaml.Node, what string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		r.Problem(n, "%s: want true or false, got %s", what, Describe(n))
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		r.Problem(n, "%s: want true or false, got %q", what, n.Value)
		return false, false
	}
	return b, true
}

// maxAliasHops bounds alias chains (and cycles) in Resolve.
const maxAliasHops = 16

// Resolve follows aliases to the node they name (at most 16 hops, in case
// of a cycle); a node that is not an alias is returned as it is.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; i < maxAliasHops && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}

// Describe names what a node is for a message: "a mapping", "a list",
// "null", "the number 5", "true", a quoted string (cut at 64 bytes).
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		case "!!str":
			if len(n.Value) > 64 {
				return strconv.Quote(n.Value[:64]) + "..."
			}
			return strconv.Quote(n.Value)
		}
		return "a " + strings.TrimPrefix(n.Tag, "!!") + " value"
	case yaml.AliasNode:
		return "an unresolvable alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return "nothing"
}
