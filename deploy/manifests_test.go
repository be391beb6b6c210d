package deploy_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// manifest is the part of a Kubernetes object the tests read; spec is
// decoded per kind.
type manifest struct {
	file       string
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       yaml.Node         `yaml:"spec"`
}

type deploymentSpec struct {
	Replicas int `yaml:"replicas"`
	Template struct {
		Spec podSpec `yaml:"spec"`
	} `yaml:"template"`
}

type podSpec struct {
	Grace           int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
	Volumes    []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"` // a number or a port's name
	} `yaml:"httpGet"`
}

type serviceSpec struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []struct {
		Name       string    `yaml:"name"`
		Port       int       `yaml:"port"`
		TargetPort yaml.Node `yaml:"targetPort"`
	} `yaml:"ports"`
}

// manifests reads every YAML document under kubernetes/, failing t on
// any that does not parse or lacks apiVersion, kind or metadata.name.
func manifests(t *testing.T) []*manifest {
	t.Helper()
	var out []*manifest
	err := filepath.WalkDir("kubernetes", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := yaml.NewDecoder(f)
		for {
			m := &manifest{file: path}
			if err := dec.Decode(m); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", path)
			}
			out = append(out, m)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// find returns the manifest of kind and name, failing t without one.
func find(t *testing.T, all []*manifest, kind, name string) *manifest {
	t.Helper()
	for _, m := range all {
		if m.Kind == kind && m.Metadata.Name == name {
			return m
		}
	}
	t.Fatalf("no %s named %s under kubernetes/", kind, name)
	return nil
}

// spec decodes m's spec into v.
func spec(t *testing.T, m *manifest, v any) {
	t.Helper()
	if err := m.Spec.Decode(v); err != nil {
		t.Fatalf("%s: %s %s: spec: %v", m.file, m.Kind, m.Metadata.Name, err)
	}
}

func TestManifestsParse(t *testing.T) {
	var got []string
	for _, m := range manifests(t) {
		got = append(got, m.Kind+"/"+m.Metadata.Name)
	}
	want := []string{
		"ConfigMap/spillway-config", "Deployment/app-one", "Deployment/app-two", "Deployment/spillway",
		"PodDisruptionBudget/spillway", "Secret/spillway-admin", "Service/app-one", "Service/app-two",
		"Service/spillway",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("objects %q, want %q", got, want)
	}
}

// containerPort resolves a probe's or a Service's port (a number or a
// name) against c's ports; 0 when it names none.
func containerPort(c *container, port *yaml.Node) int {
	var n int
	if port.Decode(&n) == nil {
		return n
	}
	for _, p := range c.Ports {
		if p.Name == port.Value {
			return p.ContainerPort
		}
	}
	return 0
}
