package gateway

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/filewatch"
)

// watcher follows the configuration file (reload.watch) and the
// listeners' certificate files (always): a changed config file reloads
// the configuration, a changed certificate file only the certificates.
type watcher struct {
	g      *Gateway
	fw     *filewatch.Watcher
	file   string      // the config file, absolute ("" for none)
	follow atomic.Bool // reload.watch of the current configuration
	cancel context.CancelFunc
	done   chan struct{}
}

// startWatch starts following cfg's files. The caller holds g.mu.
func (g *Gateway) startWatch(cfg *config.Config) error {
	w := &watcher{g: g}
	if cfg.File() != "" {
		if abs, err := filepath.Abs(cfg.File()); err == nil {
			w.file = abs
		}
	}
	paths := w.paths(cfg)
	fw, err := filewatch.New(paths, filewatch.Options{Debounce: cfg.Reload.Debounce.D(), Logger: g.log})
	if err != nil {
		return err
	}
	w.fw = fw
	ctx, cancel := context.WithCancel(g.ctx)
	w.cancel, w.done = cancel, make(chan struct{})
	g.watch = w
	go func() {
		defer close(w.done)
		fw.Run(ctx, w.changed)
	}()
	return nil
}

// paths lists what cfg's gateway follows.
func (w *watcher) paths(cfg *config.Config) []string {
	var out []string
	w.follow.Store(cfg.Reload.Watch && w.file != "")
	if w.follow.Load() {
		out = append(out, w.file)
	}
	for i := range cfg.Listeners {
		for _, f := range cfg.Listeners[i].CertificateFiles() {
			for _, p := range []string{f.Cert, f.Key} {
				if p != "" && !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// set follows the files of a reloaded configuration.
func (w *watcher) set(cfg *config.Config) {
	if w == nil {
		return
	}
	w.fw.Set(w.paths(cfg))
}

func (w *watcher) changed(paths []string) {
	if w.follow.Load() && slices.Contains(paths, w.file) {
		// A reload swaps the certificates too (refresh); a refused one
		// must not lose a certificate change of the same burst.
		if w.g.Reload("watch") == nil {
			return
		}
	}
	w.g.reloadCertificates()
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// reloadCertificates re-reads every listener's certificate files; a pair
// that fails keeps the old certificate serving (certstore logs why).
func (g *Gateway) reloadCertificates() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.socks {
		if s.certs != nil {
			_ = s.certs.Reload()
		}
	}
}
