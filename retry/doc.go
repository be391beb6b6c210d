// Package retry decides when a failed call may be tried again: how long to
// wait (Backoff), whether the retry is affordable at all (Budget), and,
// putting them together with the server's wishes and the deadline, whether
// to retry at all (Policy); and when to hedge (Hedger).
//
// A client that retries at once, from thousands of processes, turns a brief
// slowdown into a retry storm: every timed-out request arrives again, the
// offered load multiplies, and the server stays overloaded after the trigger
// is gone (a metastable failure; seed 000, "Timeouts, deadlines and retry
// budgets", and seed 003). The remedies, in the order a client applies them:
//
//  1. Retry at one layer only, at most a few times.
//  2. Ask the Budget before each retry. It is a token bucket shared by all of
//     a client's calls to one dependency: every new request deposits Ratio
//     tokens (up to Max), every retry spends one. Retries therefore stay
//     below Ratio × new requests (plus the Max reserve), whatever the failure
//     rate, so retries can never multiply the load by more than 1 + Ratio.
//     The seed's experiment (Max 10, Ratio 0.1) cuts the load during a
//     capacity dip from 3.1× to 1.07× and the service recovers.
//  3. Wait Backoff.Delay seconds: exponential backoff with jitter, so that
//     clients that failed together do not return together.
//
// Backoff formulas (Marc Brooker, "Exponential Backoff And Jitter", AWS
// Architecture Blog, 2015), with u uniform in [0, 1) and attempt n ≥ 0:
//
//	ceiling(n)    = min(Cap, Base·2^n)
//	FullJitter    = u·ceiling(n)                        in [0, ceiling(n))
//	EqualJitter   = ceiling(n)/2 + u·ceiling(n)/2        in [ceiling(n)/2, ceiling(n))
//	Decorrelated  = min(Cap, Base + u·(3·prev − Base))   in [Base, min(Cap, 3·prev))
//	NoJitter      = ceiling(n)
//
// Attempt numbering follows the seed's experiment: n is the number of
// attempts already made, so the first retry (after the first attempt failed)
// uses n = 1 and waits below 2·Base. With Base 0.5 s and FullJitter, Delay
// returns exactly the float64 the reference computes as rand()·0.5·2^n.
//
// Time is a parameter: nothing here reads a clock. Durations are float64
// seconds, rates are per second.
//
// # Policy: one decision per failed attempt
//
// Policy puts the pieces together for one dependency. After an attempt
// fails with an error the adapter deems retryable, it fills an Attempt and
// calls Policy.Next, which answers Retry with a delay or one of the Stop
// verdicts, whose String is a metric label:
//
//	NoRetry (server said no)          → StopServer
//	N ≥ MaxAttempts (default 3)       → StopAttempts
//	delay = max(Backoff.Delay, After)   never earlier than the server asked
//	Now + delay + Expected ≥ Deadline → StopDeadline   (cannot finish in time)
//	Budget.TryRetry(Now) refuses      → StopBudget     (asked last: no token
//	                                                    is spent on a refusal)
//
// Servers ask for a delay with Retry-After (HTTP; ParseRetryAfter reads
// both delay-seconds and HTTP-dates, saturating at MaxServerDelay) or
// grpc-retry-pushback-ms (gRPC; ParsePushback, which also tells "do not
// retry", as gRPC proposal A6 defines it).
//
// Only idempotent requests are retried by default: Idempotent accepts the
// idempotent methods of RFC 9110 and requests carrying an Idempotency-Key.
// A retried HTTP request needs a fresh body (http.Request.GetBody); a
// request whose body cannot be replayed is not retried. Which statuses or
// codes are retryable, and moving to another endpoint when a balancer is
// present, are the adapter's choices.
//
// # Hedging
//
// A Hedger sends a second attempt when the first has not answered within a
// delay (fixed, or the p95 of recent latencies it tracks) and pays for each
// hedge from the same Budget as retries, so hedges and retries together stay
// within the budget's ratio.
//
// # The adapter's loop
//
//	policy.RecordRequest(now)               // once per call
//	for a := (retry.Attempt{N: 1, After: -1}); ; a.N++ {
//		ok, after, noRetry := send()        // after: server delay, or -1
//		if ok { break }
//		a.Now, a.After, a.NoRetry = clock.Now(), after, noRetry
//		delay, v := policy.Next(a, nil)
//		if v != retry.Retry { break }       // count v.String() in a metric
//		a.Prev = delay
//		sleep(delay)                        // or until the context ends
//	}
package retry
