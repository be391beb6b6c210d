package loadgen

import (
	"bytes"
	"context"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
)

// maxPrebuilt bounds the requests built ahead of the run (targets × classes).
const maxPrebuilt = 4096

// target is a Target compiled once: its templates, and for a target without
// variables the requests themselves, one per class.
type target struct {
	method string
	url    tmpl
	header []field
	body   tmpl
	// For a target without variables (when the run has at most
	// maxPrebuilt of them), reqs[c+1] is the request of class c (reqs[0]:
	// no class), shared read-only by every call (WithContext copies it,
	// GetBody gives each call its own body); nil otherwise.
	reqs []*http.Request
}

type field struct {
	name  string // canonical
	value tmpl
}

// mix draws an arrival's target and class, and fills in its request.
type mix struct {
	targets     []target
	cumWeight   []float64 // cumulative target weights
	classes     []string
	cumShare    []float64 // cumulative class shares; above the last: no class
	classHeader string
	ranges      []int64 // variable value counts, by variable index
}

func newMix(cfg Config) (*mix, error) {
	names, index := varIndex(cfg.Vars)
	m := &mix{classHeader: cfg.ClassHeader}
	for _, name := range names {
		m.ranges = append(m.ranges, int64(cfg.Vars[name]))
	}
	total, share := 0.0, 0.0
	for _, c := range cfg.Classes {
		share += c.Share
		m.classes = append(m.classes, c.Name)
		m.cumShare = append(m.cumShare, share)
	}
	prebuild := len(cfg.Targets)*(len(cfg.Classes)+1) <= maxPrebuilt
	for _, t := range cfg.Targets {
		ct, err := m.compileTarget(t, index, prebuild)
		if err != nil {
			return nil, err // checked by withDefaults already
		}
		w := t.Weight
		if w == 0 {
			w = 1
		}
		total += w
		m.targets = append(m.targets, ct)
		m.cumWeight = append(m.cumWeight, total)
	}
	return m, nil
}

func (m *mix) compileTarget(t Target, index map[string]int, prebuild bool) (target, error) {
	ct := target{method: t.Method}
	if ct.method == "" {
		ct.method = http.MethodGet
	}
	var err error
	if ct.url, err = compile(t.URL, index); err != nil {
		return ct, err
	}
	if ct.body, err = compile(string(t.Body), index); err != nil {
		return ct, err
	}
	static := ct.url.static() && ct.body.static()
	for _, name := range slices.Sorted(maps.Keys(t.Header)) {
		for _, v := range t.Header[name] {
			f := field{name: http.CanonicalHeaderKey(name)}
			if f.value, err = compile(v, index); err != nil {
				return ct, err
			}
			static = static && f.value.static()
			ct.header = append(ct.header, f)
		}
	}
	if static && prebuild {
		for c := -1; c < len(m.classes); c++ {
			r, err := m.build(context.Background(), &ct, c, nil, 0)
			if err != nil {
				return ct, err
			}
			ct.reqs = append(ct.reqs, r)
		}
	}
	return ct, nil
}

// pick draws a target index and a class index (−1: no class) from r.
func (m *mix) pick(r *rand.Rand) (tgt, class int) {
	if len(m.targets) > 1 {
		u := r.Float64() * m.cumWeight[len(m.cumWeight)-1]
		tgt = sort.Search(len(m.cumWeight), func(i int) bool { return u < m.cumWeight[i] })
		tgt = min(tgt, len(m.targets)-1)
	}
	class = -1
	if len(m.classes) > 0 {
		u := r.Float64()
		for i, c := range m.cumShare {
			if u < c {
				class = i
				break
			}
		}
	}
	return tgt, class
}

// request returns the request of arrival a on ctx. The variables' values
// are drawn from a's own seed through d.
func (m *mix) request(ctx context.Context, a *arrival, d *draws) (*http.Request, error) {
	t := &m.targets[a.target]
	if t.reqs != nil {
		r := t.reqs[a.class+1].WithContext(ctx)
		if r.GetBody != nil {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		return r, nil
	}
	d.pcg.Seed(a.draw, a.seq)
	for i, n := range m.ranges {
		d.vals[i] = int64(d.rnd.Uint64N(uint64(n)))
	}
	return m.build(ctx, t, int(a.class), d.vals, a.seq)
}

// build makes a request of target t and class c, its templates filled with
// vals and seq.
func (m *mix) build(ctx context.Context, t *target, c int, vals []int64, seq uint64) (*http.Request, error) {
	url := t.url.render(nil, vals, seq)
	var body []byte
	if len(t.body.parts) > 0 {
		body = t.body.render(nil, vals, seq)
	}
	r, err := http.NewRequestWithContext(ctx, t.method, string(url), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, 0
	}
	r.Header = make(http.Header, len(t.header)+1)
	for _, f := range t.header {
		v := string(f.value.render(nil, vals, seq))
		if f.name == "Host" {
			r.Host = v
			continue
		}
		r.Header[f.name] = append(r.Header[f.name], v)
	}
	if c >= 0 {
		r.Header[m.classHeader] = []string{m.classes[c]}
	}
	return r, nil
}

// className returns the name of class c ("" for −1, no class).
func (m *mix) className(c int) string {
	if c < 0 {
		return ""
	}
	return m.classes[c]
}

// draws is one worker's scratch for variable values: a generator reseeded
// per arrival, so values do not depend on which worker sends it.
type draws struct {
	pcg  *rand.PCG
	rnd  *rand.Rand
	vals []int64
}

func newDraws(n int) *draws {
	pcg := rand.NewPCG(0, 0)
	return &draws{pcg: pcg, rnd: rand.New(pcg), vals: make([]int64, n)}
}
