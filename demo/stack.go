package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spillwayhq/spillway/backend"
	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/gateway"
	"github.com/spillwayhq/spillway/internal/syncbuf"
	"github.com/spillwayhq/spillway/loadgen"
)

// lane is one configuration under test: a route /<key>/ on the gateway to
// a cluster of its own, whose one endpoint is a backend of its own.
type lane struct {
	key, name string
	admission string // the cluster's admission, a YAML flow mapping; "" for none
	backend   backend.Config
}

// server is a backend on a loopback port.
type server struct {
	be  *backend.Backend
	srv *http.Server
	ln  net.Listener
}

func startServer(cfg backend.Config) (*server, error) {
	be, err := backend.New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		be.Close()
		return nil, err
	}
	s := &server{be: be, ln: ln, srv: &http.Server{Handler: be, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// close ends the backend's work (queued and working requests answer 503)
// and its server.
func (s *server) close() {
	s.be.Close()
	_ = s.srv.Close()
}

// stack is a gateway in front of one backend per lane.
type stack struct {
	gw      *gateway.Gateway
	cfg     *config.Config
	servers map[string]*server
	base    string // http://host:port of the gateway's listener
	log     *syncbuf.Buffer
}

// startStack starts the lanes' backends and a gateway routing /<key>/ to
// each.
func startStack(lanes []lane) (*stack, error) {
	st := &stack{servers: map[string]*server{}, log: &syncbuf.Buffer{}}
	for _, l := range lanes {
		s, err := startServer(l.backend)
		if err != nil {
			st.close()
			return nil, err
		}
		st.servers[l.key] = s
	}
	cfg, err := config.Parse("demo.yaml", []byte(configText(lanes, st.addr)))
	if err != nil {
		st.close()
		return nil, fmt.Errorf("demo: the generated gateway config: %w", err)
	}
	st.cfg = cfg
	opts := gateway.Options{Logger: slog.New(slog.NewTextHandler(st.log, nil)), AccessLog: slog.New(slog.DiscardHandler)}
	if st.gw, err = gateway.Build(cfg, opts); err == nil {
		err = st.gw.Start()
	}
	if err != nil {
		st.gw = nil
		st.close()
		return nil, fmt.Errorf("demo: gateway: %w", err)
	}
	st.base = "http://" + st.gw.Addr("demo")
	return st, nil
}

// configText is the gateway's config: one listener on a free port that
// trusts the load generator's class and deadline headers, and per lane a
// route with the gateway's retries off and a cluster with the lane's
// admission.
func configText(lanes []lane, addr func(key string) string) string {
	var b strings.Builder
	b.WriteString("version: 1\nadmin: {address: off}\n")
	b.WriteString("listeners: [{name: demo, address: \"127.0.0.1:0\", trusted_proxies: [127.0.0.1]}]\n")
	b.WriteString("routes:\n")
	for _, l := range lanes {
		fmt.Fprintf(&b, "  - {name: %s, match: {prefix: /%s/}, cluster: %s, policies: {class: sheddable, retry: {attempts: 1}}}\n", l.key, l.key, l.key)
	}
	b.WriteString("clusters:\n")
	for _, l := range lanes {
		fmt.Fprintf(&b, "  - name: %s\n    endpoints: [%q]\n", l.key, addr(l.key))
		if l.admission != "" {
			fmt.Fprintf(&b, "    admission: %s\n", l.admission)
		}
	}
	return b.String()
}

func (st *stack) addr(key string) string { return st.servers[key].ln.Addr().String() }

// admissions parses the lanes' gateway config (with placeholder endpoints)
// and returns each lane's admission (nil for none): the simulator runs
// what the gateway runs.
func admissions(lanes []lane) (map[string]*config.Admission, error) {
	cfg, err := config.Parse("demo.yaml", []byte(configText(lanes, func(string) string { return "127.0.0.1:9" })))
	if err != nil {
		return nil, fmt.Errorf("demo: the generated gateway config: %w", err)
	}
	adm := map[string]*config.Admission{}
	for _, c := range cfg.Clusters {
		adm[c.Name] = c.Admission
	}
	return adm, nil
}

// url is the lane's target URL.
func (st *stack) url(key string) string { return st.base + "/" + key + "/item" }

// runLanes runs one load per lane at once against st, cfg giving each its
// config, then closes st. A run cut short by ctx is a partial result, not
// an error.
func (st *stack) runLanes(ctx context.Context, lanes []lane, cfg func(i int, l lane) loadgen.Config) ([]loadgen.Result, error) {
	res := make([]loadgen.Result, len(lanes))
	errs := make([]error, len(lanes)+1)
	var wg sync.WaitGroup
	for i, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = loadgen.Run(ctx, cfg(i, l))
			if ctx.Err() != nil && errors.Is(errs[i], ctx.Err()) {
				errs[i] = nil
			}
		}()
	}
	wg.Wait()
	errs[len(lanes)] = st.close()
	return res, errors.Join(errs...)
}

// close stops the backends first (their pending requests answer 503 at
// once), then the gateway.
func (st *stack) close() error {
	for _, s := range st.servers {
		s.close()
	}
	if st.gw == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.gw.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
