package sim

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Flags declares a scenario's parameters. Every value is checked as it is
// parsed, so a bad value is reported as one line naming the flag.
type Flags struct {
	fs *flag.FlagSet
}

// NewFlags returns an empty flag set for the named scenario. Parse errors are
// returned, never printed.
func NewFlags(name string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &Flags{fs: fs}
}

// FlagSet returns the underlying flag set (for Parse and PrintDefaults).
func (f *Flags) FlagSet() *flag.FlagSet { return f.fs }

// Blame returns the flag to name in an error about a limit that several
// flags share (a product too large, two bounds out of order): the first of
// names given on the command line, since that is the value the user chose,
// or names[0] when none was. Call it once the flags are parsed.
func (f *Flags) Blame(names ...string) string {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, n := range names {
		if given[n] {
			return n
		}
	}
	return names[0]
}

// Check is a constraint on a number.
type Check int

const (
	Any         Check = iota // any finite number
	Positive                 // > 0
	NonNegative              // >= 0
	Fraction                 // in [0, 1]
)

func (c Check) test(x float64) error {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return fmt.Errorf("must be a finite number")
	case c == Positive && x <= 0:
		return fmt.Errorf("must be greater than 0")
	case c == NonNegative && x < 0:
		return fmt.Errorf("must not be negative")
	case c == Fraction && (x < 0 || x > 1):
		return fmt.Errorf("must be between 0 and 1")
	}
	return nil
}

type floatValue struct {
	p     *float64
	check Check
}

func (v *floatValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v *floatValue) Set(s string) error {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return fmt.Errorf("not a number")
	}
	if err := v.check.test(x); err != nil {
		return err
	}
	*v.p = x
	return nil
}

type intValue struct {
	p     *int
	check Check
	max   int
}

func (v *intValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v *intValue) Set(s string) error {
	x, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("not a whole number")
	}
	if err := v.check.test(float64(x)); err != nil {
		return err
	}
	if v.max > 0 && x > v.max {
		return fmt.Errorf("must be at most %d", v.max)
	}
	*v.p = x
	return nil
}

type seedValue struct{ p *uint32 }

func (v *seedValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*v.p), 10)
}

func (v *seedValue) Set(s string) error {
	x, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return fmt.Errorf("must be a whole number from 0 to 4294967295")
	}
	*v.p = uint32(x)
	return nil
}

type floatsValue struct {
	p     *[]float64
	check Check
}

func (v *floatsValue) String() string {
	if v.p == nil {
		return ""
	}
	parts := make([]string, len(*v.p))
	for i, x := range *v.p {
		parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (v *floatsValue) Set(s string) error {
	var out []float64
	for i, part := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil {
			return fmt.Errorf("item %d (%q) is not a number; want a comma-separated list", i+1, part)
		}
		if err := v.check.test(x); err != nil {
			return fmt.Errorf("item %d (%s) %v", i+1, strings.TrimSpace(part), err)
		}
		out = append(out, x)
	}
	*v.p = out
	return nil
}

type intsValue struct {
	p     *[]int
	check Check
	max   int
}

func (v *intsValue) String() string {
	if v.p == nil {
		return ""
	}
	parts := make([]string, len(*v.p))
	for i, x := range *v.p {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

func (v *intsValue) Set(s string) error {
	var out []int
	for i, part := range strings.Split(s, ",") {
		x, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return fmt.Errorf("item %d (%q) is not a whole number; want a comma-separated list", i+1, part)
		}
		if err := v.check.test(float64(x)); err != nil {
			return fmt.Errorf("item %d (%d) %v", i+1, x, err)
		}
		if v.max > 0 && x > v.max {
			return fmt.Errorf("item %d (%d) must be at most %d", i+1, x, v.max)
		}
		out = append(out, x)
	}
	*v.p = out
	return nil
}

// Float declares a number flag.
func (f *Flags) Float(name string, def float64, check Check, usage string) *float64 {
	p := new(float64)
	*p = def
	f.fs.Var(&floatValue{p, check}, name, usage)
	return p
}

// Int declares a whole-number flag; max > 0 caps it (to bound memory and time).
func (f *Flags) Int(name string, def int, check Check, max int, usage string) *int {
	p := new(int)
	*p = def
	f.fs.Var(&intValue{p, check, max}, name, usage)
	return p
}

// Seed declares a 32-bit seed flag.
func (f *Flags) Seed(name string, def uint32, usage string) *uint32 {
	p := new(uint32)
	*p = def
	f.fs.Var(&seedValue{p}, name, usage)
	return p
}

// Floats declares a comma-separated list of numbers.
func (f *Flags) Floats(name string, def []float64, check Check, usage string) *[]float64 {
	p := new([]float64)
	*p = append([]float64(nil), def...)
	f.fs.Var(&floatsValue{p, check}, name, usage)
	return p
}

// Ints declares a comma-separated list of whole numbers; max > 0 caps each.
func (f *Flags) Ints(name string, def []int, check Check, max int, usage string) *[]int {
	p := new([]int)
	*p = append([]int(nil), def...)
	f.fs.Var(&intsValue{p, check, max}, name, usage)
	return p
}

// Bool declares an on/off flag.
func (f *Flags) Bool(name string, def bool, usage string) *bool {
	return f.fs.Bool(name, def, usage)
}
