package filewatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// twoFiles makes a directory with a.conf and b.conf and returns their paths.
func twoFiles(t *testing.T) (string, string) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.conf"), filepath.Join(dir, "b.conf")
	write(t, a, "a1")
	write(t, b, "b1")
	return a, b
}

func TestPlainWrite(t *testing.T) {
	checkLeaks(t)
	a, b := twoFiles(t)
	r := start(t, []string{a, b}, Options{})
	write(t, a, "a2") // truncate then write, as cp does
	r.expect(t, a)
	write(t, b, "b2, longer")
	r.expect(t, b)
}

func TestRenameOver(t *testing.T) {
	checkLeaks(t)
	a, b := twoFiles(t)
	r := start(t, []string{a, b}, Options{})
	renameOver(t, a, "a2")
	r.expect(t, a)
	renameOver(t, a, "a3") // the directory watch survives the first rename
	r.expect(t, a)
}

func TestConfigMapSwap(t *testing.T) {
	checkLeaks(t)
	m := newConfigMap(t, map[string]string{"config.yaml": "v1", "other.yaml": "x1"})
	path := filepath.Join(m.dir, "config.yaml")
	r := start(t, []string{path}, Options{})
	for i := 2; i <= 4; i++ {
		m.publish(map[string]string{"config.yaml": fmt.Sprintf("v%d", i), "other.yaml": "x1"})
		r.expect(t, path)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "v4" {
		t.Fatalf("the layout is wrong: %s reads %q, %v", path, got, err)
	}
}

// TestWatchesBounded: one watch per distinct directory, and a ConfigMap's
// swaps do not pile up watches on its old timestamped directories.
func TestWatchesBounded(t *testing.T) {
	checkLeaks(t)
	plain := t.TempDir()
	var paths []string
	for _, name := range []string{"x", "y", "z"} {
		p := filepath.Join(plain, name)
		write(t, p, name)
		paths = append(paths, p)
	}
	m := newConfigMap(t, map[string]string{"tls.crt": "c1", "tls.key": "k1"})
	paths = append(paths, filepath.Join(m.dir, "tls.crt"), filepath.Join(m.dir, "tls.key"))
	r := start(t, paths, Options{})
	for i := 2; i <= 5; i++ {
		m.publish(map[string]string{"tls.crt": fmt.Sprintf("c%d", i), "tls.key": fmt.Sprintf("k%d", i)})
		r.expect(t, paths[3], paths[4])
		ts, err := os.Readlink(filepath.Join(m.dir, "..data"))
		if err != nil {
			t.Fatal(err)
		}
		// the plain directory, the ConfigMap's and its current timestamped one
		want := []string{plain, m.dir, filepath.Join(m.dir, ts)}
		if got := r.w.Watched(); !sameSet(got, want) {
			t.Fatalf("after swap %d watching %q, want %q", i, got, want)
		}
	}
}

func TestUnrelatedFileIgnored(t *testing.T) {
	checkLeaks(t)
	a, b := twoFiles(t)
	r := start(t, []string{a, b}, Options{})
	dir := filepath.Dir(a)
	write(t, filepath.Join(dir, "unrelated"), "u")
	renameOver(t, filepath.Join(dir, "unrelated"), "u2")
	if err := os.Remove(filepath.Join(dir, "unrelated")); err != nil {
		t.Fatal(err)
	}
	settle()
	write(t, b, "b2") // its callback must be the first one
	r.expect(t, b)
}

// TestBurstOneCallback: ten writes in a row are one burst, re-read once.
// The debounce is long (500 ms) so that a stalled test process cannot
// split the burst.
func TestBurstOneCallback(t *testing.T) {
	checkLeaks(t)
	a, b := twoFiles(t)
	r := start(t, []string{a, b}, Options{Debounce: 500 * time.Millisecond})
	for i := range 10 {
		write(t, a, fmt.Sprintf("a%d", i))
	}
	r.expect(t, a)
	write(t, b, "b2") // a second callback for a would come before this one
	r.expect(t, b)
}

func TestDeletedThenRecreated(t *testing.T) {
	checkLeaks(t)
	a, b := twoFiles(t)
	r := start(t, []string{a, b}, Options{})
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	settle()
	write(t, b, "b2") // the deletion alone is no change: b's callback comes first
	r.expect(t, b)
	write(t, a, "a2")
	r.expect(t, a)
}

// TestSymlinkElsewhere: a path that is a symlink into another directory
// follows writes made in place in that directory.
func TestSymlinkElsewhere(t *testing.T) {
	checkLeaks(t)
	target := filepath.Join(t.TempDir(), "cert.pem")
	write(t, target, "c1")
	link := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	r := start(t, []string{link}, Options{})
	write(t, target, "c2")
	r.expect(t, link)
}

func TestSetChangesTheSet(t *testing.T) {
	checkLeaks(t)
	a, _ := twoFiles(t)
	dir2 := t.TempDir()
	b, c := filepath.Join(dir2, "b"), filepath.Join(dir2, "c")
	write(t, b, "b1")
	r := start(t, []string{a}, Options{})
	if err := r.w.Set([]string{b, c}); err != nil { // c does not exist yet
		t.Fatal(err)
	}
	if got := r.w.Watched(); !sameSet(got, []string{dir2}) {
		t.Fatalf("watching %q after Set, want only %q", got, dir2)
	}
	write(t, a, "a2") // no longer watched
	write(t, b, "b2")
	r.expect(t, b)
	write(t, c, "c1")
	r.expect(t, c)
}

// TestPollRetriesMissingDirectory: a path whose directory does not exist
// yet cannot be watched; Poll finds it once it appears.
func TestPollRetriesMissingDirectory(t *testing.T) {
	checkLeaks(t)
	a, _ := twoFiles(t)
	later := filepath.Join(t.TempDir(), "later")
	c := filepath.Join(later, "c")
	r := start(t, []string{a}, Options{Poll: 50 * time.Millisecond})
	if err := r.w.Set([]string{a, c}); err == nil {
		t.Fatal("Set with a missing directory: no error")
	}
	if err := os.Mkdir(later, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, c, "c1")
	r.expect(t, c)
	write(t, c, "c2") // watched by now: the event path
	r.expect(t, c)
}

func TestNewRefusesMissingDirectory(t *testing.T) {
	checkLeaks(t)
	w, err := New([]string{filepath.Join(t.TempDir(), "no", "such")}, Options{})
	if err == nil {
		w.Close()
		t.Fatal("New with a missing directory: no error")
	}
}

func TestClosed(t *testing.T) {
	checkLeaks(t)
	a, _ := twoFiles(t)
	w, err := New([]string{a}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Set([]string{a}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close: %v, want ErrClosed", err)
	}
}

func sameSet(got, want []string) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}
