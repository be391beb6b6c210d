package loadgen

import (
	"encoding/json"
	"io"
	"maps"
	"strconv"
	"time"
)

// WriteJSONL writes one JSON object per line: each step, then each of
// knee's bisection probes and confirmations (knee may be nil), then a
// summary. Field names
// are snake_case; durations are in milliseconds (float), rates in requests
// per second.
//
// A step or probe ("type": "step" or "probe"):
//
//	index, rate, duration_ms, elapsed_ms   the asked rate and duration, the measured span
//	offered, sent, unsent, ok, good, failed, timeouts, retries, attempts
//	throughput, goodput                    OK and Good per second of elapsed
//	error_rate, good_share                 (offered − ok) / offered, good / offered
//	latency_ms, good_latency_ms, send_lag_ms
//	                                       {p50, p90, p99, p999, max}
//	invalid, partial                       send lag p99 above the bound; the run stopped during it
//	statuses                               {"200": n, "0": n (transport error, timeout, unsent)}
//	refusals                               {class: {Spillway-Reason: n}}
//	classes                                {class: {offered, good}} ("" when no class mix)
//
// A confirmation ("type": "confirm") has a step's fields and: confirms
// (what it measured again: "step 3" or "b2"), first_fail_reason (why that
// failed), passed, and fail_reason (why the confirmation failed, "" when
// it passed).
//
// The summary ("type": "summary"): steps, probes and confirmations (how
// many), offered
// and good (over the steps, probes left out), tail_attempts (attempts sent
// after the last step's end), aborted (why the run stopped early, "" if it
// did not), and knee (null when knee is nil):
// {rate, safe, fail, fail_reason, base_p99_ms, bounded, untrusted}.
func WriteJSONL(w io.Writer, res Result, knee *Knee) error {
	enc := json.NewEncoder(w)
	for _, s := range res.Steps {
		if err := enc.Encode(stepJSONOf("step", s)); err != nil {
			return err
		}
	}
	sum := summaryJSON{Type: "summary", Steps: len(res.Steps), Aborted: res.Aborted, Tail: res.TailAttempts}
	for _, s := range res.Steps {
		sum.Offered += s.Offered
		sum.Good += s.Good
	}
	if knee != nil {
		for _, s := range knee.Probes {
			if err := enc.Encode(stepJSONOf("probe", s)); err != nil {
				return err
			}
		}
		for _, cf := range knee.Confirmations {
			j := confirmJSON{stepJSONOf("confirm", cf.Step), cf.Of, cf.First, cf.Passed(), cf.Reason}
			if err := enc.Encode(j); err != nil {
				return err
			}
		}
		sum.Probes, sum.Confirm = len(knee.Probes), len(knee.Confirmations)
		sum.Knee = &kneeJSON{Rate: knee.Rate, Safe: knee.Safe, Fail: knee.Fail, FailReason: knee.FailReason,
			BaseP99: msOf(knee.BaseP99), Bounded: knee.Bounded, Untrusted: knee.Untrusted}
		if sum.Knee.Untrusted == nil {
			sum.Knee.Untrusted = []int{}
		}
	}
	return enc.Encode(sum)
}

type stepJSON struct {
	Type       string                    `json:"type"`
	Index      int                       `json:"index"`
	Rate       float64                   `json:"rate"`
	Duration   float64                   `json:"duration_ms"`
	Elapsed    float64                   `json:"elapsed_ms"`
	Offered    int                       `json:"offered"`
	Sent       int                       `json:"sent"`
	Unsent     int                       `json:"unsent"`
	OK         int                       `json:"ok"`
	Good       int                       `json:"good"`
	Failed     int                       `json:"failed"`
	Timeouts   int                       `json:"timeouts"`
	Retries    int                       `json:"retries"`
	Attempts   int                       `json:"attempts"`
	Throughput float64                   `json:"throughput"`
	Goodput    float64                   `json:"goodput"`
	ErrorRate  float64                   `json:"error_rate"`
	GoodShare  float64                   `json:"good_share"`
	Latency    quantilesJSON             `json:"latency_ms"`
	GoodLat    quantilesJSON             `json:"good_latency_ms"`
	SendLag    quantilesJSON             `json:"send_lag_ms"`
	Invalid    bool                      `json:"invalid"`
	Partial    bool                      `json:"partial"`
	Statuses   map[string]int            `json:"statuses"`
	Refusals   map[string]map[string]int `json:"refusals"`
	Classes    map[string]classJSON      `json:"classes"`
}

type confirmJSON struct {
	stepJSON
	Confirms   string `json:"confirms"`
	First      string `json:"first_fail_reason"`
	Passed     bool   `json:"passed"`
	FailReason string `json:"fail_reason"`
}

type quantilesJSON struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

type classJSON struct {
	Offered int `json:"offered"`
	Good    int `json:"good"`
}

type kneeJSON struct {
	Rate       float64 `json:"rate"`
	Safe       float64 `json:"safe"`
	Fail       float64 `json:"fail"`
	FailReason string  `json:"fail_reason"`
	BaseP99    float64 `json:"base_p99_ms"`
	Bounded    bool    `json:"bounded"`
	Untrusted  []int   `json:"untrusted"`
}

type summaryJSON struct {
	Type    string    `json:"type"`
	Steps   int       `json:"steps"`
	Probes  int       `json:"probes"`
	Confirm int       `json:"confirmations"`
	Offered int       `json:"offered"`
	Good    int       `json:"good"`
	Tail    int       `json:"tail_attempts"`
	Aborted string    `json:"aborted"`
	Knee    *kneeJSON `json:"knee"`
}

func stepJSONOf(kind string, s StepResult) stepJSON {
	j := stepJSON{Type: kind, Index: s.Index, Rate: s.Rate, Duration: msOf(s.Duration), Elapsed: msOf(s.Elapsed),
		Offered: s.Offered, Sent: s.Sent, Unsent: s.Unsent, OK: s.OK, Good: s.Good, Failed: s.Failed,
		Timeouts: s.Timeouts, Retries: s.Retries, Attempts: s.Attempts,
		Throughput: s.Throughput, Goodput: s.Goodput, ErrorRate: s.ErrorRate(), GoodShare: s.GoodShare(),
		Latency: quantilesOf(s.Latency), GoodLat: quantilesOf(s.GoodLatency), SendLag: quantilesOf(s.SendLag),
		Invalid: s.Invalid, Partial: s.Partial,
		Statuses: map[string]int{}, Refusals: map[string]map[string]int{}, Classes: map[string]classJSON{}}
	for code, n := range s.Statuses {
		j.Statuses[strconv.Itoa(code)] = n
	}
	for class, reasons := range s.Refusals {
		j.Refusals[class] = maps.Clone(reasons)
	}
	for name, c := range s.Classes {
		j.Classes[name] = classJSON{Offered: c.Offered, Good: c.Good}
	}
	return j
}

func quantilesOf(q Quantiles) quantilesJSON {
	return quantilesJSON{P50: msOf(q.P50), P90: msOf(q.P90), P99: msOf(q.P99), P999: msOf(q.P999), Max: msOf(q.Max)}
}

// msOf is d in milliseconds, to the microsecond.
func msOf(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
