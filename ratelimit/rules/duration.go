package rules

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParsePer returns the seconds a rule's "per" field names: a Go duration
// ("1s", "1m", "15m", "1h", "1h30m", "500ms"), a number of days ("1d",
// "7d", "0.5d"), or one of the words "second", "minute", "hour", "day". A
// number without a unit (a YAML or JSON number, not a string) is seconds;
// the loader handles that case before calling ParsePer.
func ParsePer(s string) (float64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "second", "sec":
		return 1, nil
	case "minute", "min":
		return 60, nil
	case "hour":
		return 3600, nil
	case "day":
		return 86400, nil
	}
	if n, ok := strings.CutSuffix(t, "d"); ok && n != "" {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil || !(days > 0) || math.IsInf(days, 1) || strings.ContainsAny(n, "xXpP_") {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return days * 86400, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (want e.g. 1s, 1m, 15m, 1h, 1d)", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d.Seconds(), nil
}

// FormatPer writes seconds the way ParsePer reads them, briefly: "1s",
// "15m", "1h", "1d", "1.5s".
func FormatPer(sec float64) string {
	for _, u := range [...]struct {
		s float64
		n string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}} {
		if n := sec / u.s; n >= 1 && n == math.Trunc(n) {
			return strconv.FormatFloat(n, 'f', -1, 64) + u.n
		}
	}
	return strconv.FormatFloat(sec, 'f', -1, 64) + "s"
}
