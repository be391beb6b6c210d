package loadgen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// seqVar is the variable every template knows: the arrival's sequence
// number in the run (0, 1, 2, …).
const seqVar = "seq"

// Part kinds of a tmpl; a part ≥ 0 is the index of a variable.
const (
	partLit = -1
	partSeq = -2
)

type part struct {
	lit string // partLit only
	v   int
}

// tmpl is a string split once into literal and variable parts, so that
// filling it in is appends only.
type tmpl struct {
	parts []part
}

// static reports whether t has no variables.
func (t tmpl) static() bool {
	for _, p := range t.parts {
		if p.v != partLit {
			return false
		}
	}
	return true
}

// varIndex numbers the variables in name order.
func varIndex(vars map[string]int) (names []string, index map[string]int) {
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	index = make(map[string]int, len(names))
	for i, name := range names {
		index[name] = i
	}
	return names, index
}

// validVarName reports whether s is a letter or _ followed by letters,
// digits or _.
func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// compile splits s at its {{name}} variables (spaces inside the braces are
// allowed). Braces around anything that is not a name stay as they are; a
// name that is neither seq nor in index is an error, unless index is nil
// (then every name is variable 0, which renders as 0 without values).
func compile(s string, index map[string]int) (tmpl, error) {
	var t tmpl
	lit := 0 // start of the pending literal
	for i := 0; ; {
		open := strings.Index(s[i:], "{{")
		if open < 0 {
			break
		}
		open += i
		end := strings.Index(s[open+2:], "}}")
		if end < 0 {
			break
		}
		end += open + 2
		name := strings.TrimSpace(s[open+2 : end])
		if !validVarName(name) {
			i = open + 2
			continue
		}
		v, ok := index[name]
		switch {
		case name == seqVar:
			v = partSeq
		case !ok && index != nil:
			return tmpl{}, fmt.Errorf("unknown variable {{%s}}%s", name, known(index))
		}
		if open > lit {
			t.parts = append(t.parts, part{lit: s[lit:open], v: partLit})
		}
		t.parts = append(t.parts, part{v: v})
		lit, i = end+2, end+2
	}
	if lit < len(s) {
		t.parts = append(t.parts, part{lit: s[lit:], v: partLit})
	}
	return t, nil
}

// known lists the variables a template may use, for an error message.
func known(index map[string]int) string {
	names := []string{seqVar}
	for name := range index {
		names = append(names, name)
	}
	slices.Sort(names)
	return " (known: " + strings.Join(names, ", ") + ")"
}

// render appends t filled with vals (by variable index; missing values are
// 0) and seq to dst.
func (t tmpl) render(dst []byte, vals []int64, seq uint64) []byte {
	for _, p := range t.parts {
		switch {
		case p.v == partLit:
			dst = append(dst, p.lit...)
		case p.v == partSeq:
			dst = strconv.AppendUint(dst, seq, 10)
		case p.v < len(vals):
			dst = strconv.AppendInt(dst, vals[p.v], 10)
		default:
			dst = append(dst, '0')
		}
	}
	return dst
}
