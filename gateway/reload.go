package gateway

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/yamlfile"
)

// MaxGenerations bounds the generations alive at once (the current one
// and those still serving requests they took, such as WebSockets): a
// reload beyond it is refused until older ones have drained (a max
// connection age bounds how long that takes).
const MaxGenerations = 64

// ReloadStatus is the outcome of the last configuration load.
type ReloadStatus struct {
	At         time.Time
	OK         bool
	Generation int64    // serving new requests now
	Errors     []string // the problems of a refused file, file:line:column first
	Trigger    string   // start, signal, watch, admin
}

// LastReload returns the outcome of the last load or reload.
func (g *Gateway) LastReload() ReloadStatus {
	if s := g.last.Load(); s != nil {
		return *s
	}
	return ReloadStatus{}
}

// ErrReloadRefused wraps every reason a reload did not happen; the old
// configuration keeps serving.
var ErrReloadRefused = errors.New("gateway: reload refused")

// Reload reads the configuration file again (the one Build's config was
// loaded from) and applies it (see ReloadConfig). trigger names the cause
// in the log and the status.
func (g *Gateway) Reload(trigger string) error {
	// One reload at a time from reading to applying, so that a watch, a
	// SIGHUP and an admin POST racing each other cannot leave an older
	// reading of the file serving.
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	file := g.cur.Load().cfg.File()
	cfg, err := config.Load(file)
	if err != nil {
		return g.refuse(trigger, err)
	}
	return g.ReloadConfig(cfg, trigger)
}

// ReloadConfig makes cfg serve every request that starts from now on. It
// is validated and built in full first — a problem refuses it (wrapped in
// ErrReloadRefused) and the running configuration keeps serving. Then
// listeners whose identity (address, protocol) did not change keep their
// sockets, new ones are opened (a port in use refuses the reload), removed
// ones close; clusters keep their state by identity; requests in flight
// finish on the generation they started on, which is retired when they
// are done.
func (g *Gateway) ReloadConfig(cfg *config.Config, trigger string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case !g.started || g.stopping:
		return g.refuse(trigger, errors.New("the gateway is not running"))
	case 1+len(g.old) >= MaxGenerations:
		return g.refuse(trigger, fmt.Errorf("%d generations still serve requests they took (at most %d); retry once they drain", 1+len(g.old), MaxGenerations))
	}
	prev := g.cur.Load()
	gen, err := g.buildGeneration(cfg, prev)
	if err != nil {
		return g.refuse(trigger, err)
	}
	opened, err := g.openSockets(cfg)
	if err != nil {
		return g.refuse(trigger, err)
	}
	if g.metrics != nil {
		g.observe(gen) // after the last refusal: a Gen counts as live until retired
	}
	if cfg.Admin.Address != prev.cfg.Admin.Address || cfg.Admin.Token != prev.cfg.Admin.Token {
		g.log.Warn("gateway: admin address and token changes take effect at the next start", "admin", prev.cfg.Admin.Address)
	}
	g.nextID++
	gen.id = g.nextID
	g.commitClusters(gen, prev)
	g.applySockets(gen, opened)
	if err := g.guard.SetConfig(overloadConfig(cfg, g.clk, g.log)); err != nil {
		g.log.Error("gateway: overload settings kept", "err", err) // validated by config: not expected
	}
	g.cur.Store(gen)
	g.old = append(g.old, prev)
	g.wg.Add(1)
	go g.retire(prev)
	g.watch.set(cfg)
	g.setStatus(gen, nil, trigger)
	g.log.Info("gateway: configuration reloaded", "generation", gen.id, "trigger", trigger, "file", cfg.File())
	return nil
}

// refuse records and logs a refused reload; the caller may hold g.mu.
func (g *Gateway) refuse(trigger string, err error) error {
	g.setStatus(nil, err, trigger)
	g.log.Error("gateway: reload refused; the running configuration keeps serving", "trigger", trigger, "err", err)
	if g.metrics != nil {
		g.metrics.Reload(err)
	}
	return fmt.Errorf("%w: %w", ErrReloadRefused, err)
}

func (g *Gateway) setStatus(gen *generation, err error, trigger string) {
	st := &ReloadStatus{At: time.Now(), OK: err == nil, Generation: g.cur.Load().id, Trigger: trigger}
	if gen != nil {
		st.Generation = gen.id
	}
	if err != nil {
		st.Errors = problems(err)
	} else if g.metrics != nil && gen != nil && gen.id > 1 {
		g.metrics.Reload(nil)
	}
	g.last.Store(st)
}

// problems lists a load error's problems one per line (file:line:column).
func problems(err error) []string {
	var fe *yamlfile.FileError
	if errors.As(err, &fe) {
		out := make([]string, len(fe.Errors))
		for i, e := range fe.Errors {
			out[i] = e.Error()
		}
		return out
	}
	return strings.Split(err.Error(), "\n")
}

// retire waits until the replaced generation gen has no request in
// flight, then releases what only it used. Checked every 50 ms (cheap),
// it wants no request in flight at two checks in a row and at least a
// second after the swap: a request that took a route just before the swap
// counts itself a few instructions later.
func (g *Gateway) retire(gen *generation) {
	defer g.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	since, quiet := time.Now(), 0
	for quiet < 2 || time.Since(since) < time.Second {
		select {
		case <-g.ctx.Done():
			return // Shutdown releases it
		case <-t.C:
		}
		if gen.live.Load() > 0 {
			quiet = 0
		} else {
			quiet++
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, o := range g.old {
		if o == gen {
			g.old = append(g.old[:i], g.old[i+1:]...)
			break
		}
	}
	g.releaseOnce(gen)
}
