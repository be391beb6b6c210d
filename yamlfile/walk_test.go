package yamlfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// top parses in and returns its top node and the Reader.
func top(t *testing.T, in string) (*yaml.Node, *Reader) {
	t.Helper()
	r := &Reader{File: "f.yaml"}
	doc := r.Parse([]byte(in))
	if doc == nil {
		t.Fatalf("%q: %v", in, r.Err())
	}
	return Resolve(doc.Content[0]), r
}

// problems returns the Reader's problems as strings.
func problems(r *Reader) []string {
	var fe *FileError
	if !errors.As(r.Err(), &fe) {
		return nil
	}
	var out []string
	for _, e := range fe.Errors {
		out = append(out, e.Error())
	}
	return out
}

func TestFields(t *testing.T) {
	in := `x-base: &base {rate: 1, per: 2}
x-more: &more {per: 3, burst: 4}
rule:
  <<: [*base, *more]
  id: a
  rate: 5
  id: b
  brust: 6
  7: seven
`
	n, r := top(t, in)
	f := r.Fields(n, "", []string{"rule"}, true)
	rule := r.Fields(f["rule"].Val, "rule: ", []string{"id", "rate", "per", "burst"}, false)
	got := map[string]string{}
	for k, v := range rule {
		got[k] = v.Val.Value
	}
	// Written fields win over merged ones, earlier merges over later ones.
	want := map[string]string{"id": "a", "rate": "5", "per": "2", "burst": "4"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	wantProblems := []string{
		"f.yaml:7:3: rule: id is set twice (first at line 5)",
		`f.yaml:8:3: rule: unknown field "brust" (want id, rate, per, burst)`,
		"f.yaml:9:3: rule: field names must be strings, got the number 7",
	}
	if got := problems(r); !reflect.DeepEqual(got, wantProblems) {
		t.Errorf("problems:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantProblems, "\n"))
	}

	// Without extensions an x- field is unknown like any other.
	n, r = top(t, "x-a: 1\n")
	r.Fields(n, "", []string{"rules"}, false)
	if got := problems(r); len(got) != 1 || got[0] != `f.yaml:1:1: unknown field "x-a" (want rules)` {
		t.Errorf("x- field without extensions: %v", got)
	}
}

func TestScalars(t *testing.T) {
	n, r := top(t, `{s: text, i: 1e3, f: 2.5, b: true, yes: yes, nul: ~, l: [1, 2, 3], big: 1e20, inf: .inf}`)
	f := r.Fields(n, "", []string{"s", "i", "f", "b", "yes", "nul", "l", "big", "inf"}, false)
	if s, ok := r.String(f["s"].Val, "s"); !ok || s != "text" {
		t.Errorf("String = %q, %v", s, ok)
	}
	if i, ok := r.Integer(f["i"].Val, "i"); !ok || i != 1000 {
		t.Errorf("Integer(1e3) = %d, %v", i, ok)
	}
	if x, ok := r.Number(f["f"].Val, "f"); !ok || x != 2.5 {
		t.Errorf("Number = %v, %v", x, ok)
	}
	if b, ok := r.Bool(f["b"].Val, "b"); !ok || !b {
		t.Errorf("Bool = %v, %v", b, ok)
	}
	if items := r.List(f["s"].Val, "s", 1); len(items) != 1 || items[0].Value != "text" {
		t.Errorf("List of a scalar = %v", items)
	}
	if r.Err() != nil {
		t.Fatalf("unexpected problems: %v", r.Err())
	}
	r.Integer(f["f"].Val, "f")
	r.Bool(f["yes"].Val, "yes")
	r.String(f["nul"].Val, "nul")
	r.List(f["l"].Val, "l", 2)
	r.Integer(f["big"].Val, "big")
	r.Number(f["inf"].Val, "inf")
	r.Number(f["l"].Val, "l")
	want := []string{
		"f.yaml:1:22: f: want a whole number, got 2.5",
		`f.yaml:1:41: yes: want true or false, got "yes"`,
		"f.yaml:1:51: nul: want a string, got null",
		"f.yaml:1:57: l: at most 2 entries, got 3",
		"f.yaml:1:73: big: want a whole number, got 1e20",
		`f.yaml:1:84: inf: want a finite number, got ".inf"`,
		"f.yaml:1:57: l: want a number, got a list",
	}
	if got := problems(r); !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestProblemCap(t *testing.T) {
	r := &Reader{File: "f", Max: 2}
	for range 5 {
		r.Problem(nil, "bad")
	}
	r.Skip()
	var fe *FileError
	if !errors.As(r.Err(), &fe) || len(fe.Errors) != 2 || fe.More != 4 || r.Count() != 6 || !r.Full() {
		t.Fatalf("got %+v", r.Err())
	}
	if !strings.HasSuffix(r.Err().Error(), "(and 4 more problems)") {
		t.Errorf("message %q", r.Err().Error())
	}
	if (&Reader{}).Err() != nil {
		t.Errorf("a Reader without problems has an error")
	}
}

// An alias is followed, never expanded: a bomb of nested aliases costs one
// node per alias.
func TestResolveAndDescribe(t *testing.T) {
	n, r := top(t, "a: &a [1, 2]\nb: *a\nc: *a\nd: \""+strings.Repeat("x", 70)+"\"\n")
	f := r.Fields(n, "", []string{"a", "b", "c", "d"}, false)
	if f["b"].Val != f["a"].Val || f["c"].Val != f["a"].Val {
		t.Errorf("aliases not resolved to the anchored node")
	}
	for _, tc := range []struct {
		n    *yaml.Node
		want string
	}{
		{n, "a mapping"}, {f["a"].Val, "a list"}, {f["a"].Val.Content[0], "the number 1"},
		{f["d"].Val, `"` + strings.Repeat("x", 64) + `"...`},
	} {
		if got := Describe(tc.n); got != tc.want {
			t.Errorf("Describe = %s, want %s", got, tc.want)
		}
	}
}
