package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestHotKeysMetrics: with ratelimit.hot_keys (top 2, one shard, no
// decay) /metrics shows the two heaviest keys of the route's rule with
// their units and not the third; a key that overtakes one of them
// replaces its series; a reload that removes the rule removes its series.
func TestHotKeysMetrics(t *testing.T) {
	noLeaks(t)
	be := startBackendFunc(t, func(w http.ResponseWriter, r *http.Request) {})
	file := t.TempDir() + "/gateway.yaml"
	body := func(rule string) string {
		return `version: 1
admin: {address: "127.0.0.1:0"}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
ratelimit: {hot_keys: {top: 2, shards: 1, interval: 0s}}
routes:
  - name: api
    cluster: app
    policies: {ratelimit: {rules: [` + rule + `]}}
clusters: [{name: app, endpoints: ["` + be + `"]}]
`
	}
	writeFile(t, file, body(`{id: per-key, key: ["header:X-Key"], rate: 1000, per: 1s, burst: 1000}`))
	g := startFile(t, file)
	c := h1Client(t)
	send := func(key string, n int) {
		for i := 0; i < n; i++ {
			if code, _, _ := fetch(t, c, "GET", "http://"+g.Addr("web")+"/x", http.Header{"X-Key": {key}}); code != 200 {
				t.Fatalf("key %s request %d: %d", key, i, code)
			}
		}
	}
	send("alpha", 5)
	send("beta", 3)
	send("gamma", 1)
	hasSeries(t, g,
		`spillway_route_ratelimit_hot_key_units{key="alpha",route="api",rule="per-key"} 5`,
		`spillway_route_ratelimit_hot_key_units{key="beta",route="api",rule="per-key"} 3`)
	if text := metricsText(t, g); strings.Contains(text, `key="gamma"`) {
		t.Errorf("gamma, not in the top 2, has a series:\n%s", grepLines(text, "hot_key"))
	}

	send("gamma", 6) // 7 in all: now the heaviest, beta leaves the top 2
	hasSeries(t, g,
		`spillway_route_ratelimit_hot_key_units{key="gamma",route="api",rule="per-key"} 7`,
		`spillway_route_ratelimit_hot_key_units{key="alpha",route="api",rule="per-key"} 5`)
	if text := metricsText(t, g); strings.Contains(text, `key="beta"`) {
		t.Errorf("beta left the top 2 but keeps its series:\n%s", grepLines(text, "hot_key"))
	}

	writeFile(t, file, body(`{id: per-ip, key: [ip], rate: 1000, per: 1s, burst: 1000}`))
	mustPost(t, g, "/reload")
	send("alpha", 1)
	hasSeries(t, g, `spillway_route_ratelimit_hot_key_units{key="127.0.0.1",route="api",rule="per-ip"} 1`)
	if text := metricsText(t, g); strings.Contains(text, `rule="per-key"`) {
		t.Errorf("rule per-key removed by the reload but its series remain:\n%s", grepLines(text, "per-key"))
	}
}
