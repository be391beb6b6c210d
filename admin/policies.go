package admin

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spillwayhq/spillway/chain"
)

// ErrBadValue is what Backend.Override wraps for a value the target
// cannot take (a cluster without a breaker, a limit on a cluster without
// admission); it is answered 400.
var ErrBadValue = errors.New("admin: bad value")

// PolicyStatus is GET /policies: the policy chain's state, per route and
// per cluster.
type PolicyStatus struct {
	Routes   []RoutePolicy   `json:"routes"`
	Clusters []ClusterPolicy `json:"clusters"`
}

// RoutePolicy is one route's policies.
type RoutePolicy struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	// Class is the route's class (a trusted peer may send another).
	Class    string `json:"class"`
	Bypassed bool   `json:"bypassed"`
	// BulkheadInFlight is the requests holding a bulkhead place.
	BulkheadInFlight int64 `json:"bulkhead_in_flight"`
	// Refusals are the gateway's own answers by reason code, then class
	// (the series of spillway_refusals_total; empty with metrics off).
	Refusals map[string]map[string]uint64 `json:"refusals"`
	// Retries sent, and failed attempts not retried by verdict.
	Retries        uint64            `json:"retries"`
	RetriesStopped map[string]uint64 `json:"retries_stopped"`
	// RetryBudget is the tokens left in the retry budget (nil: none).
	RetryBudget *float64 `json:"retry_budget_tokens"`
	// RateLimit lists the route's rate-limit rules.
	RateLimit []RulePolicy `json:"rate_limit"`
}

// RulePolicy is one rate-limit rule: its decisions by outcome and, with
// hot keys on, its heaviest keys.
type RulePolicy struct {
	Rule      string            `json:"rule"`
	Decisions map[string]uint64 `json:"decisions"`
	HotKeys   []HotKey          `json:"hot_keys"`
}

// HotKey is one of a rule's heaviest keys and its estimated units.
type HotKey struct {
	Key   string `json:"key"`
	Count uint64 `json:"count"`
}

// ClusterPolicy is one cluster's guard: admission (with its brownout) and
// breaker, nil when the cluster has none.
type ClusterPolicy struct {
	Name string `json:"name"`
	// Algorithm is the admission's adaptive algorithm ("" without one).
	Algorithm string                `json:"algorithm"`
	Admission *chain.AdmissionState `json:"admission"`
	Breaker   *chain.BreakerState   `json:"breaker"`
}

// Override is one operator override, as POSTed and as listed in the
// running state.
type Override struct {
	// What is "breaker", "limit", "brownout" (of a cluster) or "bypass"
	// (of a route).
	What string `json:"what"`
	// Target is the cluster's or the route's name.
	Target string `json:"target"`
	// Value as given: breaker open, closed or auto; limit a number ≥ 1
	// or auto; brownout a level in [0, 1] or auto; bypass on or off.
	Value string `json:"value"`

	// The value parsed: Limit (0: auto), Level (negative: auto), On.
	Limit int     `json:"-"`
	Level float64 `json:"-"`
	On    bool    `json:"-"`
}

// overrideEP serves POST /clusters/{c}/{breaker|limit|brownout}/{value}
// and POST /routes/{r}/bypass/{on|off}.
var overrideEP = &endpoint{methods: []string{http.MethodPost}, serve: (*handler).override}

// policiesEP serves GET /policies.
var policiesEP = &endpoint{methods: []string{http.MethodGet}, serve: (*handler).policies}

// lookupOverride finds an override path ("", clusters|routes, {name},
// what, value); args are what, the target and the value, unescaped.
func lookupOverride(seg []string) (*endpoint, []string) {
	if len(seg) != 5 || seg[0] != "" {
		return nil, nil
	}
	switch {
	case seg[1] == "clusters" && (seg[3] == "breaker" || seg[3] == "limit" || seg[3] == "brownout"):
	case seg[1] == "routes" && seg[3] == "bypass":
	default:
		return nil, nil
	}
	target, err1 := url.PathUnescape(seg[2])
	value, err2 := url.PathUnescape(seg[4])
	if err1 != nil || err2 != nil || target == "" || value == "" {
		return nil, nil
	}
	return overrideEP, []string{seg[3], target, value}
}

// parseOverride checks an override's value; the error is the 400's
// detail.
func parseOverride(what, target, value string) (Override, error) {
	o := Override{What: what, Target: target, Value: value, Level: -1}
	switch what {
	case "breaker":
		if value != "open" && value != "closed" && value != "auto" {
			return o, errors.New("a breaker is forced open, closed, or auto (its own state)")
		}
	case "limit":
		if value != "auto" {
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 || n > 1<<30 {
				return o, errors.New("a limit is pinned to a whole number from 1 to 1073741824, or auto (the adaptive algorithm's)")
			}
			o.Limit = n
		}
	case "brownout":
		if value != "auto" {
			lv, err := strconv.ParseFloat(value, 64)
			if err != nil || !(lv >= 0 && lv <= 1) {
				return o, errors.New("a brownout level is a share from 0 to 1 of requests that run optional work, or auto (the dimmer's)")
			}
			o.Level = lv
		}
	case "bypass":
		if value != "on" && value != "off" {
			return o, errors.New("a route's bypass is on or off")
		}
		o.On = value == "on"
	}
	return o, nil
}

func (h *handler) override(w http.ResponseWriter, r *http.Request, args []string) {
	o, err := parseOverride(args[0], args[1], args[2])
	if err != nil {
		writeProblem(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	err = h.b.Override(o)
	switch {
	case errors.Is(err, ErrNotFound):
		writeProblem(w, http.StatusNotFound, err.Error(), nil)
	case errors.Is(err, ErrBadValue):
		writeProblem(w, http.StatusBadRequest, err.Error(), nil)
	case err != nil:
		h.log.Error("admin: override failed", "what", o.What, "target", o.Target, "value", o.Value, "err", err)
		writeProblem(w, http.StatusInternalServerError, err.Error(), nil)
	default:
		h.log.Info("admin: override", "what", o.What, "target", o.Target, "value", o.Value,
			"remote", r.RemoteAddr, "auth", h.authOf(r))
		writeJSON(w, http.StatusOK, o)
	}
}

// authOf says how a request that passed the checks was authorised.
func (h *handler) authOf(r *http.Request) string {
	if h.hasToken {
		return "token"
	}
	if strings.TrimSpace(r.Header.Get(AdminHeader)) == "1" {
		return "header"
	}
	return "none"
}

func (h *handler) policies(w http.ResponseWriter, _ *http.Request, _ []string) {
	st := h.b.Policies()
	if st.Routes == nil {
		st.Routes = []RoutePolicy{}
	}
	if st.Clusters == nil {
		st.Clusters = []ClusterPolicy{}
	}
	writeJSON(w, http.StatusOK, st)
}
