package sim

import (
	"testing"

	"github.com/spillwayhq/spillway/rng"
)

// TestPredServer steps the backend model through explicit instants: one
// worker (none in [10, 20)), a queue of one; with HonorCancel a job whose
// client left leaves the queue or frees its worker, without it the job
// stays; a finish event made stale by a cancel is skipped.
func TestPredServer(t *testing.T) {
	for _, honor := range []bool{true, false} {
		ev := &predEvents{}
		s := &predServer{workers: func(now float64) int {
			if now >= 10 && now < 20 {
				return 0
			}
			return 1
		}, queueMax: 1, honor: honor, service: 1, src: rng.New(1), ev: ev}
		a, b, c, d := &predJob{}, &predJob{}, &predJob{}, &predJob{}
		type step struct {
			at      float64
			do      func() bool // an arrival's result, or true
			job     *predJob
			state   jobState
			working int
			queued  int
		}
		arrive := func(j *predJob, at float64) func() bool { return func() bool { return s.arrive(j, at) } }
		cancel := func(j *predJob, at float64) func() bool { return func() bool { s.cancel(j, at); return true } }
		off, left := jobOff, 0 // b after its cancel, and the jobs queued then
		if !honor {
			off, left = jobQueued, 1
		}
		steps := []step{
			{0, arrive(a, 0), a, jobWorking, 1, 0},
			{0, arrive(b, 0), b, jobQueued, 1, 1},
			{0, func() bool { return !s.arrive(c, 0) }, c, jobOff, 1, 1}, // the queue is full: 503
			{0.1, cancel(b, 0.1), b, off, 1, left},
		}
		if honor {
			steps = append(steps,
				step{0.2, arrive(d, 0.2), d, jobQueued, 1, 1},
				step{0.3, cancel(a, 0.3), d, jobWorking, 1, 0}, // a's worker freed at once: d starts
			)
		}
		for i, st := range steps {
			if !st.do() {
				t.Fatalf("honor %v step %d at %v: refused", honor, i, st.at)
			}
			if st.job.state != st.state || s.working != st.working || s.queued != st.queued {
				t.Errorf("honor %v step %d at %v: state %d, working %d, queued %d; want %d, %d, %d",
					honor, i, st.at, st.job.state, s.working, s.queued, st.state, st.working, st.queued)
			}
		}
		// Run the finish events: each current one frees its worker; a's,
		// made stale by its cancel (with honor), is skipped.
		finished := 0
		for len(ev.h) > 0 {
			e := ev.h.pop()
			if e.at >= 10 {
				break
			}
			if s.finished(e) {
				finished++
			}
		}
		want := 2 // a, then b (without honor); with honor only d: a's event is stale, b left
		if honor {
			want = 1
		}
		if finished != want || s.working != 0 || s.queued != 0 {
			t.Errorf("honor %v: %d finished, working %d, queued %d; want %d, 0, 0", honor, finished, s.working, s.queued, want)
		}
		// No worker in [10, 20): a job waits even with the server idle, and
		// starts at the first event after the window.
		e := &predJob{}
		if !s.arrive(e, 15) || e.state != jobQueued {
			t.Errorf("honor %v: at 15 the job is %d, want queued (no worker)", honor, e.state)
		}
		f := &predJob{}
		if !s.arrive(f, 25) || e.state != jobWorking || f.state != jobQueued {
			t.Errorf("honor %v: at 25 the jobs are %d and %d, want the first working, the second queued", honor, e.state, f.state)
		}
	}
}
