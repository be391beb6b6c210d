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

// stack is one gateway for the whole demo, in front of one backend per
// lane of the experiment under way.
type stack struct {
	gw        *gateway.Gateway
	admin     string // the admin listener's bound address: the dashboard
	adminCfg  string // its address in the config (port 0: any free one)
	servers   map[string]*server
	base      string // http://host:port of the gateway's listener
	log       *syncbuf.Buffer
	admission bool // the running config has an admission limit
}

// startStack starts the lanes' backends and a gateway routing /<key>/ to
// each, its admin listener (and dashboard) on adminAddr.
func startStack(lanes []lane, adminAddr string) (*stack, error) {
	if adminAddr == "" {
		adminAddr = "127.0.0.1:0"
	}
	st := &stack{adminCfg: adminAddr, log: &syncbuf.Buffer{}}
	servers, err := startServers(lanes)
	if err != nil {
		return nil, err
	}
	st.servers = servers
	cfg, err := st.config(lanes, true)
	if err != nil {
		st.close()
		return nil, err
	}
	err = st.startGateway(cfg)
	if err != nil && st.adminCfg != "127.0.0.1:0" { // the address is taken, say: any free port
		st.adminCfg = "127.0.0.1:0"
		if cfg, err = st.config(lanes, true); err == nil {
			err = st.startGateway(cfg)
		}
	}
	if err != nil {
		st.gw = nil
		st.close()
		return nil, fmt.Errorf("demo: gateway: %w", err)
	}
	st.admission = hasAdmission(lanes)
	st.base = "http://" + st.gw.Addr("demo")
	st.admin = st.gw.AdminAddr()
	return st, nil
}

func (st *stack) startGateway(cfg *config.Config) error {
	opts := gateway.Options{Logger: slog.New(slog.NewTextHandler(st.log, nil)), AccessLog: slog.New(slog.DiscardHandler)}
	gw, err := gateway.Build(cfg, opts)
	if err == nil {
		err = gw.Start()
	}
	if err != nil {
		return err
	}
	st.gw = gw
	return nil
}

func startServers(lanes []lane) (map[string]*server, error) {
	servers := map[string]*server{}
	for _, l := range lanes {
		s, err := startServer(l.backend)
		if err != nil {
			for _, s := range servers {
				s.close()
			}
			return nil, err
		}
		servers[l.key] = s
	}
	return servers, nil
}

func hasAdmission(lanes []lane) bool {
	for _, l := range lanes {
		if l.admission != "" {
			return true
		}
	}
	return false
}

// swap puts fresh backends behind the lanes' routes (an empty system for
// the next level or experiment) and reloads the gateway onto them; the
// old backends close. Admission limits start afresh too: a reload keeps a
// cluster's limiter (an adaptive limit carries over), so the gateway is
// first reloaded without admission, then with it.
func (st *stack) swap(lanes []lane) error {
	servers, err := startServers(lanes)
	if err != nil {
		return err
	}
	old := st.servers
	st.servers = servers
	defer func() {
		for _, s := range old {
			s.close()
		}
	}()
	steps := []bool{true}
	if st.admission {
		steps = []bool{false, true}
	}
	for _, withAdmission := range steps {
		cfg, err := st.config(lanes, withAdmission)
		if err == nil {
			err = st.gw.ReloadConfig(cfg, "demo")
		}
		if err != nil {
			return fmt.Errorf("demo: gateway reload: %w", err)
		}
	}
	st.admission = hasAdmission(lanes)
	return nil
}

// config parses the gateway's config for the lanes on the current servers.
func (st *stack) config(lanes []lane, withAdmission bool) (*config.Config, error) {
	ls := lanes
	if !withAdmission {
		ls = make([]lane, len(lanes))
		for i, l := range lanes {
			l.admission = ""
			ls[i] = l
		}
	}
	cfg, err := config.Parse("demo.yaml", []byte(configText(ls, st.adminCfg, st.addr)))
	if err != nil {
		return nil, fmt.Errorf("demo: the generated gateway config: %w", err)
	}
	return cfg, nil
}

// configText is the gateway's config: one listener on a free port that
// trusts the load generator's class and deadline headers, and per lane a
// route with the gateway's retries off and a cluster with the lane's
// admission.
func configText(lanes []lane, admin string, addr func(key string) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nadmin: {address: %q}\nreload: {watch: false}\n", admin)
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
	cfg, err := config.Parse("demo.yaml", []byte(configText(lanes, "off", func(string) string { return "127.0.0.1:9" })))
	if err != nil {
		return nil, fmt.Errorf("demo: the generated gateway config: %w", err)
	}
	adm := map[string]*config.Admission{}
	for _, c := range cfg.Clusters {
		adm[c.Name] = c.Admission
	}
	return adm, nil
}

// Dashboard is the gateway's live dashboard.
func (st *stack) dashboard() string { return "http://" + st.admin + "/dashboard" }

// url is the lane's target URL.
func (st *stack) url(key string) string { return st.base + "/" + key + "/item" }

// runLanes runs one load per lane at once against st, cfg giving each its
// config. A run cut short by ctx is a partial result, not an error.
func (st *stack) runLanes(ctx context.Context, lanes []lane, cfg func(i int, l lane) loadgen.Config) ([]loadgen.Result, error) {
	res := make([]loadgen.Result, len(lanes))
	errs := make([]error, len(lanes))
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
