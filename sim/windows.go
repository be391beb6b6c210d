package sim

import (
	"math"

	"github.com/spillwayhq/spillway/ratelimit"
)

var windows = Scenario{
	Name:    "windows",
	Ref:     "window_counters",
	Summary: "fixed window, sliding log and sliding window counter at a window boundary",
	Bind: func(f *Flags) Runner {
		limit := f.Int("limit", 100, Positive, 1e6, "requests allowed per window; also the size of each burst (at most 1e6)")
		window := f.Float("window", 60, Positive, "window length W, seconds; the bursts last W/60 and start at 59/60 W, W, W/60 and 1.5 W (0:59, 1:00, 0:01 and 1:30 for 60 s)")
		return func() (*Report, error) { return runWindows(*limit, *window) }
	},
}

// windowCase is one pair of bursts: starts of the first and second burst.
type windowCase struct {
	name          string
	first, second float64
}

func runWindows(limit int, window float64) (*Report, error) {
	q := ratelimit.Quota{Limit: limit, Window: window}
	fw, err := ratelimit.NewFixedWindow(q)
	if err != nil {
		return nil, Badf("window", "%v", err)
	}
	sl, err := ratelimit.NewSlidingLog(q)
	if err != nil {
		return nil, Badf("limit", "%v", err)
	}
	sc, err := ratelimit.NewSlidingCounter(q)
	if err != nil {
		return nil, Badf("window", "%v", err)
	}
	// The reference's bursts, scaled to the window: 100 requests 10 ms apart
	// (1 s = W/60) at 59 s (W − W/60), 60 s (W), 1 s (W/60) and 90 s (1.5 W).
	late, edge, early, mid := window-window/60, window, window/60, 1.5*window
	spacing := window / 60 / float64(limit)
	burst := func(start float64) []float64 {
		ts := make([]float64, limit)
		for i := range ts {
			ts[i] = start + float64(i)*spacing
		}
		return ts
	}
	cases := []windowCase{{"A", late, edge}, {"B", early, mid}, {"C", late, mid}}

	r := &Report{}
	r.Println("case                           fixed     log  counter   (allowed: 1st burst + 2nd burst)")
	table := r.Table("cases", "case", "fixed_first", "fixed_second", "log_first", "log_second", "counter_first", "counter_second")
	for _, c := range cases {
		first, second := burst(c.first), burst(c.second)
		name := c.name + ": " + Int(limit) + " at " + windowsClock(c.first) + ", " + Int(limit) + " at " + windowsClock(c.second)
		f1, f2 := windowsCount(fw, first, second)
		l1, l2 := windowsCount(sl, first, second)
		c1, c2 := windowsCount(sc, first, second)
		line := PadEnd(name, 29)
		for i, pair := range [][2]int{{f1, f2}, {l1, l2}, {c1, c2}} {
			if i > 0 {
				line += " "
			}
			line += PadStart(Int(pair[0])+"+"+Int(pair[1]), 8)
		}
		r.Println(line)
		table.Add(name, f1, f2, l1, l2, c1, c2)
	}

	// Case A under the fixed window, request by request.
	var s ratelimit.FixedWindowState
	var okA []float64
	for _, t := range append(burst(late), burst(edge)...) {
		if fw.Decide(&s, t, 1).Allowed {
			okA = append(okA, t)
		}
	}
	firstOK, lastOK := okA[0], okA[len(okA)-1]
	r.Println("")
	r.Println("fixed window, case A: " + Int(len(okA)) + " allowed between " + Fixed(firstOK, 2) + " s and " +
		Fixed(lastOK, 2) + " s -> " + Num(float64(len(okA))/float64(limit)) + "x the limit in under " +
		Num(math.Floor(lastOK-firstOK)+1) + " s")
	r.Table("fixed_window_case_a", "allowed", "first_s", "last_s", "times_limit").
		Add(len(okA), firstOK, lastOK, float64(len(okA))/float64(limit))
	return r, nil
}

// windowsCount runs both bursts through one fresh state and returns how many
// of each were allowed.
func windowsCount[S any](alg ratelimit.Decider[S], first, second []float64) (int, int) {
	var s S
	count := func(ts []float64) int {
		n := 0
		for _, t := range ts {
			if alg.Decide(&s, t, 1).Allowed {
				n++
			}
		}
		return n
	}
	a := count(first)
	return a, count(second)
}

// windowsClock writes a whole number of seconds as m:ss, as the reference's
// case names do, and any other time as seconds with two decimals.
func windowsClock(t float64) string {
	if t != math.Trunc(t) || t >= 1e15 {
		return Fixed(t, 2) + " s"
	}
	m := math.Floor(t / 60)
	sec := int(t - 60*m)
	return Num(m) + ":" + string(rune('0'+sec/10)) + string(rune('0'+sec%10))
}
