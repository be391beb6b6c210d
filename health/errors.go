package health

import (
	"errors"
	"math"
	"strconv"
)

// ErrConfig is the sentinel every configuration error wraps:
// errors.Is(err, health.ErrConfig) tells a bad configuration from other
// errors.
var ErrConfig = errors.New("health: invalid configuration")

// ConfigError reports a bad configuration field.
type ConfigError struct {
	Field  string // the field, e.g. "Fall" or "Expected[1]"
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string { return "health: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func badConfig(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// checkSeconds validates a duration field that may be 0 (the default):
// finite and not negative.
func checkSeconds(field string, s float64) error {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return badConfig(field, "must be a finite number of seconds, got "+ftoa(s))
	case s < 0:
		return badConfig(field, "must not be negative, got "+ftoa(s))
	}
	return nil
}

// checkCount validates a count field that may be 0 (the default).
func checkCount(field string, n int) error {
	if n < 0 {
		return badConfig(field, "must not be negative, got "+strconv.Itoa(n))
	}
	return nil
}
