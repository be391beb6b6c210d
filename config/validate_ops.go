package config

import (
	"net"
	"net/netip"
)

// admin checks the admin endpoint: a token is required when it listens
// beyond loopback (anyone who can reach it could drain or reload).
func (v *validator) admin(a *Admin) {
	if a.Address == "" || a.Token != "" {
		return
	}
	if !loopbackListen(a.Address) {
		v.at(&a.Address)("admin.address: %s is reachable beyond this machine; set admin.token (a bearer token, usually ${ENV}) or listen on 127.0.0.1", a.Address)
	}
}

// loopbackListen reports whether a listen address binds only loopback
// ("localhost" too; an empty host binds every interface).
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func (v *validator) overload(o *Overload) {
	if o.HeapSoft > 0 && o.HeapHard > 0 && o.HeapSoft > o.HeapHard {
		v.at(&o.HeapSoft)("overload.heap_soft: %s is above heap_hard (%s); keep-alive goes off before connections are refused", o.HeapSoft, o.HeapHard)
	}
	if o.GoroutinesSoft > 0 && o.GoroutinesHard > 0 && o.GoroutinesSoft > o.GoroutinesHard {
		v.at(&o.GoroutinesSoft)("overload.goroutines_soft: %d is above goroutines_hard (%d); keep-alive goes off before connections are refused", o.GoroutinesSoft, o.GoroutinesHard)
	}
}

// proxyProtocolUse checks that a cluster sending PROXY headers serves
// only tcp listeners (an HTTP upstream would read the header as a
// malformed request).
func (v *validator) proxyProtocolUse() {
	c := v.c
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		if cl.ProxyProtocol == "off" || cl.ProxyProtocol == "" {
			continue
		}
		for j := range c.Routes {
			if c.Routes[j].Cluster == cl.Name {
				v.at(&cl.ProxyProtocol)("clusters[%d].proxy_protocol: sent only by tcp listeners, but routes[%d] (%q) sends HTTP requests to this cluster", i, j, c.Routes[j].Name)
				break
			}
		}
	}
}

// certFiles records where a listener's certificates were read from.
func (v *validator) certFiles(l *Listener) {
	l.certFiles = nil
	for j := range l.TLS.Certificates {
		ct := &l.TLS.Certificates[j]
		l.certFiles = append(l.certFiles, CertFiles{Cert: v.d.files[&ct.Cert], Key: v.d.files[&ct.Key]})
	}
}
