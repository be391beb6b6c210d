// Package limit computes adaptive concurrency limits: how many requests a
// server should have in flight at once. Each algorithm is a small state
// machine fed one Sample per finished request (when it finished, its RTT,
// the requests in flight, whether it was dropped by overload) that returns
// the new limit. Time is a parameter (Sample.Now, seconds on a monotonic
// timeline); nothing here reads a clock. The algorithms compute a limit and
// do not enforce it: an enforcer (a limiter with classes and queues) counts
// requests in flight, admits while in-flight < Limit(), and calls Update
// when each request ends, serialising the calls (none of the types is safe
// for concurrent use; one mutex around Update is enough). The split follows
// Netflix concurrency-limits (Limit vs Limiter).
//
// By Little's law, L = λW, a limit on requests in flight adapts to the
// work: when requests slow down the same limit admits fewer per second. The
// right limit is unknown and changes with hardware and dependencies, so
// these algorithms search for it as TCP searches for its window (seed 000,
// seed 004).
//
// # Algorithms
//
// Fixed: a constant. Choose it when a load test measured the capacity and it
// does not change; it is the baseline the others are compared with.
//
// AIMD (seed 000): on a dropped sample or RTT > Tolerance × Baseline,
// limit = max(MinLimit, floor(limit × Backoff)); otherwise
// limit = min(MaxLimit, limit + 1/limit), about +1 per round trip.
// Defaults: InitialLimit 20, Baseline 40 ms, Tolerance 2, Backoff 0.9,
// MinLimit 1, MaxLimit 1000. Choose it for its simplicity and when a healthy
// latency is known; with LearnBaseline the baseline is the measured no-load
// RTT instead, and the RTT compared with it is the current quantile RTT (see
// below), not each sample's. It settles where RTT crosses Tolerance ×
// baseline, so with the default 2 it tolerates a doubled latency before
// backing off. With a fixed Baseline every slow sample counts, so latency
// noise that slows one request in a round trip past Tolerance × Baseline
// cuts the limit every round trip; with LearnBaseline and noisy latency keep
// Tolerance ≥ 1.2, as the quantiles, estimated from about one round trip of
// samples, wander by a few percent. Netflix's AIMDLimit differs: +1 per
// sample (while at least half the limit is in flight), an absolute timeout
// instead of a baseline, and a cut on every drop (docs/PEERS.md).
//
// Gradient (seed 004, Netflix "Performance Under Load", 2018):
//
//	gradient = clamp(Tolerance × RTT_noload ÷ RTT_actual, MinGradient, 1)
//	newLimit = limit × gradient + QueueSize(limit)      QueueSize = √limit
//	limit    = limit × (1 − a) + newLimit × a           a = Smoothing ÷ limit
//
// bounded by [MinLimit, MaxLimit]; a dropped sample gives limit × Backoff.
// RTT_noload and RTT_actual are the same low quantile (Probe.Quantile, the
// p10) of the unloaded RTTs and of the last round trip's RTTs (see No-load
// RTT below). Seed 004 took the smallest RTT seen and each sample's RTT
// (Probe.Quantile < 0 still does): exact with noise-free latency, but with
// noisy latency the minimum sits far below the typical unloaded RTT, and a
// noisy per-sample RTT_actual biases the mean gradient downward
// (E[RTT_noload ÷ RTT] < RTT_noload ÷ E[RTT], and the clamp at 1 cuts off
// the samples faster than the reference), so the limit shrank to a handful
// with no queue at all.
// Defaults: InitialLimit 20, MinGradient 0.5, Tolerance 1, Smoothing 0.2,
// Backoff 0.9, MinLimit 1, MaxLimit 1000. The gradient is clamped to
// [0.5, 1]: above 1
// (faster than the no-load RTT: noise, or a cache) would only add to the
// queue term, and below 0.5 one slow outlier could cut the target by more
// than half. Smoothing is per round trip: each sample moves the limit by
// Smoothing ÷ limit of the way, so the roughly limit samples of one round
// trip move it by about Smoothing; applied per sample the formula swings
// from the maximum to the minimum within one RTT on a busy server. In steady
// overload it settles near C + √C for a true concurrency C (with Tolerance
// T near T × C + √limit, if the load can push the RTT that far). Choose it
// as the default for a server: no latency needs configuring. It is seed
// 004's formula, not Netflix's GradientLimit: that one has a tolerance of 2
// (offered here as Tolerance, default 1, since both RTTs here are the same
// quantile), smooths only decreases, skips growth while fewer than half
// the limit are in flight, and probes by resetting the limit to its queue
// allowance (docs/PEERS.md). SmoothPerSample applies Smoothing to each
// sample, as Netflix's classes do.
//
// Gradient2 (after the idea of Netflix concurrency-limits' Gradient2Limit;
// our own code): the reference is a long-term RTT average (the mean of the
// first 10 samples, then an EWMA of weight 2 ÷ (LongWindow + 1), decaying
// 5% a sample while over twice the sample, as Netflix's), not the minimum:
//
//	gradient = clamp(Tolerance × RTT_long ÷ RTT, 0.5, 1)
//	newLimit = limit × gradient + QueueSize(limit)      QueueSize = 4
//
// smoothed and bounded as Gradient; growth is skipped while fewer than half
// the limit are in flight. Defaults: Tolerance 1.5, LongWindow 600,
// Smoothing 0.2, Backoff 0.9, MaxDrift 1.2. The changes from Netflix's:
// dropped samples shrink the limit (theirs ignores drops and climbs to its
// maximum under steady timeouts); the long-term RTT is capped at MaxDrift ×
// the no-load RTT (otherwise it follows the queue the limit itself builds
// and the limit creeps up forever under steady overload), which brings the
// no-load probe with it (see below); Smoothing is per round trip unless
// SmoothPerSample; MinLimit and MaxLimit default to 1 and 1000 (theirs 20
// and 200). With SmoothPerSample, a MaxDrift that never binds, probing off
// and no drops, it computes Netflix's sequence. It settles where RTT ≈
// Tolerance × MaxDrift × RTT_noload. Choose it where latency is noisy and
// a tolerated inflation is preferred to a minimum.
//
// Vegas (TCP Vegas, Brakmo and Peterson 1995; the shape of Netflix's
// VegasLimit): with queue = ⌈limit × (1 − RTT_noload ÷ RTT_actual)⌉ (whole
// requests; the same quantiles as Gradient's) and t = max(1, log10(limit)):
//
//	queue ≤ t         newLimit = limit + Beta × t
//	queue < Alpha × t newLimit = limit + t
//	queue > Beta × t  newLimit = limit − t
//
// bounded, then moved towards per round trip (Smoothing ÷ limit per
// sample; per sample with SmoothPerSample); growth is skipped while fewer
// than half the limit are in flight; the first sample only measures the
// no-load RTT; a dropped sample gives limit × Backoff. Each rule can be
// replaced by a function of the limit (AlphaFunc, BetaFunc, ThresholdFunc,
// IncreaseFunc, DecreaseFunc: the functions of Netflix's builder). The
// logarithm is retaken only when the limit has moved by more than 1% (t is
// then within 0.005 of log10(limit)): it costs more than the rest of
// Update. Defaults: Alpha 3, Beta 6, Smoothing 1, Backoff 0.9. It keeps an
// estimated 3–6 × log10(limit) requests queued, so it settles near C + a
// few. Choose it for the smallest standing queue. Configured with
// Netflix's functions, SmoothPerSample and the minimum RTT, it computes
// Netflix's VegasLimit's sequence for samples that are not dropped and do
// not set a new minimum RTT (limit/ported_test.go runs VegasLimitTest's
// cases); the remaining differences are in docs/PEERS.md.
//
// # No-load RTT and probing
//
// Gradient, Gradient2 and Vegas (and AIMD with LearnBaseline) gather the
// RTTs (dropped samples excluded, the first one too: the first no-load RTT
// is the first sample not dropped) into consecutive windows of about one
// round trip each: a window is full at max(32, ⌈limit⌉) samples, at most
// 256 (Gradient2 uses only RTT_noload, behind MaxDrift). When a window is
// full its Probe.Quantile (0.1: the p10, by nearest rank) is taken once and
// is RTT_actual until the next window is full: RTT_actual moves once per
// round trip, the pace at which the algorithms step anyway, and lags the
// RTTs by one to two round trips. (Until the first window is full it is
// the quantile of the RTTs gathered so far, retaken each time their count
// reaches a power of two.) A window's quantile is an O(size) selection, so
// Update costs a few nanoseconds more than without windows; an earlier
// version kept a sliding window sorted and paid a memory move of up to
// 2 KiB on every sample. RTT_noload is the same quantile of
// unloaded RTTs: between probes it only falls, to the higher of two
// consecutive windows' quantiles when both are below it (so a faster server
// is noticed within two round trips, one lucky window does not pull it
// down, and RTTs inflated by the limit's own queue cannot raise it); a
// probe (see ProbeConfig) refreshes it: every Probe.Interval (30 s), or
// early when the limit has halved since the last probe, the reported limit
// drops to Probe.Ratio (0.5) of itself for Probe.RTTs (4) round trips; the
// quantile of the RTTs of requests started during the probe becomes the
// no-load RTT, which is how a slower new normal is learned; then the limit
// returns to where it was. Probing to a fraction rather than to the minimum
// avoids the failure reported against Envoy's adaptive concurrency filter,
// where probing pinned concurrency low and caused bursts of 503s. Dropped
// samples never start a probe.
//
// Comparing a low quantile with the same low quantile makes the limit
// robust to latency noise: noise that every request may suffer (garbage
// collection, cache misses) shifts both alike, and the queueing delay the
// limit causes, which every request suffers, shifts only RTT_actual. With
// exponential noise of mean 0.5 × L or 1 × L on a server of true
// concurrency C and base latency L, Gradient and Vegas settle near C + √C
// and C + a few, as without noise (limit/noise_test.go); with the minimum
// they settled near 0.14 C and 0.46 C (noise 0.5 × L). A low quantile, not
// the median, because it is estimated more precisely from few samples when
// noise has a long tail, and because it ignores slow outliers entirely.
// InFlight is not used to pick unloaded samples: under load every sample has
// about the limit in flight, so it would leave none between probes; the
// probe is where unloaded RTTs are taken.
//
// # Backoff once per round trip
//
// Every multiplicative decrease (AIMD's, and the drop Backoff of the others)
// happens at most once per round trip: a sample of a request that started
// before the last decrease does not decrease again, as TCP cuts its window
// once per loss event. Otherwise the slow requests admitted before a cut
// would each cut again and collapse the limit to the minimum.
//
// Samples with an RTT that is not a positive finite number are ignored.
// Configuration structs have documented zero-value defaults; constructors
// validate and return a *ConfigError naming the field (wrapping ErrConfig).
// Update does not allocate; the RTT window takes 2 KiB per algorithm.
package limit
