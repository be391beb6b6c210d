package httplimit

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// RuleHotKeys are one rule's heaviest keys, largest first.
type RuleHotKeys struct {
	Rule string   `json:"rule"`
	Keys []HotKey `json:"keys"`
}

// HotKey is a key and its estimated units: the requests' costs summed over
// the tracker's interval (Config.HotKeys.Interval; since the rule was
// added when 0), allowed or refused. The estimate never falls below the
// true sum and exceeds it by at most ε·N with probability 1 − δ (see
// ratelimit.HeavyHitters).
type HotKey struct {
	// Key is the rule's key as its store sees it: the key parts' values
	// joined with '|', rules.GlobalKey for a rule without key parts,
	// rules.FallbackKey for requests lacking a part. HotKeysHandler and
	// the gauge show the last two as "(global)" and "(fallback)".
	Key   string `json:"key"`
	Count uint64 `json:"count"`
}

// hotKeyDesc is the gauge of the top keys.
var hotKeyDesc = prometheus.NewDesc("spillway_ratelimit_http_hot_key_units",
	"Estimated units (requests × cost) sent per key by the heaviest keys of each rule, in the hot-key tracker's interval; at most TopK keys per rule.",
	[]string{"rule", "key"}, nil)

// hotKeysLocked returns the tracker of rule id, creating it on first use;
// nil when Config.HotKeys is nil. l.updateMu must be held.
func (l *Limiter) hotKeysLocked(id string) *ratelimit.HeavyHitters {
	if l.cfg.HotKeys == nil {
		return nil
	}
	if h, ok := l.hot[id]; ok {
		return h
	}
	h, err := ratelimit.NewHeavyHitters(*l.cfg.HotKeys)
	if err != nil { // validated by New; cannot happen
		return nil
	}
	l.hot[id] = h
	return h
}

// HotKeys returns the heaviest keys of every current rule, in rule order;
// nil when Config.HotKeys is nil. Each rule lists at most TopK keys, those
// with the largest estimates. Decays due at the clock's now are applied
// first.
func (l *Limiter) HotKeys() []RuleHotKeys {
	s := l.state.Load()
	now := l.clock.Now()
	var out []RuleHotKeys
	var buf []ratelimit.HotKey
	for _, ru := range s.rules {
		if ru.hot == nil {
			continue
		}
		ru.hot.Tick(now)
		buf = ru.hot.Top(buf)
		keys := make([]HotKey, len(buf))
		for i, hk := range buf {
			keys[i] = HotKey{Key: hk.Key, Count: hk.Count}
		}
		out = append(out, RuleHotKeys{Rule: ru.ID, Keys: keys})
	}
	return out
}

// HotKeysHandler returns a handler that serves HotKeys as JSON:
//
//	{"rules":[{"rule":"per-ip","keys":[{"key":"192.0.2.1","count":12}]}]}
//
// With ?rule=ID only that rule is listed. GET and HEAD only (405
// otherwise). Keys are shown as they are (with "(global)" and
// "(fallback)" for the two shared keys): when keys hold API keys, phone
// numbers or user ids, serve it only where those may be seen (an internal
// port, behind authentication), as for the gauge.
func (l *Limiter) HotKeysHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		all := l.HotKeys()
		body := struct {
			Rules []RuleHotKeys `json:"rules"`
		}{Rules: make([]RuleHotKeys, 0, len(all))}
		only := r.URL.Query().Get("rule")
		for _, rk := range all {
			if only != "" && rk.Rule != only {
				continue
			}
			for i := range rk.Keys {
				rk.Keys[i].Key = DisplayKey(rk.Keys[i].Key)
			}
			body.Rules = append(body.Rules, rk)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(body)
	})
}

// DisplayKey shows a rule's key in JSON and metric labels: the two shared
// keys by name, invalid UTF-8 replaced.
func DisplayKey(k string) string {
	switch k {
	case rules.GlobalKey:
		return "(global)"
	case rules.FallbackKey:
		return "(fallback)"
	}
	return strings.ToValidUTF8(k, "\uFFFD")
}

// collectHotKeys sends the hot-key gauge: at most TopK series per rule.
func (l *Limiter) collectHotKeys(ch chan<- prometheus.Metric) {
	if l.cfg.HotKeys == nil {
		return
	}
	for _, rk := range l.HotKeys() {
		seen := make(map[string]bool, len(rk.Keys))
		for _, hk := range rk.Keys {
			k := DisplayKey(hk.Key)
			if seen[k] { // two keys shown alike: one series only
				continue
			}
			seen[k] = true
			ch <- prometheus.MustNewConstMetric(hotKeyDesc, prometheus.GaugeValue, float64(hk.Count), rk.Rule, k)
		}
	}
}
