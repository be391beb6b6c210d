package shed

import (
	"errors"
	"math"
)

// ErrConfig is the sentinel every configuration error wraps:
// errors.Is(err, shed.ErrConfig) tells a bad configuration from other errors.
var ErrConfig = errors.New("shed: invalid configuration")

// ConfigError reports a bad configuration field.
type ConfigError struct {
	Field  string // the field, e.g. "Limits[2]" or "Target"
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string { return "shed: " + e.Field + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func badConfig(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }

// checkSeconds validates a duration field: finite and not negative.
func checkSeconds(field string, s float64) error {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return badConfig(field, "must be a finite number of seconds")
	case s < 0:
		return badConfig(field, "must not be negative")
	}
	return nil
}
