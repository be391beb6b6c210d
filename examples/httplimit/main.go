// Command httplimit is a small HTTP server behind the rate limiter of
// package ratelimit/httplimit: it answers "hello" to every request that the
// rules allow, and 429 (with Retry-After, RateLimit-Policy, RateLimit and a
// problem+json body) to those they refuse.
//
//	go run ./examples/httplimit                      # embedded rules.yaml, in memory
//	go run ./examples/httplimit -rules my.yaml -addr 127.0.0.1:8080
//	go run ./examples/httplimit -redis 127.0.0.1:6379   # limits shared through Redis
//
// With -redis, every rule is enforced on Redis (package
// ratelimit/redisstore: keys rl:{key}:rule-id, the rule's failMode when
// Redis does not answer within -redis-timeout, a circuit breaker, a local
// floor for fail-open rules); several comma-separated addresses mean a
// Redis Cluster. Without it, each rule has an in-memory store.
//
// GET /metrics serves the limiter's Prometheus metrics (with -redis, the
// Redis stores' too) and GET
// /debug/hotkeys each rule's heaviest keys as JSON (neither is
// rate-limited). SIGHUP reloads the rules file; a file with errors is
// reported and the rules in force stay. SIGINT or SIGTERM shuts the server
// down.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/spillwayhq/spillway/httpserver"
	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/redisstore"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

//go:embed rules.yaml
var defaultRules []byte

func main() {
	err := run(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the usage is printed; not a failure
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "httplimit:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, args, nil)
}

// serve runs the server until ctx ends; ready, if not nil, is told the
// address it listens on.
func serve(ctx context.Context, args []string, ready func(addr string)) error {
	fs := flag.NewFlagSet("httplimit", flag.ContinueOnError)
	rulesPath := fs.String("rules", "", "rules file, YAML or JSON (default: the embedded rules.yaml)")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	redisAddr := fs.String("redis", "", "Redis address `host:port` (comma-separated: a Cluster's nodes); empty: in-memory stores")
	redisPrefix := fs.String("redis-prefix", redisstore.DefaultPrefix, "first part of the Redis keys (prefix:{key}:rule-id)")
	redisTimeout := fs.Duration("redis-timeout", 5*time.Millisecond, "longest wait for Redis per decision; then the rule's failMode applies")
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
	cfg := httplimit.Config{Logger: log, Registerer: reg, Jitter: 1,
		// Each rule's 10 heaviest keys, counts halved every minute.
		HotKeys: &ratelimit.HotKeysConfig{TopK: 10, Shards: 4, Interval: 60, Decay: 0.5}}
	store := "memory"
	if *redisAddr != "" {
		// go-redis's own lines (failed dials while Redis is down) in the
		// same slog stream, at most one a second.
		redisstore.InstallLogger(redisstore.LogConfig{Logger: log})
		rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: strings.Split(*redisAddr, ","),
			ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		defer rdb.Close()
		stores, err := redisstore.NewStores(rdb, redisstore.StoresConfig{
			Store: redisstore.Config{Prefix: *redisPrefix, Timeout: redisTimeout.Seconds()}})
		if err != nil {
			return err
		}
		defer stores.Close()
		reg.MustRegister(stores.Collector()) // spillway_ratelimit_redis_*: round trips, fail modes, breakers
		cfg.Store = stores.ForRule
		store = "redis " + *redisAddr
	}
	lim, err := httplimit.New(set, cfg)
	if err != nil {
		return err
	}
	defer lim.Close()

	app := http.NewServeMux()
	app.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/hotkeys", lim.HotKeysHandler())
	mux.Handle("/", lim.Handler(app))
	srv := httpserver.New(httpserver.Config{Handler: mux}) // header, idle, body and send timeouts
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
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
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "rules", len(set.Rules), "store", store)
	if ready != nil {
		ready(ln.Addr().String())
	}
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
