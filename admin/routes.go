package admin

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// endpoint is one admin resource: the methods it serves and how.
type endpoint struct {
	methods []string
	probe   bool // GET is exempt from the Host and token checks
	auth    auth // with a token configured, what authorises a request
	serve   func(h *handler, w http.ResponseWriter, r *http.Request, args []string)
}

func (e *endpoint) allows(method string) bool { return slices.Contains(e.methods, method) }

var (
	liveEP     = &endpoint{methods: []string{http.MethodGet}, probe: true, serve: (*handler).live}
	readyEP    = &endpoint{methods: []string{http.MethodGet}, probe: true, serve: (*handler).ready}
	metricsEP  = &endpoint{methods: []string{http.MethodGet}, serve: (*handler).serveMetrics}
	configEP   = &endpoint{methods: []string{http.MethodGet}, serve: (*handler).config}
	clustersEP = &endpoint{methods: []string{http.MethodGet}, serve: (*handler).clusters}
	drainEP    = &endpoint{methods: []string{http.MethodPost}, serve: (*handler).drain}
	reloadEP   = &endpoint{methods: []string{http.MethodGet, http.MethodPost}, serve: (*handler).reload}
)

// lookup finds the resource of an escaped path; args are the cluster,
// the endpoint and "drain" or "undrain" for a drain path, unescaped.
func lookup(path string) (*endpoint, []string) {
	switch path {
	case "/live":
		return liveEP, nil
	case "/ready":
		return readyEP, nil
	case "/metrics":
		return metricsEP, nil
	case "/config":
		return configEP, nil
	case "/clusters":
		return clustersEP, nil
	case "/reload":
		return reloadEP, nil
	case "/policies":
		return policiesEP, nil
	}
	if ep := dashboardPaths[path]; ep != nil {
		return ep, nil
	}
	seg := strings.Split(path, "/") // "", clusters, {cluster}, endpoints, {endpoint}, drain|undrain
	if len(seg) == 5 {
		return lookupOverride(seg)
	}
	if len(seg) != 6 || seg[0] != "" || seg[1] != "clusters" || seg[3] != "endpoints" || seg[5] != "drain" && seg[5] != "undrain" {
		return nil, nil
	}
	cluster, err1 := url.PathUnescape(seg[2])
	addr, err2 := url.PathUnescape(seg[4])
	if err1 != nil || err2 != nil || cluster == "" || addr == "" {
		return nil, nil
	}
	return drainEP, []string{cluster, addr, seg[5]}
}

func (h *handler) live(w http.ResponseWriter, _ *http.Request, _ []string) {
	writeText(w, http.StatusOK, "ok\n")
}

func (h *handler) ready(w http.ResponseWriter, _ *http.Request, _ []string) {
	if !h.b.Ready() {
		writeText(w, http.StatusServiceUnavailable, "not ready\n")
		return
	}
	writeText(w, http.StatusOK, "ready\n")
}

func (h *handler) serveMetrics(w http.ResponseWriter, r *http.Request, _ []string) {
	if h.metrics == nil {
		writeProblem(w, http.StatusNotFound, "metrics are off", nil)
		return
	}
	h.metrics.ServeHTTP(w, r)
}

func (h *handler) config(w http.ResponseWriter, _ *http.Request, _ []string) {
	writeJSON(w, http.StatusOK, h.b.Config())
}

func (h *handler) clusters(w http.ResponseWriter, _ *http.Request, _ []string) {
	list := h.b.Clusters()
	if list == nil {
		list = []ClusterStatus{}
	}
	writeJSON(w, http.StatusOK, list)
}

// drainResult is the answer to a drain or undrain.
type drainResult struct {
	Cluster  string `json:"cluster"`
	Endpoint string `json:"endpoint"`
	Draining bool   `json:"draining"`
}

func (h *handler) drain(w http.ResponseWriter, r *http.Request, args []string) {
	cluster, addr, on := args[0], args[1], args[2] == "drain"
	err := h.b.Drain(cluster, addr, on)
	switch {
	case errors.Is(err, ErrNotFound):
		writeProblem(w, http.StatusNotFound, err.Error(), nil)
	case err != nil:
		h.log.Error("admin: drain failed", "cluster", cluster, "endpoint", addr, "draining", on, "err", err)
		writeProblem(w, http.StatusInternalServerError, err.Error(), nil)
	default:
		h.log.Info("admin: drain", "cluster", cluster, "endpoint", addr, "draining", on, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, drainResult{Cluster: cluster, Endpoint: addr, Draining: on})
	}
}

// reload answers GET with the last status, POST by reloading: 200 with
// the new status, or 422 listing the problems (the old configuration
// keeps serving).
func (h *handler) reload(w http.ResponseWriter, r *http.Request, _ []string) {
	if r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, statusOf(h.b.LastReload()))
		return
	}
	if err := h.b.Reload(); err != nil {
		h.log.Warn("admin: reload refused", "remote", r.RemoteAddr, "err", err)
		writeProblem(w, http.StatusUnprocessableEntity, "the configuration was refused; the running one keeps serving", lines(err.Error()))
		return
	}
	st := statusOf(h.b.LastReload())
	h.log.Info("admin: reloaded", "generation", st.Generation, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, st)
}

// statusOf gives Errors a [] instead of null.
func statusOf(st ReloadStatus) ReloadStatus {
	if st.Errors == nil {
		st.Errors = []string{}
	}
	return st
}

// lines splits an error's text into its non-empty lines.
func lines(s string) []string {
	out := []string{}
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
