package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

// retryStormRealRows runs retry-storm with args and returns the policies
// table's rows by policy name.
func retryStormRealRows(t *testing.T, args ...string) (*Report, map[string][]any) {
	t.Helper()
	sc, ok := Lookup("retry-storm")
	if !ok {
		t.Fatal("no retry-storm scenario")
	}
	rep := runDefaults(t, sc, args...)
	if len(rep.Tables) != 1 {
		t.Fatalf("want one table, got %d", len(rep.Tables))
	}
	rows := map[string][]any{}
	for _, row := range rep.Tables[0].Rows {
		rows[row[0].(string)] = row
	}
	return rep, rows
}

// recoveryOf returns a row's recovery_after_s column, +Inf for never.
func recoveryOf(t *testing.T, row []any) float64 {
	t.Helper()
	switch v := row[5].(type) {
	case nil:
		return math.Inf(1)
	case float64:
		return v
	}
	t.Fatalf("recovery_after_s is %T %v", row[5], row[5])
	return 0
}

// The same flags give the same text and JSON, run after run; another seed
// gives other numbers.
func TestRetryStormRealDeterministic(t *testing.T) {
	run := func(args ...string) (string, string) {
		rep, _ := retryStormRealRows(t, args...)
		var js bytes.Buffer
		if err := rep.WriteJSON(&js, "retry-storm"); err != nil {
			t.Fatal(err)
		}
		return rep.Text.String(), js.String()
	}
	text1, json1 := run("--policies", "real")
	text2, json2 := run("--policies", "real")
	if text1 != text2 || json1 != json2 {
		t.Fatalf("two runs differ:\n%s\n%s", text1, text2)
	}
	if text3, _ := run("--policies", "real", "--seed", "10"); text3 == text1 {
		t.Error("--seed 10 printed the same table as --seed 9")
	}
}

// With the library's policies the offered load in the dip stays within
// 1.3× the new requests (the budget holds retries to 10% of them), and the
// system recovers, sooner than without a budget; on a server that drops
// expired work and on one that does not, with either breaker.
func TestRetryStormRealBoundsLoadAndRecovers(t *testing.T) {
	for _, args := range [][]string{
		{"--policies", "real"},
		{"--policies", "real", "--drop-expired=false"},
		{"--policies", "real", "--breaker", "consecutive"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, rows := retryStormRealRows(t, args...)
			noBudget, ok := rows["seed: no budget"]
			if !ok {
				t.Fatal("no \"seed: no budget\" row")
			}
			if x := noBudget[2].(float64); x < 2 {
				t.Errorf("without a budget the dip's load is %.2fx, want a storm (at least 2x)", x)
			}
			limit := recoveryOf(t, noBudget)
			for _, name := range []string{"real: budget", "real: + throttle", "real: + breaker"} {
				row, ok := rows[name]
				if !ok {
					t.Fatalf("no %q row", name)
				}
				if x := row[2].(float64); x > 1.3 {
					t.Errorf("%s: load in dip %.2fx the new requests, want at most 1.3x", name, x)
				}
				if rec := recoveryOf(t, row); !(rec < limit) {
					t.Errorf("%s: recovery after %v s, want finite and sooner than without a budget (%v s)", name, rec, limit)
				}
			}
		})
	}
}

// When the server all but stops answering (0.5 requests/s for 100 s),
// both local refusals do their job: the throttle (short window) and the
// breaker each keep the offered load in the dip under half of what the
// budget alone lets through, and they report refusals.
func TestRetryStormRealDeadServer(t *testing.T) {
	_, rows := retryStormRealRows(t, "--policies", "real", "--dip-capacity", "0.5", "--dip-from", "30", "--dip-to", "130",
		"--end", "200", "--throttle-window", "10", "--drop-expired=false")
	budget := rows["real: budget"][1].(float64)
	if budget < 60 {
		t.Fatalf("budget alone sent %v attempts/s in the dip, want at least the new requests' ~70", budget)
	}
	throttled := rows["real: + throttle"]
	if got := throttled[1].(float64); got > budget/2 {
		t.Errorf("throttle: %v attempts/s in the dip, want at most half of %v", got, budget)
	}
	if n := throttled[8].(int); n == 0 {
		t.Error("throttle row: no call throttled")
	}
	broken := rows["real: + breaker"]
	if got := broken[1].(float64); got > budget/2 {
		t.Errorf("breaker: %v attempts/s in the dip, want at most half of %v", got, budget)
	}
	if n := broken[9].(int); n == 0 {
		t.Error("breaker row: no attempt refused by the breaker")
	}
}

// A deadline shorter than the attempt timeout leaves no time for a retry:
// every call sends exactly one attempt, abandoned at the deadline when the
// server is late, and no retry is ever decided.
func TestRetryStormRealDeadlineBeforeTimeout(t *testing.T) {
	p := retryStormParams{seed: 9, end: 120, timeout: 1, newRate: 70, capacity: 100, dipCap: 50, dipFrom: 30, dipTo: 60,
		maxRetries: 3}
	deadline, k, w, drop := 0.5, 0.0, 120.0, false
	o := &retryStormRealFlags{policies: retryStormReal, deadline: &deadline, throttleK: &k, throttleW: &w, drop: &drop}
	var st retryStormRealStats
	att, _, err := p.simulateReal(o, retryStormRealRow{}, &st)
	if err != nil {
		t.Fatal(err)
	}
	calls := len(p.arrivals(rng.New(p.seed)))
	if sent := Sum(att); sent != float64(calls) {
		t.Errorf("%v attempts sent for %d calls, want one each", sent, calls)
	}
	if st.cut == 0 {
		t.Error("no attempt was abandoned at its deadline, though the dip makes the queue wait past 0.5 s")
	}
	if st.stops != [5]int{} {
		t.Errorf("Policy.Next was asked (stops %v): a timeout after the deadline must end the call first", st.stops)
	}
}

// The rows follow the flags: the throttle and breaker rows are left out when
// they are off; every row has every column, and the charts one series per
// row plus the capacity.
func TestRetryStormRealRowsFollowFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		rows []string
	}{
		{[]string{"--policies", "real"}, []string{"seed: no budget", "seed: budget", "real: budget", "real: + throttle", "real: + breaker"}},
		{[]string{"--policies", "real", "--throttle-k", "0"}, []string{"seed: no budget", "seed: budget", "real: budget", "real: + breaker"}},
		{[]string{"--policies", "real", "--throttle-k", "0", "--breaker", "off"}, []string{"seed: no budget", "seed: budget", "real: budget"}},
	} {
		rep, _ := retryStormRealRows(t, c.args...)
		tab := rep.Tables[0]
		var names []string
		for _, row := range tab.Rows {
			names = append(names, row[0].(string))
			if len(row) != len(tab.Columns) {
				t.Errorf("%v: row %v has %d values for %d columns", c.args, row[0], len(row), len(tab.Columns))
			}
		}
		if strings.Join(names, "|") != strings.Join(c.rows, "|") {
			t.Errorf("%v: rows %q, want %q", c.args, names, c.rows)
		}
		text := rep.Text.String()
		for _, name := range c.rows {
			if !strings.Contains(text, "\n"+name+" ") {
				t.Errorf("%v: text has no line for %q:\n%s", c.args, name, text)
			}
		}
		if len(rep.Charts) != 2 || len(rep.Charts[0].Series) != len(c.rows)+1 || len(rep.Charts[1].Series) != len(c.rows)+1 {
			t.Errorf("%v: want 2 charts of %d series", c.args, len(c.rows)+1)
		}
	}
}

// Short runs and a dip past the end print numbers, never NaN or Infinity.
func TestRetryStormRealEdgeParameters(t *testing.T) {
	for _, args := range [][]string{
		{"--end", "1"},
		{"--end", "100", "--dip-from", "150", "--dip-to", "200"},
		{"--new", "0.001", "--end", "30"},
		{"--max-retries", "0", "--deadline", "0.001"},
	} {
		rep, _ := retryStormRealRows(t, append([]string{"--policies", "real"}, args...)...)
		if text := rep.Text.String(); strings.Contains(text, "NaN") || strings.Contains(text, "Infinity") {
			t.Errorf("%v printed\n%s", args, text)
		}
	}
}

// Bad real-mode flags are usage errors naming the flag; real-mode flags
// given without --policies real are refused rather than ignored.
func TestRetryStormRealBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--policies", "fancy"}, "policies"},
		{[]string{"--policies", "real", "--breaker", "sometimes"}, "breaker"},
		{[]string{"--policies", "real", "--throttle-k", "0.5"}, "throttle-k"},
		{[]string{"--policies", "real", "--throttle-k", "-1"}, "throttle-k"},
		{[]string{"--policies", "real", "--throttle-window", "0"}, "throttle-window"},
		{[]string{"--policies", "real", "--throttle-window", "36001"}, "throttle-window"},
		{[]string{"--policies", "real", "--deadline", "0"}, "deadline"},
		{[]string{"--policies", "real", "--deadline", "NaN"}, "deadline"},
		{[]string{"--deadline", "3"}, "deadline"},
		{[]string{"--policies", "seed", "--breaker", "off"}, "breaker"},
		{[]string{"--throttle-k", "2"}, "throttle-k"},
		{[]string{"--drop-expired=false"}, "drop-expired"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			sc, _ := Lookup("retry-storm")
			f := NewFlags(sc.Name)
			run := sc.Bind(f)
			err := f.FlagSet().Parse(c.args)
			if err == nil {
				var rep *Report
				if rep, err = run(); err == nil {
					t.Fatalf("accepted; printed\n%s", rep.Text.String())
				}
				if !IsUsage(err) {
					t.Fatalf("error %v is not a usage error", err)
				}
			}
			if !strings.Contains(err.Error(), c.flag) {
				t.Fatalf("error %q does not name --%s", err, c.flag)
			}
		})
	}
}

// BenchmarkRetryStormReal runs the whole real-mode scenario with its
// defaults (two seed rows and three real rows over 240 s at 70 calls/s).
func BenchmarkRetryStormReal(b *testing.B) {
	sc, _ := Lookup("retry-storm")
	f := NewFlags(sc.Name)
	run := sc.Bind(f)
	if err := f.FlagSet().Parse([]string{"--policies", "real"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := run(); err != nil {
			b.Fatal(err)
		}
	}
}
