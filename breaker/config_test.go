package breaker

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// Every invalid field is named by a *ConfigError wrapping ErrConfig.
func TestConfigErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	count := Config{Window: CountWindow}
	tw := Config{Window: TimeWindow}
	with := func(c Config, f func(*Config)) Config { f(&c); return c }
	for _, c := range []struct {
		c     Config
		field string
	}{
		{Config{Window: 3}, "Window"},
		{Config{Threshold: -1}, "Threshold"},
		{with(count, func(c *Config) { c.Threshold = 3 }), "Threshold"},
		{Config{Recovery: -1}, "Recovery"},
		{Config{Recovery: nan}, "Recovery"},
		{Config{Recovery: inf}, "Recovery"},
		{Config{Trials: -2}, "Trials"},
		{Config{RecoveryMultiplier: 0.5}, "RecoveryMultiplier"},
		{Config{RecoveryMultiplier: nan}, "RecoveryMultiplier"},
		{Config{RecoveryMultiplier: inf, MaxRecovery: 10}, "RecoveryMultiplier"},
		{Config{RecoveryMultiplier: 2}, "MaxRecovery"},                 // uncapped growth
		{Config{RecoveryMultiplier: 2, MaxRecovery: 4}, "MaxRecovery"}, // below the default Recovery 5
		{Config{MaxRecovery: -1}, "MaxRecovery"},
		{Config{MaxRecovery: nan}, "MaxRecovery"},
		// rate fields with Consecutive
		{Config{WindowCalls: 10}, "WindowCalls"},
		{Config{WindowSeconds: 10}, "WindowSeconds"},
		{Config{BucketSeconds: 1}, "BucketSeconds"},
		{Config{MinCalls: 5}, "MinCalls"},
		{Config{FailureRate: 0.5}, "FailureRate"},
		{Config{SlowCall: 1}, "SlowCall"},
		{Config{SlowCallRate: 0.5}, "SlowCallRate"},
		// the wrong window's fields
		{with(tw, func(c *Config) { c.WindowCalls = 10 }), "WindowCalls"},
		{with(count, func(c *Config) { c.WindowSeconds = 10 }), "WindowSeconds"},
		{with(count, func(c *Config) { c.BucketSeconds = 1 }), "BucketSeconds"},
		// count window
		{with(count, func(c *Config) { c.WindowCalls = -1 }), "WindowCalls"},
		{with(count, func(c *Config) { c.WindowCalls = MaxWindowCalls + 1 }), "WindowCalls"},
		{with(count, func(c *Config) { c.WindowCalls, c.MinCalls = 10, 11 }), "MinCalls"},
		{with(count, func(c *Config) { c.MinCalls = -1 }), "MinCalls"},
		// time window
		{with(tw, func(c *Config) { c.WindowSeconds = -1 }), "WindowSeconds"},
		{with(tw, func(c *Config) { c.WindowSeconds = nan }), "WindowSeconds"},
		{with(tw, func(c *Config) { c.BucketSeconds = inf }), "BucketSeconds"},
		{with(tw, func(c *Config) { c.WindowSeconds, c.BucketSeconds = 10, 3 }), "BucketSeconds"},    // not whole
		{with(tw, func(c *Config) { c.WindowSeconds, c.BucketSeconds = 1, 2 }), "BucketSeconds"},     // wider
		{with(tw, func(c *Config) { c.WindowSeconds, c.BucketSeconds = 10, 1e-3 }), "BucketSeconds"}, // 10000 buckets
		{with(tw, func(c *Config) { c.WindowSeconds = 0.5 }), "BucketSeconds"},                       // narrower than the default bucket
		// rates
		{with(count, func(c *Config) { c.FailureRate = 1.01 }), "FailureRate"},
		{with(count, func(c *Config) { c.FailureRate = -0.1 }), "FailureRate"},
		{with(count, func(c *Config) { c.FailureRate = nan }), "FailureRate"},
		{with(count, func(c *Config) { c.SlowCall = -1 }), "SlowCall"},
		{with(count, func(c *Config) { c.SlowCall = inf }), "SlowCall"},
		{with(count, func(c *Config) { c.SlowCallRate = 0.5 }), "SlowCallRate"}, // no SlowCall
		{with(count, func(c *Config) { c.SlowCall, c.SlowCallRate = 1, 2 }), "SlowCallRate"},
	} {
		b, err := New(c.c)
		var ce *ConfigError
		if b != nil || !errors.As(err, &ce) || ce.Field != c.field || !errors.Is(err, ErrConfig) ||
			!strings.HasPrefix(err.Error(), "breaker: Config."+c.field+": ") {
			t.Errorf("%+v: breaker %v, error %v; want a ConfigError on %s", c.c, b != nil, err, c.field)
		}
		if err2 := c.c.Validate(); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%+v: Validate says %v, New %v", c.c, err2, err)
		}
	}
	for _, c := range []Config{
		{},
		{Threshold: 10, Recovery: 0.5, Trials: 3},
		{RecoveryMultiplier: 1, MaxRecovery: 5}, // a cap equal to Recovery
		{RecoveryMultiplier: 2, MaxRecovery: 60},
		count,
		tw,
		{Window: CountWindow, WindowCalls: 1, MinCalls: 1, FailureRate: 1, SlowCall: 1e-3, SlowCallRate: 1},
		{Window: CountWindow, WindowCalls: MaxWindowCalls},
		{Window: TimeWindow, WindowSeconds: 1, BucketSeconds: 0.1},   // 1/0.1 is not exactly 10 in binary
		{Window: TimeWindow, WindowSeconds: 0.3, BucketSeconds: 0.1}, // nor is 0.3/0.1 exactly 3
		{Window: TimeWindow, WindowSeconds: MaxBuckets * 0.5, BucketSeconds: 0.5},
		{Window: TimeWindow, WindowSeconds: 2, BucketSeconds: 2, MinCalls: 1000}, // one bucket; MinCalls unbounded
	} {
		if _, err := New(c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestWindowKindString(t *testing.T) {
	for k, want := range map[WindowKind]string{Consecutive: "consecutive", CountWindow: "count", TimeWindow: "time", 9: "WindowKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("%d: %q, want %q", uint8(k), got, want)
		}
	}
}

// Zero fields take the documented defaults.
func TestWindowDefaults(t *testing.T) {
	// CountWindow: 100 calls, MinCalls 10, FailureRate 0.5.
	b := mustNew(t, Config{Window: CountWindow})
	steps := strings.Repeat("S0 ", 90) + strings.Repeat("F0 ", 10) // 10/100 failed
	play(t, b, steps)
	if s := b.Snapshot(); s.State != Closed || s.Calls != 100 {
		t.Fatalf("%+v, want CLOSED with 100 calls", s)
	}
	if got := play(t, b, strings.Repeat("F0 ", 40)); !strings.HasSuffix(got, "C C O") || strings.Count(got, "O") != 1 {
		t.Fatalf("40 more failures: %q, want OPEN at the 40th (50/100)", got)
	}
	if b.Snapshot().OpenFor != DefaultRecovery {
		t.Fatal("default open time")
	}
	b = mustNew(t, Config{Window: CountWindow})
	if got := play(t, b, strings.Repeat("F0 ", 10)); got != strings.Repeat("C ", 9)+"O" {
		t.Fatalf("MinCalls 10: %q", got)
	}
	// TimeWindow: 60 s of 1 s buckets.
	b = mustNew(t, Config{Window: TimeWindow})
	if got := play(t, b, "F0 F0 F0 F0 S59.5 S59.5 S59.5 S59.5 S59.5 S59.5 F60"); got != "C C C C C C C C C C C" {
		t.Fatalf("time window: %q, want CLOSED throughout (4/10, then the failures of 0 leave at 60)", got)
	}
	if s := b.Snapshot(); s.Calls != 7 || s.Failures != 1 {
		t.Fatalf("time window at 60: %+v, want 7 calls, 1 failure", s)
	}
}
