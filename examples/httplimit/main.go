// Command httplimit is a small HTTP server behind the rate limiter of
// package ratelimit/httplimit: it answers "hello" to every request that the
// rules allow, and 429 (with Retry-After, RateLimit-Policy, RateLimit and a
// problem+json body) to those they refuse.
//
//	go run ./examples/httplimit                      # embedded rules.yaml
//	go run ./examples/httplimit -rules my.yaml -addr 127.0.0.1:8080
//
// GET /metrics serves the limiter's Prometheus counters (not rate-limited).
// SIGHUP reloads the rules file; a file with errors is reported and the
// rules in force stay. SIGINT or SIGTERM shuts the server down.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

//go:embed rules.yaml
var defaultRules []byte

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "httplimit:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("httplimit", flag.ContinueOnError)
	rulesPath := fs.String("rules", "", "rules file, YAML or JSON (default: the embedded rules.yaml)")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	load := func() (*rules.Set, error) {
		if *rulesPath == "" {
			return rules.Parse("rules.yaml (embedded)", defaultRules)
		}
		return rules.Load(*rulesPath)
	}
	set, err := load()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	lim, err := httplimit.New(set, httplimit.Config{Logger: log, Registerer: reg, Jitter: 1})
	if err != nil {
		return err
	}

	app := http.NewServeMux()
	app.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", lim.Handler(app))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			set, err := load()
			if err == nil {
				err = lim.Update(set)
			}
			if err != nil {
				log.Error("rules not reloaded; the old rules stay", "error", err)
				continue
			}
			log.Info("rules reloaded", "rules", len(set.Rules))
		}
	}()

	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("listening", "addr", *addr, "rules", len(set.Rules))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
