package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"net/textproto"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spillwayhq/spillway/ratelimit"
)

// Error is one problem in a rules file, at a position.
type Error struct {
	File   string
	Line   int // 1-based; 0 when the YAML parser did not say
	Column int // 1-based; 0 when unknown
	Msg    string
}

// Error returns "file:line:column: reason" (line and column left out when
// unknown).
func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// FileError is the error of Parse and Load for a file that is not a valid
// rules file: every problem found, in file order, up to MaxErrors.
type FileError struct {
	Errors []*Error
	More   int // problems found beyond MaxErrors
}

// Error lists the problems, one per line.
func (e *FileError) Error() string {
	var b strings.Builder
	for i, x := range e.Errors {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(x.Error())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n(and %d more problems)", e.More)
	}
	return b.String()
}

// Unwrap returns the problems, so errors.Is(err, ErrInvalid) and errors.As
// with *Error work.
func (e *FileError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, x := range e.Errors {
		out[i] = x
	}
	return out
}

// Load reads and parses the rules file at path (see Parse). On any error
// the caller should keep the rules it already has.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a rules file, YAML or JSON (JSON is read as YAML), named
// name in errors. It returns a validated Set, or nil and a *FileError
// listing every problem with its line and column: syntax, unknown or
// duplicate fields, wrong types, invalid values, duplicate rule ids. One bad
// rule refuses the whole file.
func Parse(name string, data []byte) (*Set, error) {
	p := &parser{file: name}
	if len(data) > MaxFileBytes {
		p.fail(nil, "file is larger than %d bytes", MaxFileBytes)
		return nil, p.err()
	}
	root, err := decodeYAML(data)
	if err != nil {
		p.failYAML(err)
		return nil, p.err()
	}
	set := p.set(root)
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	if err := set.Validate(); err != nil { // every rule passed; a safety net
		p.fail(root, "%s", strings.TrimPrefix(err.Error(), "rules: "))
		return nil, p.err()
	}
	return set, nil
}

// decodeYAML parses exactly one YAML document.
func decodeYAML(data []byte) (root *yaml.Node, err error) {
	defer func() {
		if v := recover(); v != nil { // never let a parser bug take the caller down
			root, err = nil, fmt.Errorf("yaml: parser failed: %v", v)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("yaml: empty file; want a mapping with a rules: list")
		}
		return nil, err
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, err
	default:
		return nil, fmt.Errorf("yaml: line %d: a rules file holds one document; a second one starts here", extra.Line)
	}
	return &doc, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (?s:(.*))$`)

type parser struct {
	file string
	errs []*Error
	more int
}

func (p *parser) err() error { return &FileError{Errors: p.errs, More: p.more} }

// full reports whether MaxErrors problems have been found; the parser then
// stops looking.
func (p *parser) full() bool { return len(p.errs) >= MaxErrors }

func (p *parser) fail(n *yaml.Node, format string, args ...any) {
	if p.full() {
		p.more++
		return
	}
	e := &Error{File: p.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

func (p *parser) failYAML(err error) {
	msg := err.Error()
	e := &Error{File: p.file, Msg: strings.TrimPrefix(msg, "yaml: ")}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = m[2]
	}
	p.errs = append(p.errs, e)
}

type field struct{ key, val *yaml.Node }

var (
	topFields      = []string{"rules", "identities", "trustedProxies", "forwardedHeader", "ipv6Prefix"}
	ruleFields     = []string{"id", "key", "rate", "per", "burst", "algorithm", "cost", "shadow", "failMode", "onMissing", "match"}
	matchFields    = []string{"methods", "paths"}
	identityFields = []string{"header"}
)

func (p *parser) set(root *yaml.Node) *Set {
	top := resolve(root)
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = resolve(top.Content[0])
	}
	if top.Kind != yaml.MappingNode {
		p.fail(top, "want a mapping with a rules: list at the top, got %s", kindName(top))
		return nil
	}
	f := p.fields(top, "", topFields)
	set := &Set{}
	if v, ok := f["identities"]; ok {
		set.Identities = p.identities(v.val)
	}
	if v, ok := f["trustedProxies"]; ok {
		set.TrustedProxies = p.prefixes(v.val)
	}
	if v, ok := f["forwardedHeader"]; ok {
		if s, ok := p.str(v.val, "forwardedHeader"); ok {
			switch strings.ToLower(s) {
			case "x-forwarded-for":
				set.ForwardedHeader = HeaderXForwardedFor
			case "forwarded":
				set.ForwardedHeader = HeaderForwarded
			default:
				p.fail(v.val, "forwardedHeader: want %q or %q, got %q", HeaderXForwardedFor, HeaderForwarded, s)
			}
		}
	}
	if v, ok := f["ipv6Prefix"]; ok {
		if n, ok := p.integer(v.val, "ipv6Prefix"); ok {
			if n < 1 || n > 128 {
				p.fail(v.val, "ipv6Prefix: want 1 to 128 bits, got %d", n)
			}
			set.IPv6Prefix = int(n)
		}
	}
	v, ok := f["rules"]
	if !ok {
		p.fail(top, "missing rules: (a list of rules)")
		return set
	}
	set.Rules = p.rules(v.val, set.Identities)
	return set
}

func (p *parser) rules(n *yaml.Node, ids map[string]Identity) []Rule {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "rules: want a list of rules, got %s", kindName(n))
		return nil
	}
	if len(n.Content) > MaxRules {
		p.fail(n, "rules: at most %d rules, got %d", MaxRules, len(n.Content))
		return nil
	}
	out := make([]Rule, 0, len(n.Content))
	seen := make(map[string]*yaml.Node, len(n.Content))
	for i, item := range n.Content {
		if p.full() {
			p.more++
			break
		}
		r, idNode, ok := p.rule(resolve(item), i, ids)
		if !ok {
			continue
		}
		if first, dup := seen[r.ID]; dup {
			p.fail(idNode, "rule %q: duplicate id (first at line %d)", r.ID, first.Line)
			continue
		}
		seen[r.ID] = idNode
		out = append(out, r)
	}
	return out
}

// rule parses the i-th rule; ok is false when it had problems (reported).
func (p *parser) rule(n *yaml.Node, i int, ids map[string]Identity) (r Rule, idNode *yaml.Node, ok bool) {
	label := fmt.Sprintf("rule #%d", i+1)
	if n.Kind != yaml.MappingNode {
		p.fail(n, "%s: want a mapping (id, key, rate, per, ...), got %s", label, kindName(n))
		return r, nil, false
	}
	for j := 0; j+1 < len(n.Content); j += 2 { // name the rule in every message
		if k, v := n.Content[j], resolve(n.Content[j+1]); k.Value == "id" && v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
			label = fmt.Sprintf("rule %q", v.Value[:min(len(v.Value), MaxIDLength+1)])
		}
	}
	before := len(p.errs) + p.more
	f := p.fields(n, label+": ", ruleFields)
	nodes := map[string]*yaml.Node{"": n}
	for name, x := range f {
		nodes[name] = x.val
	}
	if v, has := f["id"]; has {
		if v.val.Kind == yaml.ScalarNode && (v.val.Tag == "!!str" || v.val.Tag == "!!int") {
			r.ID = v.val.Value
		} else {
			p.fail(v.val, "%s: id: want a string, got %s", label, kindName(v.val))
		}
		idNode = v.val
	} else {
		p.fail(n, "%s: missing id", label)
	}
	pre := label + ": "
	if v, has := f["key"]; has {
		items := p.list(v.val, pre+"key", MaxKeyParts)
		for j, it := range items {
			nodes[fmt.Sprintf("key[%d]", j)] = it
			if s, ok := p.str(it, pre+"key"); ok {
				kp, err := ParseKeyPart(s, ids)
				if err != nil {
					p.fail(it, "%skey: %s", pre, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
					continue
				}
				r.Key = append(r.Key, kp)
			}
		}
	}
	if v, has := f["rate"]; has {
		r.Spec.Rate, _ = p.number(v.val, pre+"rate")
	} else {
		p.fail(n, "%smissing rate", pre)
	}
	if v, has := f["per"]; has {
		r.Spec.Per = p.per(v.val, pre+"per")
	} else {
		p.fail(n, "%smissing per (e.g. \"1s\", \"1m\", \"15m\", \"1h\", \"1d\")", pre)
	}
	if v, has := f["burst"]; has {
		if b, ok := p.integer(v.val, pre+"burst"); ok {
			r.Spec.Burst = int(min(max(b, -1), ratelimit.MaxBurst+1)) // out-of-range values fail Validate
		}
	}
	if v, has := f["algorithm"]; has {
		if s, ok := p.str(v.val, pre+"algorithm"); ok {
			a, err := ratelimit.ParseAlgorithm(s)
			if err != nil {
				p.fail(v.val, "%salgorithm: %s", pre, strings.TrimPrefix(err.Error(), "ratelimit: "))
			}
			r.Spec.Algorithm = a
		}
	}
	if v, has := f["cost"]; has {
		if c, ok := p.integer(v.val, pre+"cost"); ok {
			if c < 1 {
				p.fail(v.val, "%scost: want at least 1 unit, got %d", pre, c)
			}
			r.Cost = int(min(c, ratelimit.MaxBurst+1))
		}
	}
	if v, has := f["shadow"]; has {
		r.Shadow = p.boolean(v.val, pre+"shadow")
	}
	if v, has := f["failMode"]; has {
		if s, ok := p.str(v.val, pre+"failMode"); ok {
			m, err := ratelimit.ParseFailMode(s)
			if err != nil || strings.TrimSpace(s) == "" {
				p.fail(v.val, "%sfailMode: want \"open\" or \"closed\", got %q", pre, s)
			}
			r.FailMode = m
		}
	}
	if v, has := f["onMissing"]; has {
		if s, ok := p.str(v.val, pre+"onMissing"); ok {
			switch strings.ToLower(s) {
			case "skip":
				r.OnMissing = MissingSkip
			case "fallback":
				r.OnMissing = MissingFallback
			default:
				p.fail(v.val, "%sonMissing: want \"skip\" or \"fallback\", got %q", pre, s)
			}
		}
	}
	if v, has := f["match"]; has {
		r.Match = p.match(v.val, pre, nodes)
	}
	if len(p.errs)+p.more > before {
		return r, idNode, false
	}
	if err := r.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			at := nodes[fe.Field]
			if at == nil {
				at = nodes[strings.SplitN(fe.Field, "[", 2)[0]]
			}
			if at == nil {
				at = n
			}
			p.fail(at, "%s%s: %s", pre, fe.Field, fe.Msg)
		} else {
			p.fail(n, "%s%v", pre, err)
		}
		return r, idNode, false
	}
	return r, idNode, true
}

func (p *parser) match(n *yaml.Node, pre string, nodes map[string]*yaml.Node) Match {
	var m Match
	if n.Kind != yaml.MappingNode {
		p.fail(n, "%smatch: want a mapping (methods, paths), got %s", pre, kindName(n))
		return m
	}
	f := p.fields(n, pre+"match: ", matchFields)
	if v, has := f["methods"]; has {
		nodes["match.methods"] = v.val
		for j, it := range p.list(v.val, pre+"match.methods", MaxMatchEntries) {
			nodes[fmt.Sprintf("match.methods[%d]", j)] = it
			if s, ok := p.str(it, pre+"match.methods"); ok {
				m.Methods = append(m.Methods, strings.ToUpper(s))
			}
		}
	}
	if v, has := f["paths"]; has {
		nodes["match.paths"] = v.val
		for j, it := range p.list(v.val, pre+"match.paths", MaxMatchEntries) {
			nodes[fmt.Sprintf("match.paths[%d]", j)] = it
			if s, ok := p.str(it, pre+"match.paths"); ok {
				m.Paths = append(m.Paths, s)
			}
		}
	}
	return m
}

func (p *parser) identities(n *yaml.Node) map[string]Identity {
	if n.Kind != yaml.MappingNode {
		p.fail(n, "identities: want a mapping of names to sources (user: {header: X-User-ID}), got %s", kindName(n))
		return nil
	}
	out := make(map[string]Identity)
	for i := 0; i+1 < len(n.Content) && !p.full(); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			p.fail(k, "identities: names must be strings, got %s", kindName(k))
			continue
		}
		name := k.Value
		if _, dup := out[name]; dup {
			p.fail(k, "identities: %q is defined twice", name)
			continue
		}
		var header string
		switch v.Kind {
		case yaml.ScalarNode:
			header, _ = p.str(v, "identities."+name)
		case yaml.MappingNode:
			f := p.fields(v, "identities."+name+": ", identityFields)
			h, has := f["header"]
			if !has {
				p.fail(v, "identities.%s: missing header", name)
				continue
			}
			header, _ = p.str(h.val, "identities."+name+".header")
		default:
			p.fail(v, "identities.%s: want {header: Name}, got %s", name, kindName(v))
			continue
		}
		if header == "" {
			continue
		}
		id := Identity{Header: textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(header))}
		if msg := validIdentity(name, id); msg != "" {
			p.fail(k, "identities.%s: %s", name, msg)
			continue
		}
		out[name] = id
	}
	return out
}

func (p *parser) prefixes(n *yaml.Node) []netip.Prefix {
	var out []netip.Prefix
	for _, it := range p.list(n, "trustedProxies", 4096) {
		s, ok := p.str(it, "trustedProxies")
		if !ok {
			continue
		}
		pfx, err := parsePrefix(s)
		if err != nil {
			p.fail(it, "trustedProxies: %v", err)
			continue
		}
		out = append(out, pfx)
	}
	return out
}

// parsePrefix reads a CIDR ("10.0.0.0/8") or a single address ("10.0.0.1").
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
		}
		s = a.String() + "/" + strconv.Itoa(a.BitLen())
	}
	pfx, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
	case pfx.Addr().Is4In6():
		return netip.Prefix{}, fmt.Errorf("%q: write IPv4-mapped addresses in IPv4 form", s)
	case pfx.Masked() != pfx:
		return netip.Prefix{}, fmt.Errorf("%q has bits set past the prefix length (did you mean %s?)", s, pfx.Masked())
	}
	return pfx, nil
}

// fields returns the fields of mapping n by name, reporting unknown and
// repeated names. YAML merge keys (<<: *defaults) are followed: fields
// written in n win over merged ones.
func (p *parser) fields(n *yaml.Node, pre string, known []string) map[string]field {
	out := make(map[string]field)
	p.collect(n, pre, known, out, false, 0)
	return out
}

func (p *parser) collect(n *yaml.Node, pre string, known []string, out map[string]field, merged bool, depth int) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content) && !p.full(); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			p.fail(k, "%sfield names must be strings, got %s", pre, kindName(k))
			continue
		}
		if pre == "" && strings.HasPrefix(k.Value, "x-") {
			continue // top-level extension field: a place for YAML anchors
		}
		if !contains(known, k.Value) {
			p.fail(k, "%sunknown field %q (want %s)", pre, k.Value, strings.Join(known, ", "))
			continue
		}
		if prev, dup := out[k.Value]; dup {
			if !merged {
				p.fail(k, "%s%s is set twice (first at line %d)", pre, k.Value, prev.key.Line)
			}
			continue
		}
		out[k.Value] = field{k, v}
	}
	for _, m := range merges {
		if depth >= 8 {
			p.fail(m, "%smerge keys nested too deep", pre)
			return
		}
		switch m.Kind {
		case yaml.MappingNode:
			p.collect(m, pre, known, out, true, depth+1)
		case yaml.SequenceNode:
			for _, x := range m.Content {
				if x = resolve(x); x.Kind == yaml.MappingNode {
					p.collect(x, pre, known, out, true, depth+1)
				} else {
					p.fail(x, "%s<<: want a mapping, got %s", pre, kindName(x))
				}
			}
		default:
			p.fail(m, "%s<<: want a mapping, got %s", pre, kindName(m))
		}
	}
}

// list returns the items of a sequence, or n itself when it is a single
// scalar (key: user reads as key: [user]).
func (p *parser) list(n *yaml.Node, what string, maxItems int) []*yaml.Node {
	switch n.Kind {
	case yaml.ScalarNode:
		return []*yaml.Node{n}
	case yaml.SequenceNode:
		if len(n.Content) > maxItems {
			p.fail(n, "%s: at most %d entries, got %d", what, maxItems, len(n.Content))
			return nil
		}
		out := make([]*yaml.Node, len(n.Content))
		for i, x := range n.Content {
			out[i] = resolve(x)
		}
		return out
	}
	p.fail(n, "%s: want a list, got %s", what, kindName(n))
	return nil
}

func (p *parser) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.fail(n, "%s: want a string, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) number(n *yaml.Node, what string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		p.fail(n, "%s: want a number, got %s", what, kindName(n))
		return 0, false
	}
	var f float64
	if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		p.fail(n, "%s: want a finite number, got %q", what, n.Value)
		return 0, false
	}
	return f, true
}

func (p *parser) integer(n *yaml.Node, what string) (int64, bool) {
	f, ok := p.number(n, what)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		p.fail(n, "%s: want a whole number, got %s", what, n.Value)
		return 0, false
	}
	return int64(f), true
}

func (p *parser) boolean(n *yaml.Node, what string) bool {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.fail(n, "%s: want true or false, got %s", what, kindName(n))
		return false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		p.fail(n, "%s: want true or false, got %q", what, n.Value)
	}
	return b
}

func (p *parser) per(n *yaml.Node, what string) float64 {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		f, ok := p.number(n, what)
		if ok && !(f > 0) {
			p.fail(n, "%s: want a positive number of seconds, got %s", what, n.Value)
		}
		return f
	}
	s, ok := p.str(n, what)
	if !ok {
		return 0
	}
	sec, err := ParsePer(s)
	if err != nil {
		p.fail(n, "%s: %v", what, err)
	}
	return sec
}

// resolve follows aliases (bounded, in case of a cycle).
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; i < 16 && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
