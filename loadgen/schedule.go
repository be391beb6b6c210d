package loadgen

import (
	"math/rand/v2"
	"time"
)

// Seeds' second words, so that the streams of one Seed differ.
const (
	streamArrivals = 0x6c6f616467656e31 // gaps, targets, classes, variable seeds
)

// gaps yields a step's arrival offsets from its start, below its Duration.
type gaps struct {
	kind Arrivals
	mean float64 // nanoseconds
	rnd  *rand.Rand
	i    int
	off  float64 // Poisson: the sum of the gaps so far, nanoseconds
}

// next returns the next arrival's offset, and false past the step's end d.
func (g *gaps) next(d time.Duration) (time.Duration, bool) {
	var off float64
	if g.kind == Poisson {
		g.off += g.rnd.ExpFloat64() * g.mean
		off = g.off
	} else {
		// From the index, not by adding gaps: no drift over long steps.
		off = float64(g.i) * g.mean
	}
	g.i++
	if !(off < float64(d)) {
		return 0, false
	}
	return time.Duration(off), true
}

// schedule is the scheduler goroutine: it sleeps until each arrival's
// intended time (catching up at once on arrivals already due, as after a
// timer that fired late) and hands the arrival to an idle worker, starts a
// worker when none is idle and the pool is below MaxInFlight, or else
// counts the arrival unsent. It closes r.work when done.
func (r *runner) schedule() {
	defer r.wg.Done()
	defer close(r.work)
	s := scheduler{r: r, rnd: rand.New(rand.NewPCG(r.cfg.Seed, streamArrivals)), timer: time.NewTimer(time.Hour)}
	s.timer.Stop()
	defer s.timer.Stop()
	for k := range r.cfg.Steps {
		if k > 0 {
			ok := s.sleepUntil(r.starts[k])
			r.steps[k-1].over.Store(true)
			r.wake()
			if !ok {
				return
			}
		}
		if !s.step(k) {
			return
		}
	}
}

type scheduler struct {
	r       *runner
	rnd     *rand.Rand
	timer   *time.Timer
	workers int
	seq     uint64
}

// step schedules step k's arrivals; false if the run stopped in it.
func (s *scheduler) step(k int) bool {
	r, st := s.r, s.r.steps[k]
	st.pending.Store(1)
	st.started.Store(true)
	r.current.Store(int64(k))
	start, step := r.starts[k], r.cfg.Steps[k]
	g := gaps{kind: r.cfg.Arrivals, mean: float64(time.Second) / step.Rate, rnd: s.rnd}
	elapsed := step.Duration // no arrival at all
	defer func() {
		st.elapsed.Store(int64(elapsed))
		r.ended(int32(k)) // the scheduler's hold
	}()
	for {
		off, ok := g.next(step.Duration)
		if !ok {
			return true
		}
		if !s.sleepUntil(start + off) {
			st.cut.Store(true)
			elapsed = min(r.since()-start, elapsed)
			return false
		}
		elapsed = off + time.Duration(g.mean)
		s.dispatch(k, start+off)
	}
}

// sleepUntil waits until t (since the base); false if the run stopped.
func (s *scheduler) sleepUntil(t time.Duration) bool {
	done := s.r.ctx.Done()
	d := t - s.r.since()
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	s.timer.Reset(d)
	select {
	case <-s.timer.C:
		return true
	case <-done:
		s.timer.Stop()
		return false
	}
}

// dispatch hands out one arrival of step k due at intended.
func (s *scheduler) dispatch(k int, intended time.Duration) {
	r := s.r
	a := arrival{seq: s.seq, intended: intended, step: int32(k)}
	s.seq++
	tgt, class := r.mix.pick(s.rnd)
	a.target, a.class = int32(tgt), int32(class)
	if len(r.mix.ranges) > 0 {
		a.draw = s.rnd.Uint64()
	}
	r.steps[k].pending.Add(1)
	if r.since()-intended > r.cfg.Timeout {
		r.unsent(r.shards[0], &a)
		return
	}
	select {
	case r.work <- a:
		return
	default:
	}
	if s.workers < r.cfg.MaxInFlight {
		s.workers++
		r.wg.Add(1)
		go r.worker(s.workers-1, a)
		return
	}
	r.unsent(r.shards[0], &a)
}
