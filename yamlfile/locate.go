package yamlfile

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// The locator's bounds: goccy/go-yaml's parser takes time and memory that
// grow with the number of tokens (about 3.6 s and 1.8 GB allocated for a
// 1 MiB file of flow mappings, against 0.24 s and 58 MB for yaml.v3) and
// faster with nesting (a 200 kB file nested 100,000 deep exhausted 4 GB),
// and it has no depth limit. Beyond these bounds a syntax error keeps
// yaml.v3's own message and line.
const (
	locateMaxBytes = 128 << 10
	locateMaxDepth = 200
)

// syntaxError is where a syntax error is and what it is.
type syntaxError struct {
	line, column int
	msg          string
}

var v3Line = regexp.MustCompile(`^yaml: line (\d+): (?s:(.*))$`)

// locate turns yaml.v3's error for data into a syntax error at the line and
// column of the problem. yaml.v3 reports only the line of the construct
// enclosing the problem (for parser errors, the line before it: a 0-based
// line printed as 1-based) and no column, and keeps the problem's own mark
// unexported; so the same bytes go through goccy/go-yaml's parser, which
// reports the token at fault. Its answer is taken when it finds an error at
// or after yaml.v3's line; otherwise (no error, an earlier one, or data
// beyond the bounds) yaml.v3's message and line stand.
func locate(data []byte, err error) syntaxError {
	v3 := syntaxError{msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	if m := v3Line.FindStringSubmatch(err.Error()); m != nil {
		v3.line, _ = strconv.Atoi(m[1])
		v3.msg = m[2]
	} else if !v3UnknownAnchor.MatchString(v3.msg) && !strings.HasPrefix(v3.msg, "parser failed") {
		// yaml.v3 leaves the line out when both of its marks are on
		// (0-based) line 0: the problem is on line 1.
		v3.line = 1
	}
	if len(data) > locateMaxBytes || nestingBound(data) > locateMaxDepth {
		return v3
	}
	if s, ok := goccyError(data); ok && s.line >= v3.line {
		return s
	}
	if s, ok := unknownAnchor(data, v3.msg); ok {
		return s
	}
	return v3
}

// positioned is the error interface of goccy/go-yaml's syntax errors.
type positioned interface {
	GetToken() *token.Token
	GetMessage() string
}

// goccyError parses data with goccy/go-yaml and returns its syntax error,
// refined where the token it names is not where the fix goes.
func goccyError(data []byte) (s syntaxError, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	var pe positioned
	if err == nil || !errors.As(err, &pe) || pe.GetToken() == nil || pe.GetToken().Position == nil {
		return syntaxError{}, false
	}
	return refine(data, pe.GetToken(), pe.GetMessage()), true
}

var wantCloser = regexp.MustCompile(`^',' or '([\]}])' must be specified$`)

// refine places and words the common errors for the person fixing them.
func refine(data []byte, tk *token.Token, msg string) syntaxError {
	s := syntaxError{line: tk.Position.Line, column: tk.Position.Column, msg: msg}
	switch m := wantCloser.FindStringSubmatch(msg); {
	case m != nil && tk.Prev != nil && tk.Prev.Position != nil:
		// A list or mapping left open: the "," or the closer belongs right
		// after the last thing in it, not before the next thing found.
		s.line, s.column = tokenEnd(tk.Prev)
		s.msg = fmt.Sprintf("missing \",\" or %q after %s", m[1], quoteToken(tk.Prev))
		if open := unclosed(tk.Prev); open != nil {
			s.msg += fmt.Sprintf(" (in the %q opened at line %d, column %d)", open.Value, open.Position.Line, open.Position.Column)
		}
	case msg == "mapping value is not allowed in this context" && tk.Next != nil &&
		tk.Next.Type == token.MappingValueType && tk.Next.Position != nil:
		s.line, s.column = tk.Next.Position.Line, tk.Next.Position.Column
		s.msg = `":" is not allowed here (a value holding ": " needs quotes; or is the line indented too far?)`
	case tk.Next == nil && unclosed(tk) != nil:
		// The file ended inside a flow collection.
		open := unclosed(tk)
		s.msg += fmt.Sprintf(" (the %q at line %d, column %d is not closed)", open.Value, open.Position.Line, open.Position.Column)
	case strings.HasPrefix(msg, "found character '\t'"):
		if col, ok := tabColumn(data, s.line); ok {
			s.column = col
		}
		s.msg = "tab character: YAML indents with spaces only"
	}
	return s
}

// tokenEnd returns the line and column just after tk's text.
func tokenEnd(tk *token.Token) (line, col int) {
	line, col = tk.Position.Line, tk.Position.Column
	for _, r := range strings.TrimSpace(tk.Origin) {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func quoteToken(tk *token.Token) string {
	v := strings.TrimSpace(tk.Origin)
	if utf8.RuneCountInString(v) > 32 {
		v = string([]rune(v)[:32]) + "..."
	}
	return strconv.Quote(v)
}

// unclosed returns the innermost "[" or "{" still open at tk (or tk
// itself), walking back.
func unclosed(tk *token.Token) *token.Token {
	depth := 0
	for t := tk; t != nil; t = t.Prev {
		switch t.Type {
		case token.SequenceEndType, token.MappingEndType:
			depth++
		case token.SequenceStartType, token.MappingStartType:
			if depth == 0 {
				if t.Position == nil {
					return nil
				}
				return t
			}
			depth--
		}
	}
	return nil
}

// tabColumn returns the column of the first tab on a line of data.
func tabColumn(data []byte, line int) (int, bool) {
	lines := strings.SplitN(string(data), "\n", line+1)
	if line < 1 || line > len(lines) {
		return 0, false
	}
	l := lines[line-1]
	if i := strings.IndexByte(l, '\t'); i >= 0 {
		return utf8.RuneCountInString(l[:i]) + 1, true
	}
	return 0, false
}

var v3UnknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// unknownAnchor places yaml.v3's "unknown anchor" error (which has no
// line) at the first alias of that name.
func unknownAnchor(data []byte, msg string) (syntaxError, bool) {
	m := v3UnknownAnchor.FindStringSubmatch(msg)
	if m == nil {
		return syntaxError{}, false
	}
	alias := "*" + m[1]
	for n, l := range strings.Split(string(data), "\n") {
		for from := 0; ; {
			i := strings.Index(l[from:], alias)
			if i < 0 {
				break
			}
			i += from
			end := i + len(alias)
			if end == len(l) || strings.IndexByte(" ,]}\t\r#", l[end]) >= 0 {
				return syntaxError{line: n + 1, column: utf8.RuneCountInString(l[:i]) + 1,
					msg: fmt.Sprintf("alias %s names no anchor (&%s) defined before it", alias, m[1])}, true
			}
			from = end
		}
	}
	return syntaxError{}, false
}

// nestingBound returns an upper bound of how deeply collections nest in
// data, without parsing it: the deepest run of unclosed "[" and "{"
// (counted everywhere, quoted or not, so that nothing hides one) plus, over
// the lines, twice the indentation plus the block indicators ("- ", "? ",
// ": ") on the line. A block collection nested in another starts further
// right, or on the same line after an indicator ("- - x", "- a: x"), or at
// the same indentation as its key (a list under "key:"): at most two
// levels per column, and one per indicator.
func nestingBound(data []byte) int {
	flow, maxFlow, maxBlock := 0, 0, 0
	indent, indicators, atStart, comment := 0, 0, true, false
	for i, c := range data {
		switch c {
		case '\n':
			maxBlock = max(maxBlock, 2*(indent+1)+indicators)
			indent, indicators, atStart, comment = 0, 0, true, false
			continue
		case ' ', '\t':
			if atStart {
				indent++
			}
			continue
		case '[', '{':
			flow++
			maxFlow = max(maxFlow, flow)
		case ']', '}':
			flow = max(flow-1, 0)
		case '#':
			comment = comment || atStart || data[i-1] == ' ' || data[i-1] == '\t'
		case '-', '?', ':':
			if !comment && (i+1 == len(data) || strings.IndexByte(" \t\r\n", data[i+1]) >= 0) {
				indicators++
			}
		}
		atStart = false
	}
	return maxFlow + max(maxBlock, 2*(indent+1)+indicators)
}
