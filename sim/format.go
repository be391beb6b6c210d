package sim

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file formats numbers exactly as JavaScript does, so scenario output
// matches the reference scripts' console.log byte for byte.

// Fixed formats x with d digits after the point like JavaScript's
// Number.prototype.toFixed: the exact binary value is rounded, and a value
// exactly halfway rounds away from zero (Go's strconv rounds such ties to
// even, so 2.5 would print as "2" instead of "3").
func Fixed(x float64, d int) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.Abs(x) >= 1e21:
		return Num(x)
	}
	neg := x < 0
	if neg {
		x = -x
	}
	// The exact decimal expansion of a float64 has at most 1074 fraction digits.
	exact := strconv.FormatFloat(x, 'f', 1080, 64)
	dot := strings.IndexByte(exact, '.')
	digits := []byte(exact[:dot] + exact[dot+1:dot+1+d])
	if exact[dot+1+d] >= '5' {
		i := len(digits) - 1
		for ; i >= 0; i-- {
			if digits[i] == '9' {
				digits[i] = '0'
				continue
			}
			digits[i]++
			break
		}
		if i < 0 {
			digits = append([]byte{'1'}, digits...)
		}
	}
	intLen := len(digits) - d
	s := string(digits[:intLen])
	if d > 0 {
		s += "." + string(digits[intLen:])
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Num formats x like JavaScript's String(x): the shortest decimal that reads
// back as x, in plain notation from 1e-7 up to 1e21.
func Num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	case x == 0:
		return "0"
	}
	if a := math.Abs(x); a >= 1e-7 && a < 1e21 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	s := strconv.FormatFloat(x, 'e', -1, 64) // e.g. 1e+21, 1.5e-07
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + string(sign) + exp
}

// Int formats an integer.
func Int(n int) string { return strconv.Itoa(n) }

// PadStart pads s on the left with spaces to width characters, like
// JavaScript's padStart (which counts UTF-16 units; our text is BMP).
func PadStart(s string, width int) string {
	if n := utf8.RuneCountInString(s); n < width {
		return strings.Repeat(" ", width-n) + s
	}
	return s
}

// PadEnd pads s on the right with spaces to width characters.
func PadEnd(s string, width int) string {
	if n := utf8.RuneCountInString(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}

// JSRound rounds like JavaScript's Math.round: to the nearest integer, and
// halfway values up (towards +∞).
func JSRound(x float64) float64 {
	f := math.Floor(x)
	if x-f >= 0.5 {
		return f + 1
	}
	return f
}
