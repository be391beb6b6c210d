package filewatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spillwayhq/spillway/internal/leakcheck"
)

// guard bounds every wait for something that should happen soon; it only
// fires when the code under test hangs or misses a change.
const guard = 10 * time.Second

// checkLeaks fails t, after its cleanups, if a goroutine it started (Run,
// fsnotify's reader) is still running 5 s later. Call it first.
func checkLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.Verify(t, 5*time.Second, ignore) })
}

// running is a Watcher under Run, its callbacks on a channel.
type running struct {
	w     *Watcher
	calls chan []string
}

// start watches paths with opts (Debounce 50 ms unless set) and runs the
// Watcher until t ends.
func start(t *testing.T, paths []string, opts Options) *running {
	t.Helper()
	if opts.Debounce == 0 {
		opts.Debounce = 50 * time.Millisecond
	}
	w, err := New(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &running{w: w, calls: make(chan []string, 64)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx, func(changed []string) {
			select {
			case r.calls <- slices.Clone(changed):
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(guard):
			t.Errorf("Run did not return within %v of its context's end", guard)
		}
	})
	return r
}

// next returns the next callback's paths, failing t if none comes.
func (r *running) next(t *testing.T) []string {
	t.Helper()
	select {
	case c := <-r.calls:
		return c
	case <-time.After(guard):
		t.Fatalf("no callback within %v", guard)
		return nil
	}
}

// expect fails t unless the next callback reports exactly want.
func (r *running) expect(t *testing.T, want ...string) {
	t.Helper()
	got := r.next(t)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("callback with %q, want %q", got, want)
	}
}

// settle waits long enough for a burst to have been re-read (several
// debounces). Tests never rely on it for correctness: after it they make
// a change whose callback must come next and alone, which a wrongful
// earlier callback would precede.
func settle() { time.Sleep(300 * time.Millisecond) }

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renameOver writes content to a temporary file beside path and renames
// it over path, as editors do.
func renameOver(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".swp")
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// configMap is a directory laid out as the kubelet lays out a ConfigMap
// volume: name -> ..data/name, ..data -> ..<timestamp>, the files in the
// timestamped directory.
type configMap struct {
	t   *testing.T
	dir string
	gen int
}

func newConfigMap(t *testing.T, files map[string]string) *configMap {
	m := &configMap{t: t, dir: t.TempDir()}
	m.publish(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(m.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// publish writes a new timestamped directory, renames a ..data_tmp
// symlink to it over ..data, and removes the previous directory: the
// kubelet's atomic writer's steps.
func (m *configMap) publish(files map[string]string) {
	t := m.t
	m.gen++
	ts := fmt.Sprintf("..2026_12_01_09_00_00.%09d", m.gen)
	if err := os.Mkdir(filepath.Join(m.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		write(t, filepath.Join(m.dir, ts, name), content)
	}
	old, _ := os.Readlink(filepath.Join(m.dir, "..data"))
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(m.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}
