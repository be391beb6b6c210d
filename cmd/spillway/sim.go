package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spillwayhq/spillway/sim"
)

// simCommand runs "spillway sim SCENARIO [flags]" or "spillway sim all [flags]".
func simCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		w := stdout
		if len(args) == 0 {
			w = stderr
		}
		simUsage(w)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "spillway sim: flags go after the scenario: %s\n", reordered(args))
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "all":
		return simAll(rest, stdout, stderr)
	case "config":
		return simConfig(rest, stdout, stderr)
	}
	sc, ok := sim.Lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "spillway sim: unknown scenario %q; choose one of: all, %s\n", name, strings.Join(sim.Names(), ", "))
		return 2
	}
	f := sim.NewFlags(name)
	runner := sc.Bind(f)
	fs := f.FlagSet()
	format := fs.String("format", "text", "output format: text or json")
	var svg *string
	if sc.Chart {
		svg = fs.String("svg", "", "also write a chart to this SVG file")
	} else {
		svg = new(string)
	}
	if code, done := parse(fs, "spillway sim "+name, sc.Summary, rest, stdout, stderr); done {
		return code
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "spillway sim %s: --format: must be text or json, got %q\n", name, *format)
		return 2
	}
	rep, err := runner()
	if err != nil {
		return fail(stderr, "spillway sim "+name, err)
	}
	if *svg != "" {
		if err := writeFile(*svg, rep.WriteSVG); err != nil {
			fmt.Fprintf(stderr, "spillway sim %s: --svg: %v\n", name, err)
			return 1
		}
	}
	if *format == "json" {
		err = rep.WriteJSON(stdout, name)
	} else {
		_, err = io.WriteString(stdout, rep.Text.String())
	}
	if err != nil {
		fmt.Fprintf(stderr, "spillway sim %s: %v\n", name, err)
		return 1
	}
	return 0
}

// simAll runs every scenario with its defaults.
func simAll(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	format := fs.String("format", "text", "output format: text or json")
	if code, done := parse(fs, "spillway sim all", "run every scenario with the reference parameters", args, stdout, stderr); done {
		return code
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "spillway sim all: --format: must be text or json, got %q\n", *format)
		return 2
	}
	if *format == "json" {
		io.WriteString(stdout, "[\n")
	}
	for i, sc := range sim.Scenarios() {
		rep, err := sc.Bind(sim.NewFlags(sc.Name))()
		if err != nil {
			return fail(stderr, "spillway sim "+sc.Name, err)
		}
		switch *format {
		case "json":
			if i > 0 {
				io.WriteString(stdout, ",\n")
			}
			rep.WriteJSON(stdout, sc.Name)
		default:
			if i > 0 {
				io.WriteString(stdout, "\n")
			}
			switch {
			case sc.Ref == "":
				fmt.Fprintf(stdout, "=== %s\n", sc.Name)
			case sc.RefArgs != nil:
				fmt.Fprintf(stdout, "=== %s (reference: %s.out with %s)\n", sc.Name, sc.Ref, strings.Join(sc.RefArgs, " "))
			default:
				fmt.Fprintf(stdout, "=== %s (reference: %s.out)\n", sc.Name, sc.Ref)
			}
			io.WriteString(stdout, rep.Text.String())
		}
	}
	if *format == "json" {
		io.WriteString(stdout, "]\n")
	}
	return 0
}

// parse parses args into fs. It reports done with the exit code when the
// command should stop: help was asked for (0) or an argument was bad (2).
func parse(fs *flag.FlagSet, cmd, summary string, args []string, stdout, stderr io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, "usage: %s [flags]\n\n%s\n\nflags:\n", cmd, summary)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, true
	case err != nil:
		fmt.Fprintf(stderr, "%s: %s (see %s -h)\n", cmd, flagError(err), cmd)
		return 2, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q (see %s -h)\n", cmd, fs.Arg(0), cmd)
		return 2, true
	}
	return 0, false
}

// flagError rewrites the flag package's messages to name the flag first:
// `invalid value "-3" for flag -limit: must be greater than 0` becomes
// `--limit: must be greater than 0, got "-3"`.
func flagError(err error) string {
	msg := err.Error()
	var value, name, reason string
	if _, after, ok := strings.Cut(msg, "invalid value "); ok {
		if v, rest, ok := strings.Cut(after, " for flag -"); ok {
			if n, r, ok := strings.Cut(rest, ": "); ok {
				value, name, reason = v, n, r
				return "--" + name + ": " + reason + ", got " + value
			}
		}
	}
	if n, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + n
	}
	if n, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "--" + n + ": needs a value"
	}
	return msg
}

func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	if sim.IsUsage(err) {
		return 2
	}
	return 1
}

// reordered returns the command line args meant, the scenario first:
// "spillway sim overload-policies --format json" for
// "--format json overload-policies". Without a scenario among args it
// names the placeholder SCENARIO.
func reordered(args []string) string {
	name, rest := "SCENARIO", args
	for i, a := range args {
		if _, ok := sim.Lookup(a); ok || a == "all" {
			name = a
			rest = append(append([]string(nil), args[:i]...), args[i+1:]...)
			break
		}
	}
	return strings.Join(append([]string{"spillway sim", name}, rest...), " ")
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" || a == "help" }

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func simUsage(w io.Writer) {
	fmt.Fprint(w, "usage: spillway sim SCENARIO [--format text|json] [--svg FILE] [scenario flags]\n\nscenarios:\n")
	fmt.Fprintf(w, "  %-20s %s\n", "all", "every scenario below with the reference parameters")
	fmt.Fprintf(w, "  %-20s %s\n", "config FILE", "a gateway config file's policies under simulated load (not part of all)")
	for _, sc := range sim.Scenarios() {
		fmt.Fprintf(w, "  %-20s %s\n", sc.Name, sc.Summary)
	}
}
