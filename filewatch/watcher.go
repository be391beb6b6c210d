package filewatch

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is the quiet time used when Options.Debounce is zero.
const DefaultDebounce = 100 * time.Millisecond

// maxWaitFactor bounds how long a burst may keep postponing its re-check:
// a directory that never goes quiet (a busy /tmp) is still re-checked every
// maxWaitFactor × Debounce.
const maxWaitFactor = 10

// maxDirty bounds the set of directories with pending events; beyond it
// (events from directories no longer watched, in bulk) every path is
// re-checked instead.
const maxDirty = 1024

// ErrClosed is returned by Run and Set once the Watcher is closed.
var ErrClosed = errors.New("filewatch: closed")

// Options tunes a Watcher. The zero value is usable.
type Options struct {
	// Debounce is how long the watched directories must stay quiet after
	// an event before the paths are re-read (editors and the kubelet write
	// in several steps); 0: DefaultDebounce. A burst longer than ten times
	// Debounce is re-read at that point anyway.
	Debounce time.Duration
	// Logger receives watch failures and unreadable files (not changes:
	// the callback's owner logs what it does with them); nil: slog.Default().
	Logger *slog.Logger
	// Poll, when positive, re-reads every path this often whether or not
	// an event came, and retries directories that could not be watched
	// (filesystems without inotify events: NFS, some FUSE mounts; a
	// directory that did not exist yet); 0: events only.
	Poll time.Duration
}

// entry is one watched path.
type entry struct {
	given string   // as passed to New or Set; what callbacks report
	abs   string   // absolute and clean
	id    identity // last identity read; zero until first read
	bad   bool     // the last read failed (logged once per failure)
}

// Watcher follows a set of files through their directories. Make one with
// New, call Run once; Set may be called at any time, from any goroutine.
type Watcher struct {
	opts Options // immutable after New
	log  *slog.Logger
	fs   *fsnotify.Watcher

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex // guards the fields below; never held while calling back
	entries []*entry
	dirs    map[string]bool // watched directories: true watching, false Add failed
	closed  bool
}

// New watches paths (see Set) with one fsnotify watcher. It fails when
// fsnotify cannot start (the system's inotify instance limit) or a
// directory cannot be watched; the Watcher then holds nothing open.
func New(paths []string, opts Options) (*Watcher, error) {
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	fs, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("filewatch: %w", err)
	}
	w := &Watcher{opts: opts, log: log, fs: fs, dirs: map[string]bool{}}
	if err := w.Set(paths); err != nil {
		_ = w.Close()
		return nil, err
	}
	return w, nil
}

// Set replaces the watched paths (a reload may change which certificate
// files there are). A path already watched keeps its last identity; a new
// one is read now and reported only when it changes after this call (a
// change made between the caller's own read and Set is not seen). The
// directories are brought in line: watches are added for new ones and
// removed from those no path needs. A directory that cannot be watched is
// reported in the error and retried at every later re-check (every Poll
// with Options.Poll set); the paths are set either way.
func (w *Watcher) Set(paths []string) error {
	next := make([]*entry, 0, len(paths))
	seen := make(map[string]bool, len(paths))
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("filewatch: %s: %w", p, err)
		}
		if !seen[abs] {
			seen[abs] = true
			next = append(next, &entry{given: p, abs: abs})
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	old := make(map[string]*entry, len(w.entries))
	for _, e := range w.entries {
		old[e.abs] = e
	}
	for _, e := range next {
		if o := old[e.abs]; o != nil {
			e.id, e.bad = o.id, o.bad
		} else {
			e.id, _ = identify(e.abs) // a missing file starts as never read
		}
	}
	w.entries = next
	return w.syncDirsLocked()
}

// Close stops watching and releases the fsnotify watcher; Run returns.
// It is safe to call more than once.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		w.closeErr = w.fs.Close()
	})
	return w.closeErr
}

// Watched returns the directories being watched (for logs and tests).
func (w *Watcher) Watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.dirs))
	for d, ok := range w.dirs {
		if ok {
			out = append(out, d)
		}
	}
	return out
}

// dirsOf returns the directories e depends on: its own and, when it
// resolves elsewhere, the resolved file's.
func (e *entry) dirsOf() (string, string) {
	d := filepath.Dir(e.abs)
	if e.id.real == "" {
		return d, d
	}
	return d, filepath.Dir(e.id.real)
}

// syncDirsLocked adds a watch for every directory the entries need that
// has none (retrying earlier failures) and removes the others; it returns
// the failures new since the last call. w.mu is held.
func (w *Watcher) syncDirsLocked() error {
	want := make(map[string]bool, 2*len(w.entries))
	for _, e := range w.entries {
		a, b := e.dirsOf()
		want[a], want[b] = true, true
	}
	var errs []error
	for d := range want {
		if w.dirs[d] {
			continue
		}
		err := w.fs.Add(d)
		switch {
		case err == nil:
			if _, retried := w.dirs[d]; retried {
				w.log.Info("filewatch: watching directory", "dir", d)
			}
			w.dirs[d] = true
		case errors.Is(err, fsnotify.ErrClosed):
			return ErrClosed
		default:
			if _, failed := w.dirs[d]; !failed {
				w.log.Warn("filewatch: cannot watch directory", "dir", d, "err", err)
				errs = append(errs, fmt.Errorf("filewatch: watching %s: %w", d, err))
			}
			w.dirs[d] = false
		}
	}
	for d, ok := range w.dirs {
		if !want[d] {
			if ok {
				_ = w.fs.Remove(d) // fails when the directory is gone: already unwatched
			}
			delete(w.dirs, d)
		}
	}
	return errors.Join(errs...)
}

// check re-reads the entries that depend on a directory in dirty (all of
// them with all) and returns those whose identity changed, as given.
func (w *Watcher) check(all bool, dirty map[string]struct{}) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	var changed []string
	for _, e := range w.entries {
		a, b := e.dirsOf()
		_, inA := dirty[a]
		_, inB := dirty[b]
		if !all && !inA && !inB {
			continue
		}
		id, err := identify(e.abs)
		if err != nil {
			if !e.bad {
				w.log.Warn("filewatch: cannot read file; its last version stands", "path", e.given, "err", err)
			}
			e.bad = true
			continue
		}
		e.bad = false
		if id != e.id {
			e.id = id
			changed = append(changed, e.given)
		}
	}
	_ = w.syncDirsLocked() // a symlink now resolving elsewhere; retries (logged there)
	return changed
}
