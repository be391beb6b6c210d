package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spillwayhq/spillway/internal/maintest"
)

// validateFiles writes a good and a bad configuration file.
func validateFiles(t *testing.T) (good, bad string) {
	t.Helper()
	dir := t.TempDir()
	good, bad = filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	for path, data := range map[string]string{
		good: "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [\"127.0.0.1:9001\"]}]\n",
		bad:  "version: 1\nlisteners: [{address: \"127.0.0.1:8080\"}]\nroutes:\n  - cluster: nope\n    timeouts: {connect: 10x}\nclusters: [{name: app, endpoints: [\"127.0.0.1:9001\"]}]\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return good, bad
}

// spillway validate prints FILE: ok per good file, every problem of a bad
// one at its line and column, and exits 1 when any file is bad.
func TestValidate(t *testing.T) {
	good, bad := validateFiles(t)
	code, stdout, stderr := maintest.Run(t, main, "validate", good)
	if code != 0 || stdout != good+": ok\n" || stderr != "" {
		t.Errorf("good file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = maintest.Run(t, main, "validate", good, bad)
	want := bad + `:4:14: routes[0].cluster: no cluster is named "nope" (clusters: app)` + "\n" +
		bad + `:5:25: routes[0].timeouts.connect: want a duration such as 250ms, 10s or 1m30s, got "10x"` + "\n"
	if code != 1 || stdout != good+": ok\n" || stderr != want {
		t.Errorf("good and bad files: exit %d, stdout %q, stderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
	minimal := filepath.Join("..", "..", "examples", "gateway", "minimal.yaml")
	if code, stdout, _ := maintest.Run(t, main, "validate", minimal); code != 0 || stdout != minimal+": ok\n" {
		t.Errorf("minimal example: exit %d, stdout %q", code, stdout)
	}
	missing := filepath.Join(filepath.Dir(good), "missing.yaml")
	code, stdout, stderr = maintest.Run(t, main, "validate", missing)
	if want := "spillway validate: config: open " + missing + ": no such file or directory\n"; code != 1 || stdout != "" || stderr != want {
		t.Errorf("missing file: exit %d, stdout %q, stderr %q, want %q", code, stdout, stderr, want)
	}
}

// Usage errors exit 2; -h prints the usage and exits 0.
func TestValidateUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"validate"}, 2, "Usage: spillway validate FILE..."},
		{[]string{"validate", "-x", "a.yaml"}, 2, "spillway validate: unknown flag -x"},
		{[]string{"validate", "--"}, 2, "Usage: spillway validate FILE..."},
	} {
		code, stdout, stderr := runCmd(t, tc.args...)
		if code != tc.code || stdout != "" || len(stderr) < len(tc.stderr) || stderr[:len(tc.stderr)] != tc.stderr {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and stderr starting %q", tc.args, code, stdout, stderr, tc.code, tc.stderr)
		}
	}
	code, stdout, stderr := maintest.Run(t, main, "validate", "-h")
	if code != 0 || stderr != "" || len(stdout) < 30 || stdout[:30] != "Usage: spillway validate FILE." {
		t.Errorf("-h: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
