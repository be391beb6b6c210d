package admin

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/chain"
)

func TestPolicies(t *testing.T) {
	f := &fake{}
	h := New(f, Options{Logger: quiet, Token: token})
	check(t, do(t, h, "GET", "/policies", bearer...), 200, jsonType, "{\n  \"routes\": [],\n  \"clusters\": []\n}\n")
	budget := 3.5
	f.policies = PolicyStatus{
		Routes: []RoutePolicy{{Name: "api", Cluster: "app", Class: "default", Refusals: map[string]map[string]uint64{"admit:limit": {"default": 2}},
			Retries: 1, RetriesStopped: map[string]uint64{"budget": 4}, RetryBudget: &budget,
			RateLimit: []RulePolicy{{Rule: "per-ip", Decisions: map[string]uint64{"allowed": 9}, HotKeys: []HotKey{{Key: "192.0.2.1", Count: 9}}}}}},
		Clusters: []ClusterPolicy{{Name: "app", Algorithm: "gradient2",
			Admission: &chain.AdmissionState{Limit: 7, InFlight: 3, Pinned: 7, ShadowRefused: map[string]uint64{}},
			Breaker:   &chain.BreakerState{State: "open", Forced: "open"}}},
	}
	check(t, do(t, h, "GET", "/policies", bearer...), 200, jsonType, `{
  "routes": [
    {
      "name": "api",
      "cluster": "app",
      "class": "default",
      "bypassed": false,
      "bulkhead_in_flight": 0,
      "refusals": {
        "admit:limit": {
          "default": 2
        }
      },
      "retries": 1,
      "retries_stopped": {
        "budget": 4
      },
      "retry_budget_tokens": 3.5,
      "rate_limit": [
        {
          "rule": "per-ip",
          "decisions": {
            "allowed": 9
          },
          "hot_keys": [
            {
              "key": "192.0.2.1",
              "count": 9
            }
          ]
        }
      ]
    }
  ],
  "clusters": [
    {
      "name": "app",
      "algorithm": "gradient2",
      "admission": {
        "limit": 7,
        "in_flight": 3,
        "pinned": 7,
        "queue_length": 0,
        "queue_wait_seconds": 0,
        "bypassed": false,
        "shadow": false,
        "shadow_refused": {},
        "brownout": null
      },
      "breaker": {
        "state": "open",
        "forced": "open",
        "shadow": false,
        "shadow_refused": 0
      }
    }
  ]
}
`)
}

// TestOverride: each override's path and value reach the backend parsed,
// are answered with what was done and logged once, with who asked.
func TestOverride(t *testing.T) {
	f := &fake{}
	var log bytes.Buffer
	h := New(f, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	admin := []string{AdminHeader, "1"}
	for path, want := range map[string]string{
		"/clusters/app/breaker/open":     "override breaker app open limit=0 level=-1 on=false",
		"/clusters/app/breaker/auto":     "override breaker app auto limit=0 level=-1 on=false",
		"/clusters/app/limit/12":         "override limit app 12 limit=12 level=-1 on=false",
		"/clusters/app/limit/auto":       "override limit app auto limit=0 level=-1 on=false",
		"/clusters/app/brownout/0.25":    "override brownout app 0.25 limit=0 level=0.25 on=false",
		"/clusters/app/brownout/0":       "override brownout app 0 limit=0 level=0 on=false",
		"/clusters/app/brownout/auto":    "override brownout app auto limit=0 level=-1 on=false",
		"/routes/api/bypass/on":          "override bypass api on limit=0 level=-1 on=true",
		"/routes/my%2Froute/bypass/off":  "override bypass my/route off limit=0 level=-1 on=false",
		"/clusters/a%20b/breaker/closed": "override breaker a b closed limit=0 level=-1 on=false",
	} {
		f.calls = nil
		log.Reset()
		w := do(t, h, "POST", path, admin...)
		check(t, w, 200, jsonType, "")
		if got := strings.Join(f.Calls(), ","); got != want {
			t.Errorf("POST %s: backend calls %q, want %q", path, got, want)
		}
		if n := strings.Count(log.String(), `msg="admin: override"`); n != 1 || !strings.Contains(log.String(), "auth=header") ||
			!strings.Contains(log.String(), "remote=192.0.2.1:1234") {
			t.Errorf("POST %s: log %q, want one line with remote and auth", path, log.String())
		}
	}
	check(t, do(t, h, "POST", "/clusters/app/limit/3", admin...), 200, jsonType,
		"{\n  \"what\": \"limit\",\n  \"target\": \"app\",\n  \"value\": \"3\"\n}\n")
}

// TestOverrideRefused: bad values are 400 and unknown shapes 404 without
// reaching the backend; the backend's not-found and bad-value errors are
// 404 and 400, any other 500.
func TestOverrideRefused(t *testing.T) {
	f := &fake{}
	h := New(f, Options{Logger: quiet, Token: token})
	for path, status := range map[string]int{
		"/clusters/app/breaker/half-open": 400, "/clusters/app/breaker/OPEN": 400,
		"/clusters/app/limit/0": 400, "/clusters/app/limit/-3": 400, "/clusters/app/limit/1.5": 400,
		"/clusters/app/limit/2000000000": 400, "/clusters/app/brownout/1.5": 400, "/clusters/app/brownout/-0.1": 400,
		"/clusters/app/brownout/NaN": 400, "/routes/api/bypass/true": 400,
		"/routes/api/breaker/open": 404, "/clusters/app/bypass/on": 404, "/clusters//breaker/open": 404,
		"/clusters/app/breaker/": 404, "/clusters/app/breaker/open/now": 404, "/routes/api/bypass": 404,
	} {
		check(t, do(t, h, "POST", path, bearer...), status, problemType, "")
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Fatalf("refused overrides reached the backend: %q", calls)
	}
	for err, status := range map[error]int{
		fmt.Errorf("%w: no cluster %q", ErrNotFound, "app"):             404,
		fmt.Errorf("%w: cluster %q has no breaker", ErrBadValue, "app"): 400,
		errors.New("boom"): 500,
	} {
		f.overrideErr = err
		w := do(t, h, "POST", "/clusters/app/breaker/open", bearer...)
		check(t, w, status, problemType, "")
		if !strings.Contains(w.Body.String(), strings.ReplaceAll(err.Error(), `"`, `\"`)) {
			t.Errorf("%d answer %s does not name %q", status, w.Body.String(), err)
		}
	}
}
