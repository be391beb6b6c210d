package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/yamlfile"
)

// FuzzParse feeds arbitrary files to the loader (seeds: testdata/fuzz/
// FuzzParse, valid and broken files). It must never panic and must return
// either a Config whose references all resolve or a *yamlfile.FileError
// whose every problem names the file and a reason, never both.
func FuzzParse(f *testing.F) {
	f.Add([]byte("version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [\"127.0.0.1:9001\"]}]\n"))
	f.Add([]byte("version: 1\nlisteners: [{address: \"${ADDR}\", limits: {max_connections: \"${N}\"}}]\n"))
	lookup := env("ADDR", "127.0.0.1:8080", "N", "10", "TOKEN", "t")
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse("fuzz.yaml", data, lookup)
		if (c == nil) == (err == nil) {
			t.Fatalf("config %v and error %v", c, err)
		}
		if err != nil {
			var fe *yamlfile.FileError
			if !errors.As(err, &fe) || len(fe.Errors) == 0 || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %T %v", err, err)
			}
			for _, e := range fe.Errors {
				if !strings.HasPrefix(e.Error(), "fuzz.yaml") || e.Msg == "" {
					t.Fatalf("problem without file or reason: %q", e.Error())
				}
			}
			return
		}
		if c.Version != 1 || len(c.Listeners) == 0 {
			t.Fatalf("version %d, %d listeners", c.Version, len(c.Listeners))
		}
		for i := range c.Routes {
			if c.Cluster(c.Routes[i].Cluster) == nil {
				t.Fatalf("route %q names cluster %q, which does not exist", c.Routes[i].Name, c.Routes[i].Cluster)
			}
		}
		for i := range c.Listeners {
			l := &c.Listeners[i]
			if (l.Protocol == "tcp") != (l.Cluster != "") || (l.Cluster != "" && c.Cluster(l.Cluster) == nil) {
				t.Fatalf("listener %q: protocol %s, cluster %q", l.Name, l.Protocol, l.Cluster)
			}
		}
		for i := range c.Clusters {
			cl := &c.Clusters[i]
			if err := cl.SetConfig().Validate(); err != nil {
				t.Fatalf("cluster %q: %v", cl.Name, err)
			}
			_, _, _ = cl.Source(), cl.NewPicker(), cl.HealthCheck()
		}
		_ = c.Redacted()
	})
}
