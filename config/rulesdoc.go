package config

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
	"github.com/spillwayhq/spillway/ratelimit/rules"
	"github.com/spillwayhq/spillway/yamlfile"
)

// A route's rate-limit rules are written in the rules file format of
// package ratelimit/rules, inline or in a file of their own, and read by
// that package: one format, one parser, for the gateway and for httplimit.

var rulesDocType = reflect.TypeFor[RulesDoc]()

// MarshalJSON writes the part as JSON (for the admin /config), or null
// when absent.
func (r RulesDoc) MarshalJSON() ([]byte, error) {
	if r.node == nil {
		return []byte("null"), nil
	}
	var v any
	if err := r.node.Decode(&v); err == nil {
		if b, err := json.Marshal(v); err == nil {
			return b, nil
		}
	}
	return json.Marshal("(not shown: not representable as JSON)")
}

// rulesDoc keeps the tree of a RulesDoc field, ${ENV} expanded. After an
// expansion problem (reported) the part is kept absent, so that the rules
// are not read again with the reference left in.
func (d *decoder) rulesDoc(n *yaml.Node, v reflect.Value, path string) {
	before := d.Count()
	x := d.expandTree(n, path, map[*yaml.Node]*yaml.Node{})
	if d.Count() == before {
		v.Set(reflect.ValueOf(RulesDoc{node: x}))
	}
}

// expandTree returns n with ${ENV} expanded in every string scalar below
// it (the result read again as YAML reads a plain value, quoted or not, as
// for the fields of the file that are not strings: rate: "${RATE}" is a
// number),
// copying only the nodes that change. memo holds each node's result, so an
// anchor used many times is expanded once and the copy stays as small as
// the tree.
func (d *decoder) expandTree(n *yaml.Node, path string, memo map[*yaml.Node]*yaml.Node) *yaml.Node {
	if out, ok := memo[n]; ok {
		return out
	}
	memo[n] = n // a node within itself (a recursive alias) stays as it is
	out := n
	switch n.Kind {
	case yaml.ScalarNode:
		if x, ok := d.scalar(n, path, true); ok {
			out = x
		}
	case yaml.AliasNode:
		if a := d.expandTree(n.Alias, path, memo); a != n.Alias {
			c := *n
			c.Alias = a
			out = &c
		}
	default:
		var content []*yaml.Node
		for i, c := range n.Content {
			x := d.expandTree(c, path, memo)
			if x != c && content == nil {
				content = slices.Clone(n.Content)
			}
			if content != nil {
				content[i] = x
			}
		}
		if content != nil {
			c := *n
			c.Content = content
			out = &c
		}
	}
	memo[n] = out
	return out
}

// routeRules reads a route's rules, inline or from their file (files
// reads each file once per load, however many routes name it).
func (v *validator) routeRules(path string, rl *RouteRateLimit, files map[string]*rules.Set) {
	inline, file := v.given(&rl.Rules), v.given(&rl.File)
	switch {
	case inline && file:
		v.at(&rl.File)("%s.file: give rules (inline) or file, not both", path)
		return
	case !inline && !file:
		v.at(rl)("%s: give rules (inline, in the rules file format) or file (a rules file)", path)
		return
	case file:
		for _, f := range []struct {
			name string
			ptr  any
		}{{"identities", &rl.Identities}, {"ipv6_prefix", &rl.IPv6Prefix}} {
			if v.given(f.ptr) {
				v.at(f.ptr)("%s.%s: only with inline rules (a rules file sets its own)", path, f.name)
			}
		}
		if rl.File != "" {
			rl.set = v.rulesFile(path+".file", rl, files)
		}
	default:
		rl.set = v.inlineRules(path, rl)
	}
	if rl.set != nil && v.c.RateLimit.Store == "redis" {
		v.redisRules(path, rl)
	}
}

// inlineRules parses inline rules, their problems at their positions.
func (v *validator) inlineRules(path string, rl *RouteRateLimit) *rules.Set {
	if rl.Rules.node == nil || v.given(&rl.Identities) && rl.Identities.node == nil {
		return nil // not decoded; reported
	}
	p, _ := v.c.pos.at(&rl.Rules)
	doc := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: p.Line, Column: p.Column}
	for _, part := range []struct {
		name string
		node *yaml.Node
	}{{"rules", rl.Rules.node}, {"identities", rl.Identities.node}} {
		if part.node != nil {
			key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: part.name, Line: part.node.Line, Column: part.node.Column}
			doc.Content = append(doc.Content, key, part.node)
		}
	}
	set, err := rules.ParseNode(v.d.File, doc)
	if err != nil {
		v.foreign(err, path+": ")
		return nil
	}
	set.IPv6Prefix = rl.IPv6Prefix
	return set
}

// rulesFile loads a rules file, reporting its problems in its own name.
func (v *validator) rulesFile(path string, rl *RouteRateLimit, files map[string]*rules.Set) *rules.Set {
	if set, seen := files[rl.File]; seen {
		return set
	}
	set, err := rules.Load(rl.File)
	var pe *os.PathError
	switch {
	case errors.As(err, &pe):
		v.at(&rl.File)("%s: cannot read %s: %v", path, rl.File, pe.Err)
	case err != nil:
		v.foreign(err, "")
	case len(set.TrustedProxies) > 0 || set.ForwardedHeader != "":
		v.at(&rl.File)("%s: %s sets trustedProxies or forwardedHeader; the gateway finds the client IP by the listener's trusted_proxies: remove them", path, rl.File)
		set = nil
	}
	if err != nil {
		set = nil
	}
	files[rl.File] = set
	return set
}

// foreign reports the problems of a *yamlfile.FileError, each with its
// own file name and position, prefixed by pre.
func (v *validator) foreign(err error, pre string) {
	var fe *yamlfile.FileError
	if !errors.As(err, &fe) {
		v.d.ProblemAt(0, 0, "%s%v", pre, err)
		return
	}
	file := v.d.File
	defer func() { v.d.File = file }()
	for _, e := range fe.Errors {
		v.d.File = e.File
		v.d.ProblemAt(e.Line, e.Column, "%s%s", pre, e.Msg)
	}
	for range fe.More {
		v.d.Skip()
	}
}

// redisRules checks what a rule needs beyond its own validity on Redis: a
// leaky queue is a sorted set there, of at most redisstore.MaxEntries
// entries.
func (v *validator) redisRules(path string, rl *RouteRateLimit) {
	for _, r := range rl.set.Rules {
		if r.Spec.Algorithm != ratelimit.AlgLeakyQueue {
			continue
		}
		if b := r.Spec.Limit().Burst; b > redisstore.MaxEntries {
			v.at(&rl.Rules, &rl.File)("%s: rule %q: a leaky-queue burst of %d cannot be kept on Redis (at most %d with store: redis)", path, r.ID, b, redisstore.MaxEntries)
		}
	}
}

// rulesSchema is the JSON Schema of a RulesDoc field of kind "rules" or
// "identities" (the rules file format's; values accept ${ENV} as the rest
// of the schema does).
func rulesSchema(kind string) object {
	str := object{"type": "string"}
	if kind == "identities" {
		header := object{"type": "object", "properties": object{"header": str}, "required": []string{"header"}, "additionalProperties": false}
		return object{"type": "object", "additionalProperties": object{"anyOf": []any{str, header}}}
	}
	num := func(t string, min float64) object {
		s := object{"type": t}
		if min > 0 {
			s["minimum"] = min
		}
		return object{"anyOf": []any{s, envRef}}
	}
	list := object{"anyOf": []any{str, object{"type": "array", "items": str}}}
	var algs []any
	for a := ratelimit.AlgTokenBucket; a <= ratelimit.AlgGCRA; a++ {
		algs = append(algs, a.Name())
	}
	rule := object{"type": "object", "required": []string{"id", "rate", "per"}, "additionalProperties": false,
		"patternProperties": object{"^x-": object{}},
		"properties": object{
			"id": object{"type": []string{"string", "integer"}}, "key": list, "rate": num("number", 0),
			"per": object{"type": []string{"string", "number"}}, "burst": num("integer", 0), "cost": num("integer", 1),
			"algorithm": object{"type": "string", "examples": algs},
			"shadow":    object{"anyOf": []any{object{"type": "boolean"}, envRef}},
			"failMode":  object{"type": "string", "examples": []string{"open", "closed"}},
			"onMissing": object{"type": "string", "examples": []string{"skip", "fallback"}},
			"match": object{"type": "object", "additionalProperties": false,
				"properties": object{"methods": list, "paths": list}},
		}}
	return object{"type": "array", "items": rule, "maxItems": rules.MaxRules}
}
