package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/health"
)

func (v *validator) cluster(i int, c *Cluster) {
	path := fmt.Sprintf("clusters[%d]", i)
	switch {
	case v.given(&c.Endpoints) && c.Discovery != nil:
		v.at(c.Discovery)("%s.discovery: give endpoints or discovery, not both", path)
	case !v.given(&c.Endpoints) && c.Discovery == nil:
		v.at(c)("%s: give endpoints (a list of host:port) or discovery", path)
	}
	seen := make(map[string]int, len(c.Endpoints))
	for j, e := range c.Endpoints {
		if k, dup := seen[e.Address]; dup && e.Address != "" {
			v.at(&c.Endpoints[j].Address, &c.Endpoints[j])("%s.endpoints[%d]: %q is already endpoints[%d]", path, j, e.Address, k)
		}
		seen[e.Address] = j
	}
	if c.Discovery != nil {
		v.discovery(path+".discovery", c.Discovery)
	}
	v.picker(path, c)
	switch {
	case c.Protocol == "http2" && c.TLS == nil:
		v.at(&c.Protocol)("%s.protocol: http2 is h2 over TLS and needs tls: (use h2c for HTTP/2 without TLS)", path)
	case c.Protocol == "h2c" && c.TLS != nil:
		v.at(c.TLS)("%s.tls: h2c is HTTP/2 without TLS (use http2 for h2 over TLS)", path)
	}
	if c.TLS != nil {
		v.clusterTLS(path+".tls", c)
	}
	if err := c.SetConfig().Validate(); err != nil && v.clean {
		v.at(c)("%s: %v", path, err)
	}
	v.health(path+".health", c)
}

func (v *validator) discovery(path string, d *Discovery) {
	dns, file := v.given(&d.DNS), v.given(&d.File)
	switch {
	case dns && file:
		v.at(&d.File)("%s.file: give dns or file, not both", path)
		return
	case !dns && !file:
		v.at(d)("%s: give dns (a name to resolve) or file (an endpoints file)", path)
		return
	case file:
		for _, f := range []struct {
			name string
			ptr  any
		}{{"port", &d.Port}, {"srv", &d.SRV}, {"network", &d.Network}, {"min_ttl", &d.MinTTL}, {"max_ttl", &d.MaxTTL}} {
			if v.given(f.ptr) {
				v.at(f.ptr)("%s.%s: only with dns", path, f.name)
			}
		}
		return
	}
	if v.given(&d.Poll) {
		v.at(&d.Poll)("%s.poll: only with file (dns follows the answers' TTLs, clamped by min_ttl and max_ttl)", path)
	}
	switch {
	case d.SRV && d.Port != 0:
		v.at(&d.Port)("%s.port: must be absent with srv (the records carry the ports)", path)
	case !d.SRV && d.Port == 0:
		v.at(&d.Port, d)("%s: dns needs a port (A and AAAA records carry none), or srv: true", path)
	case d.SRV && v.given(&d.Network):
		v.at(&d.Network)("%s.network: only without srv", path)
	case d.MaxTTL < d.MinTTL:
		v.at(&d.MaxTTL, &d.MinTTL)("%s.max_ttl: must not be below min_ttl (%v), got %v", path, d.MinTTL, d.MaxTTL)
	}
}

func (v *validator) picker(path string, c *Cluster) {
	for _, o := range []struct {
		name string
		set  bool
		ptr  any
	}{{"least_request", c.LeastRequest != nil, c.LeastRequest}, {"ring_hash", c.RingHash != nil, c.RingHash}, {"maglev", c.Maglev != nil, c.Maglev}} {
		if o.set && c.Picker != o.name {
			v.at(o.ptr)("%s.%s: options of picker %s, but the picker is %s", path, o.name, o.name, c.Picker)
		}
	}
	hashed := c.Picker == "ring_hash" || c.Picker == "maglev"
	switch {
	case hashed && c.HashKey == nil:
		v.at(&c.Picker)("%s: picker %s needs a hash_key (header, cookie, client_ip or path)", path, c.Picker)
	case hashed && c.HashKey.Header == "" && c.HashKey.Cookie == "" && !c.HashKey.ClientIP && !c.HashKey.Path:
		v.at(c.HashKey)("%s.hash_key: give at least one of header, cookie, client_ip and path", path)
	case !hashed && c.HashKey != nil:
		v.at(c.HashKey)("%s.hash_key: only with picker ring_hash or maglev, but the picker is %s", path, c.Picker)
	}
	switch c.Picker {
	case "least_request":
		if err := c.NewPicker().(*balancer.LeastRequest).Validate(); err != nil && v.clean {
			v.at(c.LeastRequest, c)("%s.least_request: %v", path, err)
		}
	case "ring_hash":
		r := c.RingHash
		if r == nil {
			r = &RingHash{MinSize: balancer.DefaultRingMinSize, MaxSize: balancer.MaxRingSize}
		}
		if r.MinSize > r.MaxSize {
			v.at(&r.MinSize, r)("%s.ring_hash.min_size: must not exceed max_size (%d), got %d", path, r.MaxSize, r.MinSize)
		}
		c.table = &balancer.RingConfig{MinSize: r.MinSize, MaxSize: r.MaxSize, PointsPerWeight: r.PointsPerWeight}
	case "maglev":
		size := balancer.DefaultMaglevTableSize
		if c.Maglev != nil {
			size = c.Maglev.TableSize
			if !isPrime(size) {
				v.at(&c.Maglev.TableSize)("%s.maglev.table_size: must be a prime (65537, 131071, 262147, ...), got %d", path, size)
			}
		}
		c.table = &balancer.MaglevConfig{TableSize: size}
	}
}

// isPrime is trial division: table sizes are at most 5,000,011.
func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

func (v *validator) health(path string, c *Cluster) {
	if a := c.Health.Active; a != nil {
		for _, f := range []struct {
			name, types string
			ptr         any
		}{{"path", "http", &a.Path}, {"method", "http", &a.Method}, {"host", "http", &a.Host},
			{"expected", "http", &a.Expected}, {"service", "grpc", &a.Service}} {
			if v.given(f.ptr) && a.Type != f.types {
				v.at(f.ptr)("%s.active.%s: only with type %s", path, f.name, f.types)
			}
		}
		cfg, _ := c.ActiveConfig()
		if err := cfg.Validate(); err != nil && v.clean {
			v.at(a)("%s.active: %v", path, err)
		}
		if h, ok := c.HealthCheck().(*health.HTTPCheck); ok && v.clean {
			if err := h.Validate(); err != nil {
				v.at(a)("%s.active: %v", path, err)
			}
		}
	}
	if o := c.Health.Outlier; o != nil {
		cfg, _ := c.OutlierConfig()
		if err := cfg.Validate(); err != nil && v.clean {
			v.at(&o.MaxEjectionTime, o)("%s.outlier: %v", path, err)
		}
	}
}

func (v *validator) clusterTLS(path string, c *Cluster) {
	t := c.TLS
	cfg := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(t.CA)) {
			v.at(&t.CA)("%s.ca: no PEM certificate found%s", path, pemHint(t.CA))
		}
		cfg.RootCAs = pool
	}
	switch {
	case (t.Cert == "") != (t.Key == ""):
		v.at(&t.Cert, &t.Key)("%s: give cert and key together (the client certificate and its private key)", path)
	case t.Cert != "":
		pair, err := tls.X509KeyPair([]byte(t.Cert), []byte(t.Key))
		if err != nil {
			v.at(&t.Cert)("%s.cert: %s%s", path, strings.TrimPrefix(err.Error(), "tls: "), pemHint(t.Cert))
		} else {
			cfg.Certificates = []tls.Certificate{pair}
		}
	}
	switch c.Protocol {
	case "http2":
		cfg.NextProtos = []string{"h2"}
	case "http1":
		cfg.NextProtos = []string{"http/1.1"}
	}
	c.tls = cfg
}

func (v *validator) listenerTLS(path string, l *Listener) {
	t := l.TLS
	switch {
	case !v.given(&t.ALPN) && l.Protocol == "tcp":
		t.ALPN = nil
	case !v.given(&t.ALPN) && !l.HTTP2:
		t.ALPN = []string{"http/1.1"}
	case l.Protocol == "http" && !l.HTTP2 && slices.Contains(t.ALPN, "h2"):
		v.at(&t.ALPN)("%s.alpn: offers h2, but http2 is false", path)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: t.ALPN}
	if t.MinVersion == "1.3" {
		cfg.MinVersion = tls.VersionTLS13
	}
	for j := range t.Certificates {
		ct := &t.Certificates[j]
		if ct.Cert == "" || ct.Key == "" {
			continue // not decoded; reported
		}
		pair, err := tls.X509KeyPair([]byte(ct.Cert), []byte(ct.Key))
		if err != nil {
			v.at(&ct.Cert, ct)("%s.certificates[%d]: %s%s", path, j, strings.TrimPrefix(err.Error(), "tls: "), pemHint(ct.Cert))
			continue
		}
		cfg.Certificates = append(cfg.Certificates, pair)
	}
	if t.ClientCA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(t.ClientCA)) {
			v.at(&t.ClientCA)("%s.client_ca: no PEM certificate found%s", path, pemHint(t.ClientCA))
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		if t.ClientAuth == "optional" {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	} else if v.given(&t.ClientAuth) {
		v.at(&t.ClientAuth)("%s.client_auth: needs client_ca (the CAs client certificates must chain to)", path)
	}
	v.certFiles(l)
	l.tls = cfg
}

// pemHint suggests file: when a PEM field holds what looks like a path.
func pemHint(s string) string {
	if !strings.Contains(s, "-----BEGIN") && !strings.ContainsAny(s, "\n") && strings.Contains(s, "/") {
		return fmt.Sprintf(" (a path? write file:%s)", s)
	}
	return ""
}
