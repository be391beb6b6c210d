package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// DefaultMaxProblems is the number of problems a Reader keeps when
// Reader.Max is 0.
const DefaultMaxProblems = 20

// Reader reads one file and collects its problems. Set File (and Wrap,
// Max), call Parse, walk the tree with the helpers, then Err. A Reader is
// not safe for concurrent use.
type Reader struct {
	File string // the name every problem starts with
	Wrap error  // what every problem's Unwrap returns (a package's ErrInvalid); may be nil
	Max  int    // problems kept; more are only counted (0: DefaultMaxProblems)

	errs []*Error
	more int
}

// Parse parses data as exactly one YAML document (JSON is read as YAML) and
// returns the document node, or nil after reporting why not: a syntax
// error at the line and column of the problem (see the package doc), an
// empty file, or a second document. Callers bound the size of data.
func (r *Reader) Parse(data []byte) *yaml.Node {
	doc, err := decodeOne(data)
	switch {
	case errors.Is(err, io.EOF):
		r.ProblemAt(0, 0, "empty file")
		return nil
	case err != nil:
		s := locate(data, err)
		r.ProblemAt(s.line, s.column, "%s", s.msg)
		return nil
	case doc.extra != nil:
		r.Problem(doc.extra, "one document per file; a second one starts here")
		return nil
	}
	return doc.root
}

type decoded struct{ root, extra *yaml.Node }

// decodeOne decodes the first document of data and reports a second one.
func decodeOne(data []byte) (d decoded, err error) {
	defer func() {
		if v := recover(); v != nil { // never let a parser bug take the caller down
			d, err = decoded{}, fmt.Errorf("yaml: parser failed: %v", v)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		return d, err
	}
	d.root = &root
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return decoded{}, err
	default:
		d.extra = &extra
	}
	return d, nil
}

// Problem reports a problem at node n (nil: no position).
func (r *Reader) Problem(n *yaml.Node, format string, args ...any) {
	var line, col int
	if n != nil {
		line, col = n.Line, n.Column
	}
	r.ProblemAt(line, col, format, args...)
}

// ProblemAt reports a problem at a line and column (0: unknown).
func (r *Reader) ProblemAt(line, col int, format string, args ...any) {
	if r.Full() {
		r.more++
		return
	}
	r.errs = append(r.errs, &Error{File: r.File, Line: line, Column: col, Msg: fmt.Sprintf(format, args...), Err: r.Wrap})
}

// Full reports whether the Reader holds as many problems as it keeps; a
// walker may then stop looking.
func (r *Reader) Full() bool {
	max := r.Max
	if max <= 0 {
		max = DefaultMaxProblems
	}
	return len(r.errs) >= max
}

// Count returns the number of problems found so far, kept or not.
func (r *Reader) Count() int { return len(r.errs) + r.more }

// Skip counts one problem that is not described (a walker that stops early
// because the Reader is full says how much it skipped).
func (r *Reader) Skip() { r.more++ }

// Err returns nil when no problem was found, else a *FileError.
func (r *Reader) Err() error {
	if r.Count() == 0 {
		return nil
	}
	return &FileError{Errors: r.errs, More: r.more}
}
