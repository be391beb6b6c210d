// Command spillway is Spillway's one binary. Subcommands:
//
//	spillway demo [--quick]         the seeds' overload story over real HTTP
//	spillway sim SCENARIO [flags]   run one lab experiment (or "all")
//	spillway serve --config FILE    run the gateway (docs/CONFIG.md)
//	spillway backend [flags]        run a test service of known capacity
//	spillway load [flags]           send open-loop load and find the knee
//	spillway version                print the version
//
// Run "spillway sim -h" for the scenarios and "spillway sim SCENARIO -h" for
// a scenario's flags.
package main

import (
	"fmt"
	"io"
	"os"
)

const version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status:
// 0 success, 1 failure at run time, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "demo":
		return demoCommand(args[1:], stdout, stderr)
	case "sim":
		return simCommand(args[1:], stdout, stderr)
	case "serve":
		return serveCommand(args[1:], stdout, stderr)
	case "backend":
		return backendCommand(args[1:], stdout, stderr)
	case "load":
		return loadCommand(args[1:], stdout, stderr)
	case "validate":
		return validateCommand(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "spillway", version)
		return 0
	case "help", "-h", "--help", "-help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "spillway: unknown command %q (try: spillway help)\n", args[0])
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Spillway keeps services standing when demand exceeds capacity.

Usage:
  spillway demo [--quick]         the overload experiment over real HTTP: backend, gateway and load, beside the simulator
  spillway sim SCENARIO [flags]   run a lab experiment under virtual time ("all" runs every one)
  spillway serve --config FILE    run the gateway: a reverse proxy from one config file
  spillway validate FILE...       check gateway configuration files (docs/CONFIG.md)
  spillway backend [flags]        run a test service of known capacity (workers / service time)
  spillway load --url URL --rate SPEC [flags]
                                  send open-loop load: steps and ramps, latency from the intended send, the knee
  spillway version                print the version

Run "spillway sim -h" to list the scenarios, "spillway backend -h" for the backend's flags,
"spillway load -h" for the load generator's.
`)
}
