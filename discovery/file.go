package discovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spillwayhq/spillway/balancer"
)

// DefaultPoll is how often a File source looks at its file when File.Poll
// is zero.
const DefaultPoll = 2 * time.Second

// MaxFileBytes bounds the size of an endpoints file; a larger file is
// refused (and the last list kept).
const MaxFileBytes = 4 << 20

// settle is how recent a file's modification time may be for the file to
// be read again even though its size and mtime look unchanged: file systems
// with coarse timestamps (a second, two on FAT) can hide a rewrite of the
// same size within one tick.
const settle = 2 * time.Second

// File is a Source that watches a file listing endpoints, JSON or YAML (JSON
// is read as YAML), a list of mappings with the keys addr (required,
// "host:port" with a numeric port), weight (optional integer in
// [1, MaxWeight]; absent means 1) and meta (optional mapping of string
// labels), each addr at most once:
//
//   - addr: 10.0.0.1:8080
//     weight: 3
//     meta: {zone: eu-west-1a}
//   - addr: 10.0.0.2:8080
//
// or [{"addr": "10.0.0.1:8080", "weight": 3}, {"addr": "10.0.0.2:8080"}].
// An explicit empty list ([]) is valid and sends an empty list; an empty file
// (nothing but blanks or comments) is taken for a write in progress and
// refused.
//
// File polls: every Poll it stats the file, reads it when its identity, size
// or mtime changed (or its mtime is recent enough that a same-size rewrite
// could hide in the file system's timestamp resolution), and parses it when
// the content's SHA-256 differs from the last content read. A file that
// changes while being read is read again at the next poll. Replace the file
// atomically (write a temporary file, rename it over) so a poll never reads
// half a file; a half file is usually refused as invalid anyway.
//
// A missing, unreadable, oversized or invalid file is reported to OnError
// (an invalid one as a *FileError, "path:line: reason") and the last good
// list is kept. The same error is reported once, not at every poll, until
// the file changes. A File value must not be changed while Run is running.
type File struct {
	// Path is the file to watch. Required.
	Path string
	// Poll is the interval between looks at the file; zero means
	// DefaultPoll (2s). Must not be negative.
	Poll time.Duration
	// OnError, when not nil, receives every new problem with the file (the
	// list is kept). It is called on the goroutine running Run.
	OnError func(error)

	sleep sleepFunc // nil: a real timer
}

// FileError is a problem in an endpoints file, at a line when known.
type FileError struct {
	Path   string
	Line   int // 1-based; 0 when the problem has no line (an empty file)
	Reason string
}

// Error returns "path:line: reason", or "path: reason" without a line.
func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Reason)
	}
	return e.Path + ": " + e.Reason
}

// fileState is what the poller remembers about the file between polls.
type fileState struct {
	info    os.FileInfo // at the last complete read; nil before one
	settled bool        // the mtime was older than settle at that read
	sum     [sha256.Size]byte
	summed  bool   // sum holds the hash of the last content read
	lastErr string // the last error reported, to report each once
}

// Run reads the file now and at every poll, sending the list whenever it
// changes, until ctx ends; it returns ctx.Err(), or a *ConfigError before
// doing anything. A file missing at start is not fatal: Run reports it and
// keeps polling.
func (f *File) Run(ctx context.Context, update func([]balancer.Endpoint)) error {
	switch {
	case update == nil:
		return badConfig("update", "must not be nil")
	case f.Path == "":
		return badConfig("File.Path", "must not be empty")
	case f.Poll < 0:
		return badConfig("File.Poll", "must not be negative, got %v", f.Poll)
	}
	poll := f.Poll
	if poll == 0 {
		poll = DefaultPoll
	}
	sleep := f.sleep
	if sleep == nil {
		sleep = realSleep
	}
	em := emitter{update: update}
	var st fileState
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.poll(&st, &em)
		if err := sleep(ctx, poll); err != nil {
			return err
		}
	}
}

// poll looks at the file once.
func (f *File) poll(st *fileState, em *emitter) {
	info, err := os.Stat(f.Path)
	if err != nil {
		// Forget the content so the file is parsed again when it returns.
		st.info, st.summed = nil, false
		f.report(st, fmt.Errorf("discovery: endpoints file: %w; keeping the last list", err))
		return
	}
	if st.info != nil && st.settled && sameFile(st.info, info) {
		return
	}
	data, err := readFile(f.Path)
	if err != nil {
		st.info = nil
		f.report(st, fmt.Errorf("discovery: endpoints file: %w; keeping the last list", err))
		return
	}
	after, err := os.Stat(f.Path)
	if err != nil || !sameFile(info, after) {
		st.info = nil // changing under our feet: read it again next poll
		return
	}
	st.info = info
	st.settled = time.Since(info.ModTime()) > settle
	sum := sha256.Sum256(data)
	if st.summed && sum == st.sum {
		return
	}
	st.sum, st.summed = sum, true
	list, err := parseEndpoints(f.Path, data)
	if err != nil {
		f.report(st, err)
		return
	}
	st.lastErr = ""
	em.send(list)
}

// report passes err to OnError unless it is the error reported last.
func (f *File) report(st *fileState, err error) {
	msg := err.Error()
	if msg == st.lastErr {
		return
	}
	st.lastErr = msg
	if f.OnError != nil {
		f.OnError(err)
	}
}

// sameFile reports whether a and b describe the same file with the same
// size and modification time.
func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func readFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileBytes)
	}
	return data, nil
}

// yamlLine finds the line in the YAML parser's error messages.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (?s:(.*))$`)

// yamlParserProblems are the problems yaml.v3's parser (as opposed to its
// scanner) reports. For those, the line in the message is counted from 0
// (the scanner's from 1), so it is one less than the line in the file.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// yamlError splits a YAML syntax error into the 1-based line it names (0
// when it names none) and the reason.
func yamlError(err error) (line int, reason string) {
	msg := err.Error()
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return 0, strings.TrimPrefix(msg, "yaml: ")
	}
	line, _ = strconv.Atoi(m[1])
	if slices.Contains(yamlParserProblems, m[2]) {
		line++
	}
	return line, m[2]
}

// parseEndpoints parses an endpoints file (see File). The list is in file
// order; the error is a *FileError for the first problem found.
func parseEndpoints(path string, data []byte) (list []balancer.Endpoint, err error) {
	fail := func(line int, format string, args ...any) error {
		return &FileError{Path: path, Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	defer func() { // the YAML parser has panicked on hostile input before
		if v := recover(); v != nil {
			list, err = nil, fail(0, "YAML parser failed: %v", v)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fail(0, "file is empty (a write in progress?); want a list of endpoints, [] for none")
		}
		line, reason := yamlError(err)
		return nil, fail(line, "%s", reason)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fail(extra.Line, "want one document, a list of endpoints; a second one starts here")
	}
	root := resolveAlias(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = resolveAlias(root.Content[0])
	}
	if root.Kind != yaml.SequenceNode {
		return nil, fail(root.Line, "want a list of endpoints (- addr: host:port …), got %s", kindName(root))
	}
	if len(root.Content) > MaxEndpoints {
		return nil, fail(root.Line, "%d endpoints, more than MaxEndpoints (%d)", len(root.Content), MaxEndpoints)
	}
	list = make([]balancer.Endpoint, 0, len(root.Content))
	first := make(map[string]int, len(root.Content)) // addr → line
	for _, item := range root.Content {
		item = resolveAlias(item)
		if item.Kind != yaml.MappingNode {
			return nil, fail(item.Line, "want an endpoint mapping {addr, weight, meta}, got %s", kindName(item))
		}
		var e balancer.Endpoint
		var addrNode *yaml.Node
		seen := map[string]int{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, v := item.Content[j], resolveAlias(item.Content[j+1])
			if line, dup := seen[k.Value]; dup {
				return nil, fail(k.Line, "%s is set twice (first at line %d)", k.Value, line)
			}
			seen[k.Value] = k.Line
			switch k.Value {
			case "addr":
				if !isString(v) || v.Value == "" {
					return nil, fail(v.Line, "addr: want a non-empty string host:port")
				}
				if _, port, err := net.SplitHostPort(v.Value); err != nil {
					return nil, fail(v.Line, "addr %q: %v", v.Value, err)
				} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
					return nil, fail(v.Line, "addr %q: port must be a number in [1, 65535]", v.Value)
				}
				e.Addr, addrNode = v.Value, v
			case "weight":
				n, err := strconv.Atoi(v.Value)
				if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil || n < 1 || n > MaxWeight {
					return nil, fail(v.Line, "weight: want an integer in [1, %d] (leave it out for 1), got %q", MaxWeight, v.Value)
				}
				e.Weight = n
			case "meta":
				m, err := parseMeta(v, fail)
				if err != nil {
					return nil, err
				}
				e.Meta = m
			default:
				return nil, fail(k.Line, "unknown key %q (want addr, weight, meta)", k.Value)
			}
		}
		if addrNode == nil {
			return nil, fail(item.Line, "endpoint without addr")
		}
		if line, dup := first[e.Addr]; dup {
			return nil, fail(addrNode.Line, "addr %q is listed twice (first at line %d)", e.Addr, line)
		}
		first[e.Addr] = addrNode.Line
		list = append(list, e)
	}
	return list, nil
}

// parseMeta reads a mapping of labels; scalar values are taken as text.
func parseMeta(n *yaml.Node, fail func(int, string, ...any) error) (map[string]string, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fail(n.Line, "meta: want a mapping of labels, got %s", kindName(n))
	}
	m := make(map[string]string, len(n.Content)/2)
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], resolveAlias(n.Content[j+1])
		if !isString(k) {
			return nil, fail(k.Line, "meta: keys must be strings, got %s", kindName(k))
		}
		if _, dup := m[k.Value]; dup {
			return nil, fail(k.Line, "meta: %s is set twice", k.Value)
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, fail(v.Line, "meta %s: want a text value, got %s", k.Value, kindName(v))
		}
		m[k.Value] = v.Value
	}
	return m, nil
}

// resolveAlias follows YAML aliases (*name) to the node they stand for.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isString(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!str" }

// kindName describes a node for error messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}
