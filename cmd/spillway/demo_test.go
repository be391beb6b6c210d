package main

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/internal/maintest"
)

// Bad usage exits 2 with a reason; -h exits 0.
func TestDemoUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"demo", "--only", "both"}, 2, `--only "both": want overload or dip`},
		{[]string{"demo", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"demo", "--nope"}, 2, "flag provided but not defined: -nope"},
		{[]string{"demo", "-h"}, 0, "Usage: spillway demo"},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// Ctrl-C during the overload experiment prints the tables measured so far
// and exits 130, without running the dip.
func TestDemoInterrupted(t *testing.T) {
	maintest.Child(t, main)
	p := maintest.Start(t, main, "demo", "--quick", "--out", t.TempDir())
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.Stdout(), "load  50/s:") && time.Now().Before(deadline) && !p.Exited() {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(p.Stdout(), "load  50/s:") {
		t.Fatalf("no load level finished; stdout:\n%s\nstderr:\n%s", p.Stdout(), p.Stderr())
	}
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code, ok := p.Wait(30 * time.Second)
	out := p.Stdout()
	if !ok || code != 130 {
		t.Fatalf("exit %d (exited %v); want 130; stdout:\n%s\nstderr:\n%s", code, ok, out, p.Stderr())
	}
	for _, want := range []string{"Stopped early", "measured over HTTP", "no protection             50 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Measuring the capacity dip") {
		t.Errorf("the dip ran after the interrupt:\n%s", out)
	}
}
