// Package httplimit_test checks the RateLimit-Policy and RateLimit fields
// that package ratelimit/httplimit sends with a structured-fields parser
// this project did not write (github.com/dunglas/httpsfv, RFC 9651).
package httplimit_test

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"

	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/ratelimit/httplimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// maxSF is the largest structured-field integer: 15 digits.
const maxSF = 999_999_999_999_999

// limitRule is one rule as written: rate per per seconds (decimal strings,
// so that the test knows the exact rate), burst 0 meaning the default.
type limitRule struct {
	alg, rate, per string
	burst          int64
}

func (l limitRule) yaml(id string) string {
	s := fmt.Sprintf("rules:\n- {id: %s, rate: %s, per: %s, algorithm: %s", id, l.rate, l.per, l.alg)
	if l.burst > 0 {
		s += fmt.Sprintf(", burst: %d", l.burst)
	}
	return s + "}\n"
}

// ratePerSecond is the rule's exact rate.
func (l limitRule) ratePerSecond(t *testing.T) *big.Rat {
	r, ok1 := new(big.Rat).SetString(l.rate)
	p, ok2 := new(big.Rat).SetString(l.per)
	if !ok1 || !ok2 {
		t.Fatalf("%+v: not decimals", l)
	}
	return r.Quo(r, p)
}

// capacity is the most units the rule admits at once: the burst (⌈rate⌉
// by default) for buckets, the rate for windows.
func (l limitRule) capacity(t *testing.T) int64 {
	r, _ := new(big.Rat).SetString(l.rate)
	f, _ := r.Float64()
	if l.alg == "fixed-window" || l.alg == "sliding-log" || l.alg == "sliding-window" {
		return int64(f)
	}
	if l.burst > 0 {
		return l.burst
	}
	return int64(math.Ceil(f))
}

// theRules are every algorithm over rates from one per 10¹⁶ s to 10¹⁵ per
// second, periods from a millisecond to 10¹⁵ s, bursts from 1 to 2³²−1,
// and the issue's three cases; combinations a rules file refuses are left
// out (the issue's cases must load).
func theRules() []limitRule {
	must := []limitRule{
		{"gcra", "4000000000", "60", 0}, // q was capped at 2³¹−1
		{"token-bucket", "2", "1", 4},   // q=2;w=1 next to r=3
		{"gcra", "1", "1.5", 0},         // w rounded to 2
		{"gcra", "3", "1.5", 0},         //
		{"gcra", "1", "1e15", 0},        // tiny: no 15-digit window holds one unit
		{"gcra", "1", "1e16", 0},        //
		{"gcra", "1e15", "1", 1},        // huge
		{"gcra", "0.3333333333333333", "1", 1},
	}
	out := append([]limitRule(nil), must...)
	for _, alg := range []string{"gcra", "token-bucket", "leaky-meter", "leaky-queue"} {
		for _, rate := range []string{"1", "2", "3", "2.5", "0.5", "0.1", "7", "100", "1000", "4000000000", "0.001"} {
			for _, per := range []string{"1", "1.5", "0.1", "0.001", "60", "900", "3600", "86400", "2.5", "7"} {
				for _, burst := range []int64{0, 1, 4, 20, 1000, 4294967295} {
					out = append(out, limitRule{alg, rate, per, burst})
				}
			}
		}
	}
	for _, alg := range []string{"fixed-window", "sliding-log", "sliding-window"} {
		for _, rate := range []string{"1", "3", "7", "10", "100", "1000", "1000000", "4000000000"} {
			for _, per := range []string{"1", "1.5", "0.1", "60", "900", "86400", "2.5", "1e15"} {
				out = append(out, limitRule{alg, rate, per, 0})
			}
		}
	}
	return out
}

// TestRateLimitFieldsParseAndAgree sends requests through each rule (fresh,
// a burst to refusal, half a period later) and checks every RateLimit-Policy
// and RateLimit field with the parser: one item named by the rule, integer
// parameters of at most 15 digits, r ≤ q, q at least the rule's capacity,
// and, where the policy states a window, q/w no more than the rule's rate
// and less than one unit per window below it (or q at the 15-digit cap).
func TestRateLimitFieldsParseAndAgree(t *testing.T) {
	loaded, responses := 0, 0
	for i, lr := range theRules() {
		id := fmt.Sprintf("r%d", i)
		set, err := rules.Parse("rules.yaml", []byte(lr.yaml(id)))
		if err != nil {
			if i < 8 {
				t.Fatalf("%+v: the issue's case does not load: %v", lr, err)
			}
			continue
		}
		loaded++
		clk := &clock.Manual{T: 1000}
		lim, err := httplimit.New(set, httplimit.Config{Clock: clk})
		if err != nil {
			t.Fatalf("%+v: %v", lr, err)
		}
		h := lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		cancelled, cancel := context.WithCancel(context.Background())
		cancel() // a leaky queue's delay ends at once
		burst := min(lr.capacity(t)+1, 30)
		for j := range burst + 2 {
			if j == burst+1 {
				f, _ := new(big.Rat).SetString(lr.per)
				half, _ := f.Float64()
				clk.Advance(half / 2)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(cancelled))
			if w.Code == http.StatusBadRequest {
				// A request of cost 1 always fits the rule: even a wait
				// beyond int64 nanoseconds (about 292 years) is a 429.
				t.Errorf("%+v: 400 for a request of cost 1: %s", lr, w.Body.String())
				continue
			}
			checkFields(t, lr, id, w.Result().Header)
			responses++
		}
		_ = lim.Close()
	}
	if loaded < 500 {
		t.Errorf("only %d rules loaded", loaded)
	}
	t.Logf("%d rules, %d responses checked", loaded, responses)
}

// checkFields parses and checks one response's fields.
func checkFields(t *testing.T, lr limitRule, id string, h http.Header) {
	t.Helper()
	pol := item(t, lr, id, "RateLimit-Policy", h)
	cur := item(t, lr, id, "RateLimit", h)
	if pol == nil || cur == nil {
		return
	}
	q, hasQ := integer(t, lr, pol, "q")
	w, hasW := integer(t, lr, pol, "w")
	r, hasR := integer(t, lr, cur, "r")
	_, hasT := integer(t, lr, cur, "t")
	switch {
	case !hasQ || !hasR || !hasT:
		t.Errorf("%+v: q, r or t missing: %v / %v", lr, h["Ratelimit-Policy"], h["Ratelimit"])
	case r > q:
		t.Errorf("%+v: r=%d > q=%d", lr, r, q)
	case q < lr.capacity(t):
		t.Errorf("%+v: q=%d below the capacity %d", lr, q, lr.capacity(t))
	case hasW && w < 1:
		t.Errorf("%+v: w=%d", lr, w)
	}
	rate := lr.ratePerSecond(t)
	if !hasW {
		// No window claimed: only when none of at most 15 digits holds
		// the capacity at the rule's rate.
		need := new(big.Rat).Quo(new(big.Rat).SetInt64(lr.capacity(t)), rate)
		if need.Cmp(new(big.Rat).SetInt64(maxSF)) <= 0 {
			t.Errorf("%+v: no w, though %s s would hold the capacity", lr, need.FloatString(3))
		}
		return
	}
	stated := big.NewRat(q, w)
	if stated.Cmp(rate) > 0 {
		t.Errorf("%+v: q=%d;w=%d states more than the rule's rate %s/s", lr, q, w, rate.FloatString(6))
	}
	// rate·w − q < 1: no integer q closer to the rate over this window.
	gap := new(big.Rat).Sub(new(big.Rat).Mul(rate, new(big.Rat).SetInt64(w)), new(big.Rat).SetInt64(q))
	if q != maxSF && gap.Cmp(big.NewRat(1, 1)) >= 0 {
		t.Errorf("%+v: q=%d;w=%d is %s units a window below the rate", lr, q, w, gap.FloatString(3))
	}
}

// item parses a field as a structured-field List and returns its one Item
// (the rule's), or nil after reporting why not.
func item(t *testing.T, lr limitRule, id, name string, h http.Header) *httpsfv.Item {
	t.Helper()
	vals := h.Values(name)
	list, err := httpsfv.UnmarshalList(vals)
	if err != nil || len(list) != 1 {
		t.Errorf("%+v: %s %q: %v (%d members)", lr, name, vals, err, len(list))
		return nil
	}
	it, ok := list[0].(httpsfv.Item)
	if !ok || it.Value != id {
		t.Errorf("%+v: %s %q: not an item named %q", lr, name, vals, id)
		return nil
	}
	return &it
}

// integer returns an Integer parameter (the parser accepts at most 15
// digits), reporting a parameter of another type or a negative one.
func integer(t *testing.T, lr limitRule, it *httpsfv.Item, key string) (int64, bool) {
	t.Helper()
	v, ok := it.Params.Get(key)
	if !ok {
		return 0, false
	}
	n, isInt := v.(int64)
	if !isInt || n < 0 || n > maxSF {
		t.Errorf("%+v: %s=%v is not an Integer from 0 to %d", lr, key, v, int64(maxSF))
		return 0, false
	}
	return n, true
}

// The fields as the parser serialises them again, for the issue's cases:
// what a client library that re-emits them would send.
func TestIssueCasesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		lr   limitRule
		want string
	}{
		{limitRule{"gcra", "4000000000", "60", 0}, `"x";q=4000000000;w=60`},
		{limitRule{"token-bucket", "2", "1", 4}, `"x";q=4;w=2`},
		{limitRule{"gcra", "1", "1.5", 0}, `"x";q=2;w=3`},
		{limitRule{"gcra", "1", "1e16", 0}, `"x";q=1`},
	} {
		set, err := rules.Parse("rules.yaml", []byte(tc.lr.yaml("x")))
		if err != nil {
			t.Fatal(err)
		}
		lim, err := httplimit.New(set, httplimit.Config{Clock: &clock.Manual{T: 1}})
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		list, err := httpsfv.UnmarshalList(w.Result().Header.Values("RateLimit-Policy"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := httpsfv.Marshal(list)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.lr, got, err, tc.want)
		}
		if !strings.HasPrefix(w.Result().Header.Get("RateLimit"), `"x";r=`) {
			t.Errorf("RateLimit %q", w.Result().Header.Get("RateLimit"))
		}
		_ = lim.Close()
	}
}
