package loadgen

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxBodyFile bounds a body read from a file.
const maxBodyFile = 64 << 20

// ParseTargets reads a targets file; name is its path, for messages and
// for body files (relative to its directory). One target per block, blocks
// separated by blank lines, # starting a comment line:
//
//	GET http://127.0.0.1:8080/users/{{user}} weight=3
//	Authorization: Bearer abc
//
//	POST http://127.0.0.1:8080/orders
//	Content-Type: application/json
//	@order.json
//
//	POST http://127.0.0.1:8080/search
//	<<
//	{"q": "spillway", "page": {{seq}}}
//	>>
//
// The first line is METHOD URL, optionally weight=N (the target's share
// among targets; default 1). Header lines "Name: value" follow. The body, if
// any, ends the block: @path (a file) or << followed by inline lines up to a
// line >> (joined with newlines, without a final one). URL, header values
// and body may hold {{name}} variables. Errors wrap ErrConfig and read
// "file:line: reason".
func ParseTargets(name string, data []byte) ([]Target, error) {
	p := targetParser{name: name, lines: strings.Split(string(data), "\n")}
	for i := range p.lines {
		p.lines[i] = strings.TrimSuffix(p.lines[i], "\r")
	}
	var targets []Target
	for {
		t, ok, err := p.block()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		return nil, configErr("%s: no targets (want METHOD URL lines)", name)
	}
	return targets, nil
}

type targetParser struct {
	name  string
	lines []string
	i     int // the next line, 0-based
}

func (p *targetParser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("%w: %s:%d: %s", ErrConfig, p.name, line+1, fmt.Sprintf(format, args...))
}

func blankOrComment(s string) (blank, comment bool) {
	s = strings.TrimSpace(s)
	return s == "", strings.HasPrefix(s, "#")
}

// block reads the next target; false at the end of the file.
func (p *targetParser) block() (Target, bool, error) {
	for p.i < len(p.lines) {
		if blank, comment := blankOrComment(p.lines[p.i]); !blank && !comment {
			break
		}
		p.i++
	}
	if p.i == len(p.lines) {
		return Target{}, false, nil
	}
	t, err := p.requestLine(p.i)
	if err != nil {
		return t, false, err
	}
	for p.i++; p.i < len(p.lines); p.i++ {
		line := strings.TrimSpace(p.lines[p.i])
		blank, comment := blankOrComment(line)
		switch {
		case blank:
			return t, true, nil
		case comment:
		case strings.HasPrefix(line, "@"):
			err = p.bodyFile(&t, p.i, line[1:])
		case line == "<<":
			err = p.inlineBody(&t)
		default:
			err = p.header(&t, p.i, line)
		}
		if err != nil {
			return t, false, err
		}
		if t.Body != nil {
			return t, true, p.endOfBlock()
		}
	}
	return t, true, nil
}

// requestLine reads "METHOD URL [weight=N]".
func (p *targetParser) requestLine(n int) (Target, error) {
	f := strings.Fields(p.lines[n])
	if len(f) < 2 || len(f) > 3 {
		return Target{}, p.errorf(n, "want METHOD URL [weight=N], got %q", strings.TrimSpace(p.lines[n]))
	}
	t := Target{Method: f[0], URL: f[1], Header: make(http.Header)}
	if !validToken(t.Method) {
		return t, p.errorf(n, "%q is not an HTTP method", t.Method)
	}
	u, err := compile(t.URL, nil)
	if err == nil {
		err = checkURL(string(u.render(nil, nil, 0)))
	}
	if err != nil {
		return t, p.errorf(n, "%v", err)
	}
	if len(f) == 3 {
		w, ok := strings.CutPrefix(f[2], "weight=")
		v, err := strconv.ParseFloat(w, 64)
		if !ok || err != nil || !(v > 0 && v < 1e12) {
			return t, p.errorf(n, "%q: want weight=N with N a number > 0", f[2])
		}
		t.Weight = v
	}
	return t, nil
}

// header reads "Name: value".
func (p *targetParser) header(t *Target, n int, line string) error {
	name, value, ok := strings.Cut(line, ":")
	if !ok || !validToken(name) {
		return p.errorf(n, "%q: want a header line Name: value, a body (@file or <<), or a blank line before the next target", line)
	}
	value = strings.TrimSpace(value)
	if !validHeaderValue(value) {
		return p.errorf(n, "header %s: the value holds control characters", name)
	}
	t.Header.Add(name, value)
	return nil
}

// bodyFile reads @path, relative to the targets file's directory.
func (p *targetParser) bodyFile(t *Target, n int, path string) error {
	path = strings.TrimSpace(path)
	if path == "" {
		return p.errorf(n, "@ without a file name")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(p.name), path)
	}
	info, err := os.Stat(path)
	if err == nil && info.Size() > maxBodyFile {
		err = fmt.Errorf("%s is %d bytes, above %d", path, info.Size(), maxBodyFile)
	}
	if err == nil {
		t.Body, err = os.ReadFile(path)
	}
	if err != nil {
		return p.errorf(n, "body: %v", err)
	}
	if t.Body == nil {
		t.Body = []byte{}
	}
	return nil
}

// inlineBody reads the lines after << up to >>.
func (p *targetParser) inlineBody(t *Target) error {
	open := p.i
	for p.i++; p.i < len(p.lines); p.i++ {
		if strings.TrimSpace(p.lines[p.i]) == ">>" {
			t.Body = append([]byte{}, strings.Join(p.lines[open+1:p.i], "\n")...)
			return nil
		}
	}
	return p.errorf(open, "the body opened by << has no line >> to close it")
}

// endOfBlock checks that only comments follow a body before the blank line
// or the end of the file.
func (p *targetParser) endOfBlock() error {
	for p.i++; p.i < len(p.lines); p.i++ {
		blank, comment := blankOrComment(p.lines[p.i])
		if blank {
			return nil
		}
		if !comment {
			return p.errorf(p.i, "%q after the body: a body ends its target (leave a blank line before the next)", strings.TrimSpace(p.lines[p.i]))
		}
	}
	return nil
}
