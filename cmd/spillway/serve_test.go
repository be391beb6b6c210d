package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/internal/maintest"
)

// spillway serve refuses to start on a bad file (exit 1, every problem at
// its position), on a listener address in use (exit 1, naming the
// listener), and without a file (exit 2).
func TestServeRefusesToStart(t *testing.T) {
	_, bad := validateFiles(t)
	code, _, stderr := maintest.Run(t, main, "serve", "--config", bad)
	if code != 1 || !strings.Contains(stderr, bad+`:4:14: routes[0].cluster: no cluster is named "nope"`) {
		t.Errorf("bad file: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = maintest.Run(t, main, "serve")
	if code != 2 || !strings.Contains(stderr, "--config FILE is required") {
		t.Errorf("no file: exit %d, stderr %q", code, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := tempFile(t, "busy.yaml", "version: 1\nadmin: {address: off}\nlisteners: [{name: web, address: \""+ln.Addr().String()+"\"}]\nroutes: [{cluster: app}]\nclusters: [{name: app, endpoints: [\"127.0.0.1:9001\"]}]\n")
	code, _, stderr = maintest.Run(t, main, "serve", "--config", busy)
	if code != 1 || !strings.Contains(stderr, `listener "web"`) || !strings.Contains(stderr, "address already in use") {
		t.Errorf("address in use: exit %d, stderr %q", code, stderr)
	}
}

// tempFile writes data to name in a temporary directory.
func tempFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
