package rules

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/textproto"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spillwayhq/spillway/yamlfile"

	"github.com/spillwayhq/spillway/ratelimit"
)

// Error is one problem in a rules file, at a position; its Unwrap returns
// ErrInvalid.
type Error = yamlfile.Error

// FileError is the error of Parse and Load for a file that is not a valid
// rules file: every problem found, in file order, up to MaxErrors.
type FileError = yamlfile.FileError

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
// listing every problem with its line and column: syntax (where the problem
// is, see package yamlfile), unknown or duplicate fields, wrong types,
// invalid values, duplicate rule ids. One bad rule refuses the whole file.
func Parse(name string, data []byte) (*Set, error) {
	p := &parser{Reader: yamlfile.Reader{File: name, Wrap: ErrInvalid, Max: MaxErrors}}
	if len(data) > MaxFileBytes {
		p.Problem(nil, "file is larger than %d bytes", MaxFileBytes)
		return nil, p.Err()
	}
	root := p.Parse(data)
	if root == nil {
		return nil, p.Err()
	}
	return p.finish(root)
}

// ParseNode parses a rules document that is part of another file, already
// read as the YAML tree root (a mapping with rules and, optionally,
// identities, trustedProxies, forwardedHeader and ipv6Prefix): the gateway's
// configuration holds rules inline. It makes the checks Parse makes and
// returns a validated Set, or nil and a *FileError whose problems are at
// root's positions in that file, named file.
func ParseNode(file string, root *yaml.Node) (*Set, error) {
	p := &parser{Reader: yamlfile.Reader{File: file, Wrap: ErrInvalid, Max: MaxErrors}}
	return p.finish(root)
}

// finish reads the tree of a parsed file into a validated Set.
func (p *parser) finish(root *yaml.Node) (*Set, error) {
	set := p.set(root)
	if p.Count() > 0 {
		return nil, p.Err()
	}
	if err := set.Validate(); err != nil { // every rule passed; a safety net
		p.Problem(root, "%s", strings.TrimPrefix(err.Error(), "rules: "))
		return nil, p.Err()
	}
	return set, nil
}

// parser walks a rules file's tree; the Reader collects the problems.
type parser struct {
	yamlfile.Reader
}

var (
	topFields      = []string{"rules", "identities", "trustedProxies", "forwardedHeader", "ipv6Prefix"}
	ruleFields     = []string{"id", "key", "rate", "per", "burst", "algorithm", "cost", "shadow", "failMode", "onMissing", "match"}
	matchFields    = []string{"methods", "paths"}
	identityFields = []string{"header"}
)

func (p *parser) set(root *yaml.Node) *Set {
	top := yamlfile.Resolve(root)
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = yamlfile.Resolve(top.Content[0])
	}
	if top.Kind != yaml.MappingNode {
		p.Problem(top, "want a mapping with a rules: list at the top, got %s", yamlfile.Describe(top))
		return nil
	}
	f := p.Fields(top, "", topFields, true)
	set := &Set{}
	if v, ok := f["identities"]; ok {
		set.Identities = p.identities(v.Val)
	}
	if v, ok := f["trustedProxies"]; ok {
		set.TrustedProxies = p.prefixes(v.Val)
	}
	if v, ok := f["forwardedHeader"]; ok {
		if s, ok := p.String(v.Val, "forwardedHeader"); ok {
			switch strings.ToLower(s) {
			case "x-forwarded-for":
				set.ForwardedHeader = HeaderXForwardedFor
			case "forwarded":
				set.ForwardedHeader = HeaderForwarded
			default:
				p.Problem(v.Val, "forwardedHeader: want %q or %q, got %q", HeaderXForwardedFor, HeaderForwarded, s)
			}
		}
	}
	if v, ok := f["ipv6Prefix"]; ok {
		if n, ok := p.Integer(v.Val, "ipv6Prefix"); ok {
			if n < 1 || n > 128 {
				p.Problem(v.Val, "ipv6Prefix: want 1 to 128 bits, got %d", n)
			}
			set.IPv6Prefix = int(n)
		}
	}
	v, ok := f["rules"]
	if !ok {
		p.Problem(top, "missing rules: (a list of rules)")
		return set
	}
	set.Rules = p.rules(v.Val, set.Identities)
	return set
}

func (p *parser) rules(n *yaml.Node, ids map[string]Identity) []Rule {
	if n.Kind != yaml.SequenceNode {
		p.Problem(n, "rules: want a list of rules, got %s", yamlfile.Describe(n))
		return nil
	}
	if len(n.Content) > MaxRules {
		p.Problem(n, "rules: at most %d rules, got %d", MaxRules, len(n.Content))
		return nil
	}
	out := make([]Rule, 0, len(n.Content))
	seen := make(map[string]*yaml.Node, len(n.Content))
	for i, item := range n.Content {
		if p.Full() {
			p.Skip()
			break
		}
		r, idNode, ok := p.rule(yamlfile.Resolve(item), i, ids)
		if !ok {
			continue
		}
		if first, dup := seen[r.ID]; dup {
			p.Problem(idNode, "rule %q: duplicate id (first at line %d)", r.ID, first.Line)
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
		p.Problem(n, "%s: want a mapping (id, key, rate, per, ...), got %s", label, yamlfile.Describe(n))
		return r, nil, false
	}
	for j := 0; j+1 < len(n.Content); j += 2 { // name the rule in every message
		if k, v := n.Content[j], yamlfile.Resolve(n.Content[j+1]); k.Value == "id" && v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
			label = fmt.Sprintf("rule %q", v.Value[:min(len(v.Value), MaxIDLength+1)])
		}
	}
	before := p.Count()
	f := p.Fields(n, label+": ", ruleFields, false)
	nodes := map[string]*yaml.Node{"": n}
	for name, x := range f {
		nodes[name] = x.Val
	}
	if v, has := f["id"]; has {
		if v.Val.Kind == yaml.ScalarNode && (v.Val.Tag == "!!str" || v.Val.Tag == "!!int") {
			r.ID = v.Val.Value
		} else {
			p.Problem(v.Val, "%s: id: want a string, got %s", label, yamlfile.Describe(v.Val))
		}
		idNode = v.Val
	} else {
		p.Problem(n, "%s: missing id", label)
	}
	pre := label + ": "
	if v, has := f["key"]; has {
		items := p.List(v.Val, pre+"key", MaxKeyParts)
		for j, it := range items {
			nodes[fmt.Sprintf("key[%d]", j)] = it
			if s, ok := p.String(it, pre+"key"); ok {
				kp, err := ParseKeyPart(s, ids)
				if err != nil {
					p.Problem(it, "%skey: %s", pre, strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
					continue
				}
				r.Key = append(r.Key, kp)
			}
		}
	}
	if v, has := f["rate"]; has {
		r.Spec.Rate, _ = p.Number(v.Val, pre+"rate")
	} else {
		p.Problem(n, "%smissing rate", pre)
	}
	if v, has := f["per"]; has {
		r.Spec.Per = p.per(v.Val, pre+"per")
	} else {
		p.Problem(n, "%smissing per (e.g. \"1s\", \"1m\", \"15m\", \"1h\", \"1d\")", pre)
	}
	if v, has := f["burst"]; has {
		if b, ok := p.Integer(v.Val, pre+"burst"); ok {
			r.Spec.Burst = int(min(max(b, -1), ratelimit.MaxBurst+1)) // out-of-range values fail Validate
		}
	}
	if v, has := f["algorithm"]; has {
		if s, ok := p.String(v.Val, pre+"algorithm"); ok {
			a, err := ratelimit.ParseAlgorithm(s)
			if err != nil {
				p.Problem(v.Val, "%salgorithm: %s", pre, strings.TrimPrefix(err.Error(), "ratelimit: "))
			}
			r.Spec.Algorithm = a
		}
	}
	if v, has := f["cost"]; has {
		if c, ok := p.Integer(v.Val, pre+"cost"); ok {
			if c < 1 {
				p.Problem(v.Val, "%scost: want at least 1 unit, got %d", pre, c)
			}
			r.Cost = int(min(c, ratelimit.MaxBurst+1))
		}
	}
	if v, has := f["shadow"]; has {
		r.Shadow, _ = p.Bool(v.Val, pre+"shadow")
	}
	if v, has := f["failMode"]; has {
		if s, ok := p.String(v.Val, pre+"failMode"); ok {
			m, err := ratelimit.ParseFailMode(s)
			if err != nil || strings.TrimSpace(s) == "" {
				p.Problem(v.Val, "%sfailMode: want \"open\" or \"closed\", got %q", pre, s)
			}
			r.FailMode = m
		}
	}
	if v, has := f["onMissing"]; has {
		if s, ok := p.String(v.Val, pre+"onMissing"); ok {
			switch strings.ToLower(s) {
			case "skip":
				r.OnMissing = MissingSkip
			case "fallback":
				r.OnMissing = MissingFallback
			default:
				p.Problem(v.Val, "%sonMissing: want \"skip\" or \"fallback\", got %q", pre, s)
			}
		}
	}
	if v, has := f["match"]; has {
		r.Match = p.match(v.Val, pre, nodes)
	}
	if p.Count() > before {
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
			p.Problem(at, "%s%s: %s", pre, fe.Field, fe.Msg)
		} else {
			p.Problem(n, "%s%v", pre, err)
		}
		return r, idNode, false
	}
	return r, idNode, true
}

func (p *parser) match(n *yaml.Node, pre string, nodes map[string]*yaml.Node) Match {
	var m Match
	if n.Kind != yaml.MappingNode {
		p.Problem(n, "%smatch: want a mapping (methods, paths), got %s", pre, yamlfile.Describe(n))
		return m
	}
	f := p.Fields(n, pre+"match: ", matchFields, false)
	if v, has := f["methods"]; has {
		nodes["match.methods"] = v.Val
		for j, it := range p.List(v.Val, pre+"match.methods", MaxMatchEntries) {
			nodes[fmt.Sprintf("match.methods[%d]", j)] = it
			if s, ok := p.String(it, pre+"match.methods"); ok {
				m.Methods = append(m.Methods, strings.ToUpper(s))
			}
		}
	}
	if v, has := f["paths"]; has {
		nodes["match.paths"] = v.Val
		for j, it := range p.List(v.Val, pre+"match.paths", MaxMatchEntries) {
			nodes[fmt.Sprintf("match.paths[%d]", j)] = it
			if s, ok := p.String(it, pre+"match.paths"); ok {
				m.Paths = append(m.Paths, s)
			}
		}
	}
	return m
}

func (p *parser) identities(n *yaml.Node) map[string]Identity {
	if n.Kind != yaml.MappingNode {
		p.Problem(n, "identities: want a mapping of names to sources (user: {header: X-User-ID}), got %s", yamlfile.Describe(n))
		return nil
	}
	out := make(map[string]Identity)
	for i := 0; i+1 < len(n.Content) && !p.Full(); i += 2 {
		k, v := n.Content[i], yamlfile.Resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			p.Problem(k, "identities: names must be strings, got %s", yamlfile.Describe(k))
			continue
		}
		name := k.Value
		if _, dup := out[name]; dup {
			p.Problem(k, "identities: %q is defined twice", name)
			continue
		}
		var header string
		switch v.Kind {
		case yaml.ScalarNode:
			header, _ = p.String(v, "identities."+name)
		case yaml.MappingNode:
			f := p.Fields(v, "identities."+name+": ", identityFields, false)
			h, has := f["header"]
			if !has {
				p.Problem(v, "identities.%s: missing header", name)
				continue
			}
			header, _ = p.String(h.Val, "identities."+name+".header")
		default:
			p.Problem(v, "identities.%s: want {header: Name}, got %s", name, yamlfile.Describe(v))
			continue
		}
		if header == "" {
			continue
		}
		id := Identity{Header: textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(header))}
		if msg := validIdentity(name, id); msg != "" {
			p.Problem(k, "identities.%s: %s", name, msg)
			continue
		}
		out[name] = id
	}
	return out
}

func (p *parser) prefixes(n *yaml.Node) []netip.Prefix {
	var out []netip.Prefix
	for _, it := range p.List(n, "trustedProxies", 4096) {
		s, ok := p.String(it, "trustedProxies")
		if !ok {
			continue
		}
		pfx, err := parsePrefix(s)
		if err != nil {
			p.Problem(it, "trustedProxies: %v", err)
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

func (p *parser) per(n *yaml.Node, what string) float64 {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		f, ok := p.Number(n, what)
		if ok && !(f > 0) {
			p.Problem(n, "%s: want a positive number of seconds, got %s", what, n.Value)
		}
		return f
	}
	s, ok := p.String(n, what)
	if !ok {
		return 0
	}
	sec, err := ParsePer(s)
	if err != nil {
		p.Problem(n, "%s: %v", what, err)
	}
	return sec
}
