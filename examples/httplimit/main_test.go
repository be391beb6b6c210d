package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

func TestEmbeddedRules(t *testing.T) {
	set, err := rules.Parse("rules.yaml", defaultRules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := httplimit.New(set, httplimit.Config{}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range set.Rules {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, " "); got != "per-ip login per-user per-ip-strict" {
		t.Errorf("rules %s", got)
	}
}

func TestBadRulesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("rules:\n- {id: a, rate: 1, per: soon}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"-rules", path, "-addr", "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Errorf("got %v, want an error naming %s:2", err, path)
	}
}
