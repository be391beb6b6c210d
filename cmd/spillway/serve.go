package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/gateway"
	"github.com/spillwayhq/spillway/httpserver"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
)

// serveCommand runs the gateway: SIGHUP reloads the config file, SIGTERM
// or SIGINT drains and stops it (a second one stops it at once).
func serveCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("spillway serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "the gateway's config file (YAML or JSON); see docs/CONFIG.md")
	grace := fs.Duration("shutdown-timeout", 0, "override drain.timeout: how long requests in flight may run once the listeners close")
	debug := fs.String("pprof", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:6060; off by default")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: spillway serve --config FILE")
		fmt.Fprintln(stderr, "SIGHUP (or a change of FILE, or POST /reload on the admin endpoint) reloads FILE; SIGTERM drains and stops.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *file == "" && fs.NArg() == 1 {
		*file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "spillway serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *file == "" {
		fmt.Fprintln(stderr, "spillway serve: --config FILE is required (try examples/gateway/minimal.yaml)")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// go-redis's own lines (failed dials while Redis is down, failovers) go
	// to the same slog stream, at most one a second, instead of its
	// unstructured default logger on stderr. Process-wide, so set here.
	redisstore.InstallLogger(redisstore.LogConfig{Logger: log})
	cfg, err := config.Load(*file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *grace > 0 {
		cfg.Drain.Timeout = config.Duration(*grace)
	}
	g, err := gateway.Build(cfg, gateway.Options{Logger: log, AccessLog: slog.New(slog.NewJSONHandler(stdout, nil))})
	if err != nil {
		fmt.Fprintln(stderr, "spillway serve:", err)
		return 1
	}
	// Signals are caught before Start, so a SIGTERM during start-up drains.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := g.Start(); err != nil {
		fmt.Fprintln(stderr, "spillway serve:", err)
		return 1
	}
	if *debug != "" {
		stopDebug, err := servePprof(*debug, log)
		if err != nil {
			fmt.Fprintln(stderr, "spillway serve: --pprof:", err)
			_ = g.Shutdown(context.Background())
			return 1
		}
		defer stopDebug()
	}
	if a := g.AdminAddr(); a != "" {
		log.Info("admin", "address", a)
	}
	// Go 1.25+ sizes GOMAXPROCS from the cgroup's CPU limit (and follows
	// changes to it); say what it is, since proxy throughput follows it.
	log.Info("runtime", "gomaxprocs", runtime.GOMAXPROCS(0), "cpus", runtime.NumCPU())
	return runUntilStopped(g, sigs, stderr)
}

// runUntilStopped reloads on SIGHUP and, on SIGTERM or SIGINT, runs the
// drain (a second signal cuts the drain delay short). Exit status 0 when
// the drain ends, cut requests included: they were given drain.timeout.
func runUntilStopped(g *gateway.Gateway, sigs chan os.Signal, stderr io.Writer) int {
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			_ = g.Reload("signal") // logged; the old config keeps serving on failure
			continue
		}
		break
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig != syscall.SIGHUP {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := g.Terminate(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(stderr, "spillway serve:", err)
		return 1
	}
	return 0
}

// servePprof serves net/http/pprof's handlers on addr until the returned
// function is called.
func servePprof(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := httpserver.New(httpserver.Config{Handler: mux, SendTimeout: -1})
	go func() { _ = srv.Serve(ln) }()
	log.Info("pprof", "address", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
