package sim

import (
	"testing"

	"github.com/spillwayhq/spillway/config"
)

// admission parses a gateway config whose one cluster has the admission
// block yaml (one flow-style mapping) and returns it as config.Load fills
// it in, defaults included.
func admission(t *testing.T, yaml string) *config.Admission {
	t.Helper()
	src := "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{name: r, cluster: app}]\n" +
		"clusters: [{name: app, endpoints: [\"127.0.0.1:9001\"], admission: " + yaml + "}]\n"
	c, err := config.Parse("predict.yaml", []byte(src))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	a := c.Cluster("app").Admission
	if a == nil {
		t.Fatal("config: no admission")
	}
	return a
}
