// Command backend is the upstream of the gateway benchmark (bench/gateway/run):
// a small HTTP server that every proxy under test forwards to, and that the
// "direct" rows measure without a proxy.
//
//	backend -addr 127.0.0.1:18090
//
// GET or HEAD / answers 200 with the 13-byte body "hello, world\n"
// (Content-Type text/plain); any other path is a 404 and any other method a
// 405. Connections are kept alive. One port speaks HTTP/1.1 and HTTP/2 with
// prior knowledge (h2c), so h2load can measure it directly. It logs nothing
// per request; on start it prints one line with the address it listens on
// and its GOMAXPROCS, and it exits on SIGINT or SIGTERM.
//
// Standard library only: it is part of the main module and must add no
// dependency to it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// body is what GET / answers.
const body = "hello, world\n"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, serves until SIGINT or SIGTERM, and returns the exit
// status: 0 after a clean stop, 1 when the server fails, 2 for bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:18090", "host:port to listen on")
	name := fs.String("name", "", "when set, every answer carries the header Backend: NAME (to see a balancer at work)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "backend: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "backend: cannot listen: %v\n", err)
		return 1
	}
	srv := newServer()
	if *name != "" {
		srv.Handler = named(*name, srv.Handler)
	}
	fmt.Fprintf(stdout, "backend: listening on %s (HTTP/1.1 and h2c), GOMAXPROCS=%d\n",
		ln.Addr(), runtime.GOMAXPROCS(0))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "backend: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "backend: shutdown: %v\n", err)
		return 1
	}
	return 0
}

// newServer returns the benchmark server: HTTP/1.1 and h2c on one port,
// bounded header reads and idle connections (a benchmark client that
// disappears cannot hold a connection forever).
func newServer() *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           http.HandlerFunc(hello),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    32 << 10,
		HTTP2: &http.HTTP2Config{
			// Enough streams per connection for h2load -m 10 and for
			// any proxy that multiplexes upstream.
			MaxConcurrentStreams: 256,
		},
	}
}

// named adds "Backend: name" to every answer of h.
func named(name string, h http.Handler) http.Handler {
	v := []string{name}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Backend"] = v
		h.ServeHTTP(w, r)
	})
}

// Header values built once, so a request allocates no header slices.
var (
	contentType   = []string{"text/plain; charset=utf-8"}
	contentLength = []string{fmt.Sprint(len(body))}
)

// hello answers GET and HEAD / with body; other paths 404, other methods 405.
func hello(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header()["Allow"] = []string{"GET, HEAD"}
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h["Content-Type"] = contentType
	h["Content-Length"] = contentLength
	if r.Method == http.MethodHead {
		return
	}
	io.WriteString(w, body)
}
