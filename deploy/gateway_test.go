package deploy_test

import (
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/config"
)

// The values the example is built around, written once by hand.
const (
	configKey  = "config.yaml"
	mountPath  = "/etc/spillway"
	adminPort  = 9901
	publicPort = 8080
	grace      = 30 // seconds: drain.delay 5s + drain.timeout 20s + 5s
)

// gatewayConfig parses the ConfigMap's gateway config as the pod would see
// it, with the environment the Deployment gives it.
func gatewayConfig(t *testing.T, all []*manifest) *config.Config {
	t.Helper()
	data, ok := find(t, all, "ConfigMap", "spillway-config").Data[configKey]
	if !ok {
		t.Fatalf("the ConfigMap has no key %s", configKey)
	}
	t.Setenv("SPILLWAY_ADMIN_TOKEN", "a-token-for-the-test")
	t.Setenv("POD_IP", "10.1.2.3")
	cfg, err := config.Parse("kubernetes/configmap.yaml:"+configKey, []byte(data))
	if err != nil {
		t.Fatalf("the ConfigMap's gateway config:\n%v", err)
	}
	return cfg
}

func TestGatewayConfig(t *testing.T) {
	cfg := gatewayConfig(t, manifests(t))
	if cfg.Admin.Address != "0.0.0.0:9901" || cfg.Admin.Token != "a-token-for-the-test" {
		t.Errorf("admin %q with token %q, want 0.0.0.0:9901 with the Secret's token", cfg.Admin.Address, cfg.Admin.Token)
	}
	if !slices.Equal(cfg.Admin.Hosts, []string{"10.1.2.3"}) {
		t.Errorf("admin.hosts %q, want the pod's IP", cfg.Admin.Hosts)
	}
	if cfg.Drain.Delay.D() != 5*time.Second || cfg.Drain.Timeout.D() != 20*time.Second {
		t.Errorf("drain %v + %v, want 5s + 20s", cfg.Drain.Delay.D(), cfg.Drain.Timeout.D())
	}
	if !cfg.Reload.Watch {
		t.Error("reload.watch is off: ConfigMap edits would not be picked up")
	}
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Limits.MaxAge.D() != 5*time.Minute {
		t.Errorf("want one listener with max_connection_age 5m")
	}
	if c := cfg.Cluster("app"); c == nil || len(c.Endpoints) != 2 {
		t.Errorf("want a cluster app with two endpoints")
	}
}

// TestAdminTokenRequired: without the Secret's token (or with the empty
// example one) the gateway refuses to start: it fails closed.
func TestAdminTokenRequired(t *testing.T) {
	data := find(t, manifests(t), "ConfigMap", "spillway-config").Data[configKey]
	t.Setenv("POD_IP", "10.1.2.3")
	t.Setenv("SPILLWAY_ADMIN_TOKEN", "")
	if _, err := config.Parse("config.yaml", []byte(data)); err == nil {
		t.Error("an empty token: the config was accepted")
	}
	os.Unsetenv("SPILLWAY_ADMIN_TOKEN") // restored by t.Setenv's cleanup
	if _, err := config.Parse("config.yaml", []byte(data)); err == nil {
		t.Error("no token variable: the config was accepted")
	}
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return n
}

// gateway returns the Deployment's spec and its gateway container.
func gateway(t *testing.T, all []*manifest) (*deploymentSpec, *container) {
	t.Helper()
	var d deploymentSpec
	spec(t, find(t, all, "Deployment", "spillway"), &d)
	for i := range d.Template.Spec.Containers {
		if c := &d.Template.Spec.Containers[i]; c.Name == "spillway" {
			return &d, c
		}
	}
	t.Fatal("the Deployment has no container spillway")
	return nil, nil
}

func TestDeploymentAgreesWithConfig(t *testing.T) {
	all := manifests(t)
	cfg := gatewayConfig(t, all)
	d, c := gateway(t, all)
	if d.Replicas != 2 {
		t.Errorf("replicas %d, want 2", d.Replicas)
	}
	need := cfg.Drain.Delay.D() + cfg.Drain.Timeout.D() + 5*time.Second
	if g := d.Template.Spec.Grace; g != grace || time.Duration(g)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds %d, want %d (at least drain.delay + drain.timeout + 5s = %v)", g, grace, need)
	}
	if port(t, cfg.Admin.Address) != adminPort || port(t, cfg.Listeners[0].Address) != publicPort {
		t.Errorf("the config listens on %s and %s, want ports %d and %d", cfg.Admin.Address, cfg.Listeners[0].Address, adminPort, publicPort)
	}
	for _, p := range []struct {
		name  string
		probe *probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/ready"}, {"liveness", c.LivenessProbe, "/live"}} {
		if p.probe == nil {
			t.Errorf("no %s probe", p.name)
			continue
		}
		if got := p.probe.HTTPGet.Path; got != p.path {
			t.Errorf("%s probe GET %s, want %s", p.name, got, p.path)
		}
		if got := containerPort(c, &p.probe.HTTPGet.Port); got != adminPort {
			t.Errorf("%s probe on port %d, want the admin port %d", p.name, got, adminPort)
		}
	}
	var svc serviceSpec
	spec(t, find(t, all, "Service", "spillway"), &svc)
	if len(svc.Ports) != 1 || containerPort(c, &svc.Ports[0].TargetPort) != publicPort {
		t.Errorf("the Service does not send to the listener's port %d", publicPort)
	}
}

func TestDeploymentMountsAndSecrets(t *testing.T) {
	all := manifests(t)
	d, c := gateway(t, all)
	pod := &d.Template.Spec
	var volume string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == "spillway-config" {
			volume = v.Name
		}
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			mounted = m.MountPath == mountPath && m.SubPath == ""
		}
	}
	if volume == "" || !mounted {
		t.Errorf("the ConfigMap is not mounted as a directory at %s (without subPath)", mountPath)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch v := e.ValueFrom; {
		case v != nil && v.SecretKeyRef != nil:
			env[e.Name] = "secret:" + v.SecretKeyRef.Name + "/" + v.SecretKeyRef.Key
		case v != nil && v.FieldRef != nil:
			env[e.Name] = "field:" + v.FieldRef.FieldPath
		}
	}
	if env["SPILLWAY_ADMIN_TOKEN"] != "secret:spillway-admin/token" || env["POD_IP"] != "field:status.podIP" {
		t.Errorf("environment %v, want the token from spillway-admin/token and POD_IP from status.podIP", env)
	}
	if _, ok := find(t, all, "Secret", "spillway-admin").StringData["token"]; !ok {
		t.Error("the Secret spillway-admin has no key token")
	}
	sc := c.SecurityContext
	if !pod.SecurityContext.RunAsNonRoot || !sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil ||
		*sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("security context: want runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, drop ALL")
	}
}

// TestBackendsMatchCluster: each endpoint of the cluster is a Service of
// backends.yaml on that port.
func TestBackendsMatchCluster(t *testing.T) {
	all := manifests(t)
	cfg := gatewayConfig(t, all)
	for _, e := range cfg.Cluster("app").Endpoints {
		host, p, _ := net.SplitHostPort(e.Address)
		var svc serviceSpec
		spec(t, find(t, all, "Service", host), &svc)
		if len(svc.Ports) != 1 || strconv.Itoa(svc.Ports[0].Port) != p {
			t.Errorf("Service %s does not listen on %s", host, p)
		}
	}
}
