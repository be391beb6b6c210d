// Package yamlfile reads configuration files written in YAML or JSON (JSON
// is read as YAML) and reports every problem as "file:line:column: reason":
// syntax errors where the problem is, and, while the caller walks the tree,
// unknown and repeated fields, wrong types and bad values at the node that
// holds them. The rules files of package ratelimit/rules are read with it;
// so is any configuration that should say exactly where it is wrong.
//
//	r := &yamlfile.Reader{File: "gateway.yaml", Wrap: ErrInvalid}
//	doc := r.Parse(data)
//	if doc != nil {
//		top := yamlfile.Resolve(doc.Content[0])
//		f := r.Fields(top, "", []string{"listen", "routes"}, true)
//		if v, ok := f["listen"]; ok {
//			addr, _ = r.String(v.Val, "listen")
//		}
//	}
//	if err := r.Err(); err != nil { // a *FileError: every problem, in order
//		return err
//	}
//
// # Syntax errors
//
// The tree comes from go.yaml.in/yaml/v3 (fast, with a depth limit and
// positions on every node). Its syntax errors, though, name the line of the
// construct around the problem — for parser errors the line before it, a
// 0-based line printed as 1-based — and no column, and it keeps the
// problem's position unexported. So a file yaml.v3 refuses is parsed again
// by github.com/goccy/go-yaml, which reports the token at fault, and that
// position is used when it is at or after yaml.v3's line. Three errors are
// then placed where the fix goes:
//
//	"[" or "{" left open          just after the last item in it, naming where it opened
//	":" where none may be         at that ":" (not at the start of the value before it)
//	a tab in the indentation      at the tab
//
// Columns count characters, 1-based, as yaml.v3's do. goccy/go-yaml is used
// for nothing else: it is much slower (3.6 s and 1.8 GB allocated for a
// 1 MiB file, against 0.24 s and 58 MB) and has no depth limit, so files
// over 128 KiB, or nested (by a quick upper bound) more than 200 deep, keep
// yaml.v3's message and line.
//
// # Walking
//
// The Reader's helpers each check one node and report what is wrong with
// it, prefixed by where it is ("rule \"login\": rate: want a number, got
// \"100\""), and return ok = false: Fields (unknown and repeated names,
// merge keys), List, String, Number, Integer, Bool. Resolve follows
// aliases (without expanding them, so an alias bomb costs nothing) and
// Describe names a node for a message. Past Reader.Max problems (default
// 20) the Reader only counts; FileError.More says how many more there were.
package yamlfile
