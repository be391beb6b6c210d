package config

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/spillwayhq/spillway/yamlfile"
)

// MaxFileBytes bounds the size of a configuration file.
const MaxFileBytes = 1 << 20

// MaxProblems is how many problems an error lists; more are counted.
const MaxProblems = 50

// ErrInvalid is what every problem of an invalid file unwraps to:
// errors.Is(err, config.ErrInvalid) tells a bad file from one that could not
// be read.
var ErrInvalid = errors.New("config: invalid")

// Load reads, checks and returns the configuration file at path (see
// Parse). Relative file: references and discovery files are taken from
// path's directory.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse reads a configuration file, YAML or JSON, named file in errors
// (its directory is the base of relative paths in it): it expands ${ENV}
// references, reads file: references, applies the defaults and checks
// everything, then returns the Config, or nil and a *yamlfile.FileError
// listing every problem as "file:line:column: reason" (up to MaxProblems).
// It opens no socket and starts no goroutine; it reads only the files that
// file: references name.
func Parse(file string, data []byte) (*Config, error) {
	return parse(file, data, os.LookupEnv)
}

func parse(file string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	d := &decoder{Reader: &yamlfile.Reader{File: file, Wrap: ErrInvalid, Max: MaxProblems},
		pos: positions{m: make(map[any]Pos)}, dir: filepath.Dir(file), lookup: lookup, files: map[any]string{}}
	if len(data) > MaxFileBytes {
		d.Problem(nil, "file is larger than %d bytes", MaxFileBytes)
		return nil, d.Err()
	}
	root := d.Parse(data)
	if root == nil {
		return nil, d.Err()
	}
	top := yamlfile.Resolve(root)
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = yamlfile.Resolve(top.Content[0])
	}
	if top.Kind != yaml.MappingNode {
		d.Problem(top, "want a mapping with version: 1, listeners, routes and clusters, got %s", yamlfile.Describe(top))
		return nil, d.Err()
	}
	cfg := &Config{file: file, pos: &d.pos}
	d.object(top, reflect.ValueOf(cfg).Elem(), "", 0)
	(&validator{d: d, c: cfg, clean: d.Count() == 0}).config()
	if err := d.Err(); err != nil {
		return nil, inFileOrder(err, file)
	}
	return cfg, nil
}

// inFileOrder sorts the problems by position: the walker finds them in
// file order, the checks across fields afterwards. Those of file come
// first, then those of the files it names (rate-limit rules files), by
// file.
func inFileOrder(err error, file string) error {
	other := func(e *yamlfile.Error) string {
		if e.File == file {
			return ""
		}
		return e.File
	}
	if fe, ok := err.(*yamlfile.FileError); ok {
		slices.SortStableFunc(fe.Errors, func(a, b *yamlfile.Error) int {
			return cmp.Or(cmp.Compare(other(a), other(b)), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
		})
	}
	return err
}

// File returns the name the configuration was loaded from.
func (c *Config) File() string { return c.file }

// Pos returns where the value ptr points to was written in the file: ptr
// is the address of a field or element of c (&c.Listeners[0].Address,
// &c.Routes[1], &c.Clusters[0].Endpoints). ok is false for values the file
// left to their defaults, and for every value of a copy (Redacted).
func (c *Config) Pos(ptr any) (pos Pos, ok bool) { return c.pos.at(ptr) }

// Errorf returns a *yamlfile.Error at the position of the value ptr points
// to (see Pos; no position when it has none), so that problems found when
// the configuration is put to use (an address already in use) name the
// line to fix as load errors do.
func (c *Config) Errorf(ptr any, format string, args ...any) error {
	p, _ := c.Pos(ptr)
	return &yamlfile.Error{File: c.file, Line: p.Line, Column: p.Column, Msg: fmt.Sprintf(format, args...), Err: ErrInvalid}
}
