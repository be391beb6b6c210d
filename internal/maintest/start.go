package maintest

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/internal/syncbuf"
)

// Proc is a main running in a child process (Start): it can be signalled,
// its output read while it runs, and waited for.
type Proc struct {
	cmd  *exec.Cmd
	out  syncbuf.Buffer
	err  syncbuf.Buffer
	done chan struct{} // closed when the child has exited
	code int           // its exit status, once done is closed (-1: killed by a signal)
}

// Start runs main with os.Args set to the program name and args in a child
// process that re-runs the calling test (as Run does) and returns without
// waiting for it. A child still running when the test ends is killed. t
// must be a top-level test; see Child for the code before Start.
func Start(t *testing.T, main func(), args ...string) *Proc {
	t.Helper()
	p := &Proc{cmd: command(t, main, "Start", args), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", p.cmd.Path, err)
	}
	go func() {
		defer close(p.done)
		err := p.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.code = exit.ExitCode()
		} else if err != nil {
			p.code = -1
		}
	}()
	t.Cleanup(func() {
		if !p.Exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Signal sends sig to the child.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited reports whether the child has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits at most timeout for the child to exit and returns its exit
// status (0 when main returned; -1 when a signal killed it); ok is false
// when it still runs.
func (p *Proc) Wait(timeout time.Duration) (code int, ok bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.code, true
	case <-t.C:
		return 0, false
	}
}

// Stdout and Stderr return what the child has written so far.
func (p *Proc) Stdout() string { return p.out.String() }
func (p *Proc) Stderr() string { return p.err.String() }

// WaitStderr polls the child's stderr every 10 ms until re matches it, for
// at most timeout, and returns the match and its submatches (nil when it
// did not match in time or the child exited without it).
func (p *Proc) WaitStderr(re *regexp.Regexp, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		exited := p.Exited()
		if m := re.FindStringSubmatch(p.Stderr()); m != nil {
			return m
		}
		if exited || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}
