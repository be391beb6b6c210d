package deploy_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// instructions returns the Dockerfile's instructions (continuation lines
// joined, comments dropped), as "KEYWORD arguments".
func instructions(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || line == "" && cur == "" {
			continue
		}
		cur += line
		if strings.HasSuffix(cur, "\\") {
			cur = strings.TrimSuffix(cur, "\\") + " "
			continue
		}
		out = append(out, cur)
		cur = ""
	}
	return out
}

// final returns the instructions of the last stage.
func final(all []string) []string {
	last := 0
	for i, in := range all {
		if strings.HasPrefix(in, "FROM ") {
			last = i
		}
	}
	return all[last:]
}

func TestDockerfile(t *testing.T) {
	all := instructions(t)
	for _, want := range []string{
		"ARG GO_VERSION=1.26",
		"FROM golang:${GO_VERSION} AS build",
		"ENV CGO_ENABLED=0",
	} {
		if !slices.Contains(all, want) {
			t.Errorf("no instruction %q", want)
		}
	}
	build := false
	for _, in := range all {
		build = build || strings.HasPrefix(in, "RUN ") &&
			strings.HasSuffix(in, `go build -trimpath -ldflags="-s -w" -o /out/spillway ./cmd/spillway`)
	}
	if !build {
		t.Error("no static build of ./cmd/spillway with -trimpath and -ldflags=\"-s -w\"")
	}
	last := final(all)
	want := []string{
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"COPY --from=build /out/spillway /usr/local/bin/spillway",
		"USER nonroot",
		"EXPOSE 8080 9901",
	}
	if !slices.Equal(last[:len(want)], want) {
		t.Errorf("the final stage is %q, want it to start %q", last, want)
	}
	entry := last[len(last)-1]
	var argv []string
	if err := json.Unmarshal([]byte(strings.TrimPrefix(entry, "ENTRYPOINT ")), &argv); err != nil {
		t.Fatalf("%q: want ENTRYPOINT in exec form (spillway as PID 1 gets SIGTERM): %v", entry, err)
	}
	if !slices.Equal(argv, []string{"/usr/local/bin/spillway", "serve", "--config", mountPath + "/" + configKey}) {
		t.Errorf("entrypoint %q, want spillway serve --config on the ConfigMap's mount", argv)
	}
}

// TestImageMatchesDeployment: the Deployment runs the image the README
// builds, without overriding its entrypoint.
func TestImageMatchesDeployment(t *testing.T) {
	_, c := gateway(t, manifests(t))
	if c.Image != "spillway:dev" {
		t.Errorf("image %q, want spillway:dev (deploy/README.md builds it)", c.Image)
	}
}
