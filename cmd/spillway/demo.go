package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spillwayhq/spillway/demo"
)

// demoCommand runs the seeds' overload story over real HTTP: backend,
// gateway and load generator in this process on free loopback ports.
// Ctrl-C stops it with the partial tables (exit 130); a second one at once.
func demoCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("spillway demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "a shorter run (under a minute): four load levels of 4 s, the dip at a quarter of the seed's times")
	dir := fs.String("out", "", "directory for spillway-demo.svg and spillway-demo.html (default: spillway-demo under the system's temporary directory)")
	seed := fs.Uint64("seed", 42, "random seed of the arrivals, classes and service times")
	only := fs.String("only", "", `run one experiment: "overload" or "dip" (default: both)`)
	dash := fs.String("dashboard", "127.0.0.1:9901", "the gateway's admin address, serving its live dashboard at /dashboard (a free port when taken)")
	stay := fs.Bool("stay", false, "keep the gateway and its dashboard up after the run, until Ctrl-C")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: spillway demo [--quick] [--out DIR]")
		fmt.Fprintln(stderr, "Runs a backend of capacity 100 req/s, the gateway in front of it and the load generator, on loopback,")
		fmt.Fprintln(stderr, "and prints the seeds' overload tables measured over HTTP beside what `spillway sim` predicts.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "spillway demo: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	plan := demo.DefaultPlan()
	if *quick {
		plan = demo.QuickPlan()
	}
	plan.Seed = *seed
	opts := demo.Options{Plan: plan, Out: stdout, Dir: *dir, Dashboard: *dash, Stay: *stay}
	switch *only {
	case "":
	case "overload":
		opts.SkipDip = true
	case "dip":
		opts.SkipOverload = true
	default:
		fmt.Fprintf(stderr, "spillway demo: --only %q: want overload or dip\n", *only)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C stops at once
	r, err := demo.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "spillway demo:", err)
		return 1
	}
	if r.Partial {
		return 130
	}
	return 0
}
