package metrics

import (
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/spillwayhq/spillway/proxy"
)

// series gathers m's registry and returns the samples of the named family
// as "label=value,…" (labels in name order) → value; a histogram's value
// is its sample count.
func series(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			out[labelKey(s.GetLabel())] = valueOf(s)
		}
	}
	return out
}

func labelKey(ls []*dto.LabelPair) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.GetName() + "=" + l.GetValue()
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func valueOf(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return -1
}

// nonZero drops the zero samples (pre-resolved children that saw nothing).
func nonZero(in map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range in {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// expect compares got with want, reporting every difference.
func expect(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: missing {%s} (want %v)", what, k, w)
		} else if g != w {
			t.Errorf("%s{%s} = %v, want %v", what, k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected {%s} = %v", what, k, g)
		}
	}
}

func newMetrics(t testing.TB, opts Options) *Metrics {
	t.Helper()
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func itoa(i int) string { return strconv.Itoa(i) }

// ending is an answer without a reason code or class.
func ending(status int, fromUpstream bool, seconds float64) proxy.Ending {
	return proxy.Ending{Status: status, FromUpstream: fromUpstream, Seconds: seconds}
}
