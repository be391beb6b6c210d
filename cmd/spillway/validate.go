package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spillwayhq/spillway/config"
	"github.com/spillwayhq/spillway/yamlfile"
)

// validateCommand runs "spillway validate FILE...": it loads each gateway
// configuration file as spillway serve would (environment and file:
// references included) and prints "FILE: ok" on stdout for a good one, or
// every problem of a bad one on stderr, one per line as
// file:line:column: reason. It returns 0 when every file is good, 1 when
// one is not, 2 on bad usage.
func validateCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		validateUsage(stdout)
		return 0
	}
	files := args
	if len(args) > 0 && args[0] == "--" {
		files = args[1:]
	} else {
		for _, a := range args {
			if strings.HasPrefix(a, "-") && a != "-" {
				fmt.Fprintf(stderr, "spillway validate: unknown flag %s (validate takes only files; put -- before a file named %s)\n", a, a)
				return 2
			}
		}
	}
	if len(files) == 0 {
		validateUsage(stderr)
		return 2
	}
	code := 0
	for _, f := range files {
		if _, err := config.Load(f); err != nil {
			code = 1
			var fe *yamlfile.FileError
			if errors.As(err, &fe) {
				fmt.Fprintln(stderr, fe.Error())
			} else {
				fmt.Fprintf(stderr, "spillway validate: %v\n", err)
			}
			continue
		}
		fmt.Fprintf(stdout, "%s: ok\n", f)
	}
	return code
}

func validateUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: spillway validate FILE...

Checks gateway configuration files as spillway serve reads them (with the
environment's ${VARIABLES} and file: references). Prints "FILE: ok" for each
good file, or each problem of a bad one as file:line:column: reason, and exits
1 when any file is bad. The format: docs/CONFIG.md.
`)
}
