package discovery

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
)

// writeFile replaces path atomically, as the File documentation advises.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startFile runs a File source on path with a stepper and a recorder, and
// waits for its first poll.
func startFile(t *testing.T, path string) (*stepper, *recorder) {
	t.Helper()
	r := &recorder{}
	st := newStepper()
	run(t, &File{Path: path, OnError: r.onError, sleep: st.sleep}, r.update)
	if got := st.next(t); got != DefaultPoll {
		t.Fatalf("polls every %v, want DefaultPoll %v", got, DefaultPoll)
	}
	return st, r
}

// poll lets the source poll once more and returns what it reported.
func poll(t *testing.T, st *stepper, r *recorder) ([][]balancer.Endpoint, []error) {
	t.Helper()
	st.step()
	st.next(t)
	return r.take()
}

func TestFileCreateAndChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	writeFile(t, path, `
- addr: 10.0.0.2:80
  weight: 3
  meta: {zone: eu-1a, canary: true}
- addr: 10.0.0.1:80
`)
	st, r := startFile(t, path)
	want := []balancer.Endpoint{
		ep("10.0.0.1:80", 0),
		{Addr: "10.0.0.2:80", Weight: 3, Meta: map[string]string{"zone": "eu-1a", "canary": "true"}},
	}
	if lists, errs := r.take(); len(lists) != 1 || !reflect.DeepEqual(lists[0], want) || len(errs) != 0 {
		t.Fatalf("first poll: lists %v errors %v, want %v", lists, errs, want)
	}

	writeFile(t, path, `[{"addr": "10.0.0.1:80"}, {"addr": "10.0.0.3:80", "weight": 2}]`) // JSON
	want = []balancer.Endpoint{ep("10.0.0.1:80", 0), ep("10.0.0.3:80", 2)}
	if lists, errs := poll(t, st, r); len(lists) != 1 || !reflect.DeepEqual(lists[0], want) || len(errs) != 0 {
		t.Fatalf("after the change: lists %v errors %v, want %v", lists, errs, want)
	}

	if lists, errs := poll(t, st, r); len(lists) != 0 || len(errs) != 0 {
		t.Fatalf("nothing changed: lists %v errors %v, want nothing", lists, errs)
	}

	// The same endpoints written differently: parsed again, not re-sent.
	writeFile(t, path, "- {addr: 10.0.0.3:80, weight: 2}\n- addr: 10.0.0.1:80\n")
	if lists, errs := poll(t, st, r); len(lists) != 0 || len(errs) != 0 {
		t.Fatalf("same list reformatted: lists %v errors %v, want nothing", lists, errs)
	}

	writeFile(t, path, "[]\n") // deliberately empty
	if lists, errs := poll(t, st, r); len(lists) != 1 || len(lists[0]) != 0 || len(errs) != 0 {
		t.Fatalf("[]: lists %v errors %v, want one empty list", lists, errs)
	}
}

func TestFileBadContentKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	writeFile(t, path, "- addr: 10.0.0.1:80\n")
	st, r := startFile(t, path)
	r.take()

	writeFile(t, path, "- addr: 10.0.0.1:80\n- addr: 10.0.0.2:80\n  weight: -1\n")
	lists, errs := poll(t, st, r)
	var fe *FileError
	if len(lists) != 0 || len(errs) != 1 || !errors.As(errs[0], &fe) || fe.Line != 3 || fe.Path != path {
		t.Fatalf("bad weight: lists %v errors %v, want no list and a *FileError at line 3", lists, errs)
	}
	if msg := errs[0].Error(); !strings.HasPrefix(msg, path+":3: weight") {
		t.Fatalf("error %q, want it to start with %q", msg, path+":3: weight")
	}
	if lists, errs := poll(t, st, r); len(lists) != 0 || len(errs) != 0 {
		t.Fatalf("still bad, unchanged: lists %v errors %v, want nothing (reported once)", lists, errs)
	}

	writeFile(t, path, "") // a truncating writer caught mid-write
	if lists, errs := poll(t, st, r); len(lists) != 0 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "empty") {
		t.Fatalf("empty file: lists %v errors %v, want no list and an error", lists, errs)
	}

	writeFile(t, path, "- addr: 10.0.0.2:80\n")
	if lists, errs := poll(t, st, r); len(lists) != 1 || !reflect.DeepEqual(lists[0], []balancer.Endpoint{ep("10.0.0.2:80", 0)}) || len(errs) != 0 {
		t.Fatalf("fixed: lists %v errors %v", lists, errs)
	}
}

func TestFileRemovedKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	writeFile(t, path, "- addr: 10.0.0.1:80\n")
	st, r := startFile(t, path)
	r.take()

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if lists, errs := poll(t, st, r); len(lists) != 0 || len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) {
		t.Fatalf("removed: lists %v errors %v, want no list and fs.ErrNotExist", lists, errs)
	}
	if lists, errs := poll(t, st, r); len(lists) != 0 || len(errs) != 0 {
		t.Fatalf("still removed: lists %v errors %v, want nothing (reported once)", lists, errs)
	}

	writeFile(t, path, "- addr: 10.0.0.1:80\n") // back, unchanged: nothing to send
	if lists, errs := poll(t, st, r); len(lists) != 0 || len(errs) != 0 {
		t.Fatalf("restored unchanged: lists %v errors %v, want nothing", lists, errs)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	poll(t, st, r)
	writeFile(t, path, "- addr: 10.0.0.5:80\n")
	if lists, errs := poll(t, st, r); len(lists) != 1 || !reflect.DeepEqual(lists[0], []balancer.Endpoint{ep("10.0.0.5:80", 0)}) || len(errs) != 0 {
		t.Fatalf("restored changed: lists %v errors %v", lists, errs)
	}
}

func TestFileMissingAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	st, r := startFile(t, path)
	if lists, errs := r.take(); len(lists) != 0 || len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) {
		t.Fatalf("missing: lists %v errors %v, want no list and fs.ErrNotExist", lists, errs)
	}
	writeFile(t, path, "- addr: 10.0.0.1:80\n")
	if lists, errs := poll(t, st, r); len(lists) != 1 || len(errs) != 0 {
		t.Fatalf("created: lists %v errors %v, want one list", lists, errs)
	}
}

// TestFileSameSizeRewrite: a rewrite that keeps the size and the mtime is
// caught while the mtime is recent, through the content hash; once the file
// has settled, an unchanged stat is trusted and the file is not read.
func TestFileSameSizeRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	if err := os.WriteFile(path, []byte("- addr: 10.0.0.1:80\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, r := startFile(t, path)
	r.take()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(content string, mtime time.Time) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	rewrite("- addr: 10.0.0.2:80\n", info.ModTime())
	if lists, _ := poll(t, st, r); len(lists) != 1 || lists[0][0].Addr != "10.0.0.2:80" {
		t.Fatalf("recent same-size rewrite: lists %v, want the new list", lists)
	}

	old := time.Now().Add(-time.Hour)
	rewrite("- addr: 10.0.0.3:80\n", old)
	if lists, _ := poll(t, st, r); len(lists) != 1 || lists[0][0].Addr != "10.0.0.3:80" {
		t.Fatalf("mtime changed: lists %v, want the new list", lists)
	}
	rewrite("- addr: 10.0.0.4:80\n", old)
	if lists, _ := poll(t, st, r); len(lists) != 0 {
		t.Fatalf("settled file, same size and mtime: lists %v, want the file not read", lists)
	}
}

func TestFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "endpoints.yaml")
	writeFile(t, path, "- addr: 10.0.0.1:80\n")
	st, r := startFile(t, path)
	r.take()
	writeFile(t, path, "- addr: 10.0.0.2:80\n"+strings.Repeat("#", MaxFileBytes))
	if lists, errs := poll(t, st, r); len(lists) != 0 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "larger than") {
		t.Fatalf("oversized: lists %v errors %v, want no list and a size error", lists, errs)
	}
}

func TestParseEndpoints(t *testing.T) {
	got, err := parseEndpoints("f", []byte(`# endpoints
- addr: "[2001:db8::1]:443"
  weight: 1000000
  meta: &eu
    zone: a
    rack: 7
- addr: b.example.com:80
  meta: ~
- addr: c.example.com:80
  meta: *eu
`))
	want := []balancer.Endpoint{
		{Addr: "[2001:db8::1]:443", Weight: MaxWeight, Meta: map[string]string{"zone": "a", "rack": "7"}},
		{Addr: "b.example.com:80"},
		{Addr: "c.example.com:80", Meta: map[string]string{"zone": "a", "rack": "7"}},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("parseEndpoints = %v, %v; want %v", got, err, want)
	}
}

func TestParseEndpointsErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		line     int
		reason   string // a part of the reason
	}{
		{"empty", "", 0, "empty"},
		{"comments only", "# nothing yet\n", 0, "empty"},
		{"unclosed flow list", "- addr: a:1\n- addr: [b:1\n", 2, "did not find expected ',' or ']'"},
		{"bad indentation", "- addr: a:1\n  weight: 2\n meta: {}\n", 3, "did not find expected '-' indicator"},
		{"tab", "- addr: a:1\n\tweight: 2\n", 2, "tab character"},
		{"mapping value in scalar", "- addr: a:1\n- addr: b: 1\n", 2, "mapping values are not allowed"},
		{"mapping at top", "endpoints:\n  - addr: a:1\n", 1, "want a list"},
		{"null", "~\n", 1, "want a list"},
		{"scalar item", "- addr: a:1\n- b:2\n", 2, "want an endpoint mapping"},
		{"unknown key", "- addr: a:1\n  wieght: 2\n", 2, `unknown key "wieght"`},
		{"key twice", "- addr: a:1\n  addr: b:1\n", 2, "addr is set twice (first at line 1)"},
		{"no addr", "- addr: a:1\n- weight: 2\n", 2, "without addr"},
		{"addr not a string", "- addr: 80\n", 1, "addr: want a non-empty string"},
		{"addr without port", "- addr: 10.0.0.1\n", 1, "missing port"},
		{"addr with bad port", "- addr: a:http\n", 1, "port must be a number"},
		{"addr with port 0", "- addr: a:0\n", 1, "port must be a number"},
		{"duplicate addr", "- addr: a:1\n- addr: b:1\n- addr: a:1\n", 3, "listed twice (first at line 1)"},
		{"weight 0", "- addr: a:1\n  weight: 0\n", 2, "weight: want an integer"},
		{"weight too big", "- addr: a:1\n  weight: 1000001\n", 2, "weight: want an integer"},
		{"weight quoted", "- addr: a:1\n  weight: \"2\"\n", 2, "weight: want an integer"},
		{"weight float", "- addr: a:1\n  weight: 1.5\n", 2, "weight: want an integer"},
		{"meta list", "- addr: a:1\n  meta: [a, b]\n", 2, "meta: want a mapping"},
		{"meta nested", "- addr: a:1\n  meta:\n    zone: {x: 1}\n", 3, "meta zone: want a text value"},
		{"two documents", "- addr: a:1\n---\n- addr: b:1\n", 2, "second one"},
		{"JSON missing comma", "[{\"addr\": \"a:1\"}\n {\"addr\": \"b:1\"}]\n", 2, "did not find expected ',' or ']'"},
		{"JSON unclosed string", "[\n {\"addr\": \"a:1}\n]\n", 2, "found unexpected end of stream"},
	} {
		_, err := parseEndpoints("eps.yaml", []byte(tc.in))
		var fe *FileError
		if !errors.As(err, &fe) {
			t.Errorf("%s: err = %v, want a *FileError", tc.name, err)
			continue
		}
		if fe.Line != tc.line || fe.Path != "eps.yaml" || !strings.Contains(fe.Reason, tc.reason) {
			t.Errorf("%s: %v; want line %d and a reason containing %q", tc.name, err, tc.line, tc.reason)
		}
	}
}

func TestFileConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		f     File
		field string
	}{
		{File{}, "File.Path"},
		{File{Path: "x", Poll: -time.Second}, "File.Poll"},
	} {
		err := tc.f.Run(context.Background(), func([]balancer.Endpoint) {})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: Run = %v, want a *ConfigError for %s", tc.f, err, tc.field)
		}
	}
	if err := (&File{Path: "x"}).Run(context.Background(), nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil update: Run = %v, want ErrConfig", err)
	}
}
