// Package maintest runs a program's main function in a child process of
// its test binary, so that a test can check what the program prints and
// the status it exits with (os.Exit included), without building it.
//
//	func TestHelp(t *testing.T) {
//		code, _, stderr := maintest.Run(t, main, "-h")
//		if code != 0 { ... }
//	}
//
// Start runs one without waiting, for a test that signals it (a server's
// drain on SIGTERM) and reads its output while it runs.
package maintest

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// In a child process, childEnv names the test it re-runs and argsEnv holds
// main's arguments, separated by the unit separator (0x1f: an environment value cannot hold NUL).
const (
	childEnv = "SPILLWAY_MAINTEST_CHILD"
	argsEnv  = "SPILLWAY_MAINTEST_ARGS"
)

// Run runs main with os.Args set to the program name and args in a child
// process that re-runs the calling test, and returns the child's exit
// status (0 when main returns) and output. In the child, the test's first
// Run calls main with the parent's args and exits, so a test may call Run
// more than once. t must be a top-level test (its name is the child's
// -test.run pattern).
func Run(t *testing.T, main func(), args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := command(t, main, "Run", args)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", cmd.Path, err)
	}
	return code, out.String(), errOut.String()
}

// Child runs main and exits when called in the child process of the
// calling test (Run or Start), and returns at once in the parent. A test
// that sets things up before Start (servers, files) calls it first, so
// the child does not set them up too.
func Child(t *testing.T, main func()) {
	if os.Getenv(childEnv) == t.Name() {
		os.Args = []string{"program"}
		if a := os.Getenv(argsEnv); a != "" {
			os.Args = append(os.Args, strings.Split(a, "\x1f")...)
		}
		main()
		os.Exit(0)
	}
}

// command returns the command that re-runs the calling test as a child
// running main with args; in the child, it runs main and exits (Child).
func command(t *testing.T, main func(), fn string, args []string) *exec.Cmd {
	t.Helper()
	Child(t, main)
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("maintest.%s in subtest %s: call it from a top-level test", fn, t.Name())
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name(), argsEnv+"="+strings.Join(args, "\x1f"))
	return cmd
}

// CheckFlagExits checks the exit statuses of a program whose flag set is
// named name: -h prints the usage and exits 0 (not "flag: help requested"
// and 1), and an unknown flag exits 1 naming it. t must be a top-level
// test.
func CheckFlagExits(t *testing.T, main func(), name string) {
	t.Helper()
	code, _, stderr := Run(t, main, "-h")
	if code != 0 || !strings.Contains(stderr, "Usage of "+name+":") || strings.Contains(stderr, "help requested") {
		t.Errorf("-h: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = Run(t, main, "-no-such-flag")
	if code != 1 || !strings.Contains(stderr, "not defined: -no-such-flag") {
		t.Errorf("-no-such-flag: exit %d, stderr:\n%s", code, stderr)
	}
}
