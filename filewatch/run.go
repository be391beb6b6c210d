package filewatch

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// burst is the pending work between an event and its re-check: the
// directories that had events (a set, bounded by maxDirty) and when the
// burst began. Owned by Run's goroutine.
type burst struct {
	dirty map[string]struct{}
	all   bool      // re-check every path (overflow, or dirty full)
	first time.Time // zero: nothing pending
}

func (b *burst) mark(dir string) {
	if _, ok := b.dirty[dir]; ok {
		return
	}
	if len(b.dirty) >= maxDirty {
		b.all = true
		return
	}
	b.dirty[dir] = struct{}{}
}

func (b *burst) reset() {
	clear(b.dirty)
	b.all = false
	b.first = time.Time{}
}

// Run follows the files until ctx ends or Close is called, then closes
// the Watcher; it returns nil then, or the error that stopped fsnotify.
// fn is called from Run's goroutine, once per debounced burst (and per
// Poll), with the paths whose identity changed, as given to New or Set,
// never with none. While fn runs, events wait in the kernel's queue; if it
// overflows, every path is re-read afterwards. Run may be called once.
func (w *Watcher) Run(ctx context.Context, fn func(changed []string)) error {
	defer w.Close()
	stop := context.AfterFunc(ctx, func() { _ = w.Close() })
	defer stop()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var tick <-chan time.Time
	if w.opts.Poll > 0 {
		t := time.NewTicker(w.opts.Poll)
		defer t.Stop()
		tick = t.C
	}
	b := &burst{dirty: make(map[string]struct{})}
	for {
		select {
		case ev, ok := <-w.fs.Events:
			if !ok {
				return w.stopped(ctx)
			}
			// ev.Name is dir/name, or a watched directory itself
			// (removed or renamed): mark both.
			b.mark(filepath.Dir(ev.Name))
			b.mark(filepath.Clean(ev.Name))
			w.arm(timer, b)
		case err, ok := <-w.fs.Errors:
			if !ok {
				return w.stopped(ctx)
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				b.all = true
				w.arm(timer, b)
				continue
			}
			w.log.Warn("filewatch: watch error", "err", err)
		case <-timer.C:
			w.fire(fn, b.all, b.dirty)
			b.reset()
		case <-tick:
			w.fire(fn, true, nil)
		}
	}
}

// stopped says why the fsnotify channels closed: ctx or Close (nil), or a
// failure of fsnotify itself.
func (w *Watcher) stopped(ctx context.Context) error {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed || ctx.Err() != nil {
		return nil
	}
	return ErrClosed
}

// arm (re)starts the quiet-time timer of the pending burst, bounded by
// maxWaitFactor × Debounce from the burst's first event.
func (w *Watcher) arm(timer *time.Timer, b *burst) {
	now := time.Now()
	if b.first.IsZero() {
		b.first = now
	}
	wait := min(w.opts.Debounce, b.first.Add(maxWaitFactor*w.opts.Debounce).Sub(now))
	timer.Reset(max(wait, 0))
}

func (w *Watcher) fire(fn func([]string), all bool, dirty map[string]struct{}) {
	if changed := w.check(all, dirty); len(changed) > 0 {
		fn(changed)
	}
}
