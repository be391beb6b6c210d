package yamlfile

import (
	"fmt"
	"strings"
)

// Error is one problem in a file, at a position.
type Error struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int // 1-based, in characters; 0 when unknown
	Msg    string
	// Err is what Unwrap returns: the caller's sentinel (Reader.Wrap), so
	// that errors.Is(err, ErrInvalid) holds for a package's own ErrInvalid.
	Err error
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

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// FileError is every problem found in a file, in the order found, up to the
// Reader's limit.
type FileError struct {
	Errors []*Error
	More   int // problems found beyond the limit
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

// Unwrap returns the problems, so that errors.As(err, &e) with e an *Error
// finds the first and errors.Is sees each one's Err.
func (e *FileError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, x := range e.Errors {
		out[i] = x
	}
	return out
}
