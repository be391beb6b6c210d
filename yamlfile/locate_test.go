package yamlfile

import (
	"errors"
	"strings"
	"testing"
)

var errTest = errors.New("test: invalid")

// parseErr parses in and returns the one problem reported.
func parseErr(t *testing.T, in string) *Error {
	t.Helper()
	r := &Reader{File: "f.yaml", Wrap: errTest}
	if doc := r.Parse([]byte(in)); doc != nil {
		t.Fatalf("parsed %q", in)
	}
	var fe *FileError
	if err := r.Err(); !errors.As(err, &fe) || len(fe.Errors) != 1 || !errors.Is(err, errTest) {
		t.Fatalf("%q: error %v, want one problem wrapping errTest", in, err)
	}
	return fe.Errors[0]
}

// Syntax errors are reported at the line and column of the problem. The
// yaml.v3 message each replaces is in the comment: a line early (the
// construct around the problem, for parser errors 0-based) and no column.
func TestSyntaxErrorPositions(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		// v3: line 2: did not find expected ',' or ']'
		{"unclosed bracket", "rules:\n  - id: a\n    key: [ip\n    rate: 1\n    per: 1s\n",
			`f.yaml:3:13: missing "," or "]" after "ip" (in the "[" opened at line 3, column 10)`},
		// v3: line 3: found a tab character that violates indentation
		{"tab indentation", "rules:\n  - id: a\n    rate: 1\n\tper: 1s\n",
			"f.yaml:4:1: tab character: YAML indents with spaces only"},
		{"tab after spaces", "rules:\n  - id: a\n    rate: 1\n  \t  per: 1s\n",
			"f.yaml:4:3: tab character: YAML indents with spaces only"},
		// v3: line 1: did not find expected '-' indicator
		{"indented too little", "rules:\n  - id: a\n    rate: 1\n   per: 1s\n",
			"f.yaml:4:4: value is not allowed in this context"},
		// v3: line 4: mapping values are not allowed in this context
		{"indented too far", "rules:\n  - id: a\n    rate: 1\n      per: 1s\n",
			`f.yaml:4:10: ":" is not allowed here (a value holding ": " needs quotes; or is the line indented too far?)`},
		{"unquoted colon", "rules:\n  - id: a: b\n",
			`f.yaml:2:10: ":" is not allowed here (a value holding ": " needs quotes; or is the line indented too far?)`},
		// v3: did not find expected ',' or '}' (no line at all: line 1 is 0)
		{"json missing comma", `{"rules": [{"id": "a" "rate": 1}]}`,
			`f.yaml:1:22: missing "," or "}" after "\"a\"" (in the "{" opened at line 1, column 12)`},
		{"json missing comma at line end", "{\"rules\": [\n  {\"id\": \"a\"\n   \"rate\": 1}\n]}\n",
			`f.yaml:2:13: missing "," or "}" after "\"a\"" (in the "{" opened at line 2, column 3)`},
		// v3: line 2: did not find expected node content
		{"end of file in a flow mapping", "rules: [\n  {id: a,\n",
			`f.yaml:2:9: could not find flow map content (the "{" at line 2, column 3 is not closed)`},
		{"unclosed list", "rules: [a, b\n", "f.yaml:1:8: sequence end token ']' not found"},
		{"unclosed quote", "rules:\n  - id: \"a\n    rate: 1\n", "f.yaml:2:9: could not find end character of double-quoted text"},
		// v3: unknown anchor 'nope' referenced (no line); goccy/go-yaml accepts it
		{"unknown anchor", "x: 1\nrules: [a, *nope]\n", "f.yaml:2:12: alias *nope names no anchor (&nope) defined before it"},
		// Columns count characters: é is two bytes.
		{"column in characters", "rules:\n  - id: \"é\" \"x\"\n",
			"f.yaml:2:13: value is not allowed in this context. map key-value is pre-defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseErr(t, tc.in).Error(); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// Beyond the locator's bounds, yaml.v3's own message and line stand.
func TestSyntaxErrorBeyondBounds(t *testing.T) {
	bad := "rules:\n  - id: a\n    key: [ip\n    rate: 1\n"
	big := strings.Repeat("# padding line of a large file\n", locateMaxBytes/30+10) + bad
	line := strings.Count(big, "\n") - 2 // yaml.v3 names the line before the "[" (0-based)
	e := parseErr(t, big)
	if e.Line != line || e.Column != 0 || e.Msg != "did not find expected ',' or ']'" {
		t.Errorf("large file: %v, want yaml.v3's line %d and message", e, line)
	}
	// goccy/go-yaml reads 1 "b" as one plain scalar and finds nothing; yaml.v3
	// leaves the line out when the problem is on line 1.
	if e := parseErr(t, `{"a": 1 "b": 2}`); e.Error() != "f.yaml:1: did not find expected ',' or '}'" {
		t.Errorf("error goccy/go-yaml misses: %v", e)
	}
	deep := "a: " + strings.Repeat("[", locateMaxDepth+1) + "\n"
	if e := parseErr(t, deep); e.Column != 0 || !strings.Contains(e.Msg, "did not find expected") {
		t.Errorf("deep file: %v, want yaml.v3's message", e)
	}
}

func TestNestingBound(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 2},                                  // one empty line: 2·(0+1)
		{"a: b", 3},                              // one indicator
		{"a: [[[x]]]", 6},                        // 3 + three open brackets
		{"- - - x", 5},                           // three indicators
		{"a:\n  b:\n    c: 1", 11},               // 2·(4+1)+1
		{"x-y-z: 2001-12-14 # ----- - -", 3},     // dashes inside words or comments are not indicators
		{"k: \"[[[[\"", 7},                       // brackets count even in quotes (an upper bound)
		{strings.Repeat("- ", 1000) + "x", 1002}, // all on one line
	} {
		if got := nestingBound([]byte(tc.in)); got != tc.want {
			t.Errorf("nestingBound(%.20q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestParseEmptyAndTwoDocuments(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "f.yaml: empty file",
		"# only a comment\n":          "f.yaml: empty file",
		"rules: []\n---\nrules: []\n": "f.yaml:2:1: one document per file; a second one starts here",
	} {
		if got := parseErr(t, in).Error(); got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
	r := &Reader{File: "f.yaml"}
	if doc := r.Parse([]byte(`{"rules": [{"id": "a"}]}`)); doc == nil || r.Err() != nil {
		t.Errorf("JSON: %v", r.Err())
	}
}
