package loadgen

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// ProgressWriter writes Progress reports: on a terminal one line, rewritten
// in place (carriage return and an ANSI erase), else one plain line per
// report, for a log. Use its Report as Config.Progress. Safe for
// concurrent use.
type ProgressWriter struct {
	w     io.Writer
	tty   bool
	steps int // steps in the run, for "step 2/5"; 0: unknown

	mu    sync.Mutex
	dirty bool   // guarded by mu: a rewritable line is on the terminal
	label string // guarded by mu: shown instead of "step i/n" when set
}

// eraseLine returns the cursor to the line's start and erases the line.
const eraseLine = "\r\x1b[2K"

// NewProgressWriter writes to w, as a terminal when tty (see IsTerminal);
// steps is the number of steps of the run (0 if not known).
func NewProgressWriter(w io.Writer, tty bool, steps int) *ProgressWriter {
	return &ProgressWriter{w: w, tty: tty, steps: steps}
}

// IsTerminal says whether w is a terminal (a character device), so that
// a progress line can be rewritten in place.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// SetLabel names the steps reported from now on ("probe 2", say) instead
// of numbering them; "" numbers them again.
func (pw *ProgressWriter) SetLabel(label string) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.label = label
}

// Report writes p.
func (pw *ProgressWriter) Report(p Progress) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	line := ProgressLine(p, pw.steps)
	if pw.label != "" {
		_, rest, _ := strings.Cut(line, "  ")
		line = pw.label + "  " + rest
	}
	if pw.tty {
		fmt.Fprint(pw.w, eraseLine+line)
		pw.dirty = true
		return
	}
	fmt.Fprintln(pw.w, line)
}

// Clear erases the rewritable line, if one is shown, so that other output
// starts on a clean line.
func (pw *ProgressWriter) Clear() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.clearLocked()
}

func (pw *ProgressWriter) clearLocked() {
	if pw.dirty {
		fmt.Fprint(pw.w, eraseLine)
		pw.dirty = false
	}
}

// Println clears the progress line and writes a line of its own (a step's
// summary, say); the next report starts a new progress line.
func (pw *ProgressWriter) Println(line string) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.clearLocked()
	fmt.Fprintln(pw.w, line)
}

// ProgressLine formats p on one line: step, asked rate, time in the step,
// goodput, p99, errors, unsent, in flight and send lag p99; steps is the
// number of steps of the run (0: unknown). Steps count from 1, as in
// WriteTable.
func ProgressLine(p Progress, steps int) string {
	step := fmt.Sprint(p.Step + 1)
	if steps > 0 {
		step = fmt.Sprintf("%d/%d", p.Step+1, steps)
	}
	return fmt.Sprintf("step %s  rate %s/s  %4.1fs  good %.1f/s  p99 %s ms  errors %.1f%%  unsent %d  in flight %d  send lag p99 %s ms",
		step, formatRate(p.Rate), p.Elapsed.Seconds(), p.Goodput, millis(p.P99), 100*p.ErrorRate, p.Unsent, p.InFlight, millis(p.SendLagP99))
}
