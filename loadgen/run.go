package loadgen

import (
	"context"
	"net/http"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Run sends cfg's load and returns what each step did. It returns an error
// wrapping ErrConfig, naming the field, for a bad configuration, before
// sending anything.
//
// Arrivals are paced by one goroutine on real timers from each step's start
// (steps are back to back) and handed to a pool of workers grown on demand
// up to MaxInFlight. Each call goes through a per-attempt layer that gives
// each attempt Timeout and reads the whole body, under the library's
// client.Transport with the retry policy of cfg.Client (RetryNone skips
// it: one attempt needs no policy). A step's result
// is made once all its arrivals ended (at most Deadline after its last
// intended send) and the next step began; StepDone is called in step order,
// Progress about once a second, both from one goroutine.
//
// When ctx ends first, Run stops at once: in-flight calls are cancelled
// (and not counted), the step under way is reported Partial, and Run
// returns the steps so far with ctx's error. An abort threshold (cfg.Abort)
// stops the run the same way and sets Result.Aborted, with a nil error. No
// goroutine of the run outlives Run, and the default transport's idle
// connections are closed.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return Result{}, err
	}
	r, err := newRunner(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer r.stop()
	if r.own != nil {
		defer r.own.CloseIdleConnections()
	}
	r.base = time.Now()
	mon := newMonitor(r)
	done := make(chan Result, 1)
	go func() { done <- mon.run() }()
	r.wg.Add(1)
	go r.schedule()
	r.wg.Wait()
	close(r.finished)
	res := <-done
	res.TailAttempts = int(r.tail.Load())
	if res.Aborted == "" && ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// runner is one run's shared state.
type runner struct {
	cfg     Config
	base    time.Time // the run's start: times are durations since it
	ctx     context.Context
	stop    context.CancelFunc
	mix     *mix
	rt      http.RoundTripper
	own     *http.Transport // the default transport, when Run built it
	highest time.Duration   // histograms' range

	starts []time.Duration // each step's start, since base
	end    time.Duration   // the last step's end, since base
	tail   atomic.Int64    // attempts sent after end (Result.TailAttempts)
	steps  []*stepState
	shards []*shard

	work     chan arrival // unbuffered: a send succeeds only on an idle worker
	wg       sync.WaitGroup
	notify   chan struct{} // buffered 1: a step may be ready
	finished chan struct{} // closed when the scheduler and every worker ended

	inFlight atomic.Int64
	current  atomic.Int64 // the step being scheduled
	// The report interval's ended arrivals, and of them the 2xx and good.
	ivEnded, ivOK, ivGood atomic.Int64
}

// stepState is what the scheduler, the workers and the monitor share about
// one step; the counts of its arrivals' outcomes are in the shards.
type stepState struct {
	// pending is 1 while the scheduler is in the step, plus the arrivals
	// handed out and not yet ended; 0: every arrival ended.
	pending  atomic.Int64
	started  atomic.Bool
	over     atomic.Bool  // the next step began: Attempts is final once pending is 0
	elapsed  atomic.Int64 // set when the scheduler leaves the step
	cut      atomic.Bool  // the run stopped before the step was over, or calls were cut
	sent     atomic.Int64 // first attempts handed to the client so far (progress)
	unsent   atomic.Int64 // so far (progress)
	attempts atomic.Int64 // attempts sent in the step's window
}

// arrival is one intended request.
type arrival struct {
	seq      uint64
	draw     uint64        // seeds the arrival's variable values
	intended time.Duration // since the base
	step     int32
	target   int32
	class    int32 // −1: no class
}

func newRunner(ctx context.Context, cfg Config) (*runner, error) {
	m, err := newMix(cfg)
	if err != nil {
		return nil, err
	}
	r := &runner{
		cfg: cfg, mix: m, highest: 2 * cfg.Deadline,
		work: make(chan arrival), notify: make(chan struct{}, 1), finished: make(chan struct{}),
	}
	var start time.Duration
	for _, s := range cfg.Steps {
		r.starts = append(r.starts, start)
		r.steps = append(r.steps, &stepState{})
		start += s.Duration
	}
	r.end = start
	n := min(max(runtime.GOMAXPROCS(0), 1), 8)
	for range n {
		s := &shard{steps: make(map[int]*tally)}
		if cfg.Abort.P99 > 0 {
			s.window = newHist(r.highest)
		}
		r.shards = append(r.shards, s)
	}
	base := cfg.Transport
	if base == nil {
		r.own = newTransport(cfg)
		base = r.own
	}
	if r.rt, err = newClient(cfg, r, base); err != nil {
		return nil, err
	}
	r.ctx, r.stop = context.WithCancel(ctx)
	return r, nil
}

// since returns the time since the run's start (monotonic).
func (r *runner) since() time.Duration { return time.Since(r.base) }

// windowAt returns the step whose window holds t, for t before end.
func (r *runner) windowAt(t time.Duration) int {
	i := sort.Search(len(r.starts), func(i int) bool { return r.starts[i] > t })
	return max(i-1, 0)
}

// wake tells the monitor that a step may be ready.
func (r *runner) wake() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// ended marks one of step k's pending arrivals (or the scheduler's hold on
// it) done.
func (r *runner) ended(k int32) {
	if r.steps[k].pending.Add(-1) == 0 {
		r.wake()
	}
}

// finish counts arrival a's outcome in shard s.
func (r *runner) finish(s *shard, a *arrival, o *outcome) {
	s.record(r, a, o)
	r.ivEnded.Add(1)
	if o.ok {
		r.ivOK.Add(1)
	}
	if o.good {
		r.ivGood.Add(1)
	}
	r.ended(a.step)
}

// unsent counts arrival a as not sent on time.
func (r *runner) unsent(s *shard, a *arrival) {
	r.steps[a.step].unsent.Add(1)
	r.finish(s, a, &outcome{timeout: true, latency: r.cfg.Timeout})
}
