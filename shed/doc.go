// Package shed decides which requests a server turns away when it is
// overloaded, and in which order it serves the ones it keeps waiting. It holds
// three small, independent mechanisms from seed 000 ("Handling overload"):
//
//   - ClassLimiter: admission by criticality class. Every request has a Class
//     (Critical, Default, Sheddable, … — a smaller number is more important).
//     A request of class c is admitted while the number of requests in flight,
//     over all classes, is below Limits[c]. With limits such as 50 for
//     Critical and 20 for the rest, ordinary requests are refused first and
//     critical ones keep the last 30 places: seed 000's priority shedding,
//     which at twice the capacity keeps 100% of critical requests in time
//     where a plain bound keeps 50%. Equal limits give a bounded server that
//     fails fast; NoLimit gives the unbounded server that collapses.
//     A limit in flight adapts itself to the work by Little's law, L = λW: when
//     requests slow down, the same limit admits fewer per second.
//
//   - Queue: a bounded ring buffer that remembers when each entry arrived.
//     When it is full a new entry is refused (tail drop). It serves in FIFO,
//     LIFO or adaptive LIFO order (Maurer, "Fail at Scale", ACM Queue 2015):
//     first-in first-out in normal times, newest first while a standing queue
//     has formed, so the requests served are the ones whose clients are still
//     waiting; entries older than MaxWait expire instead of being served.
//     Size the queue in time, not memory: Capacity ≈ throughput × the longest
//     acceptable wait (100/s × 0.5 s → 50).
//
//   - CoDel: a dropper consulted at dequeue that judges a queue by sojourn
//     time (how long the entry waited) rather than length (Nichols and
//     Jacobson, "Controlling Queue Delay", ACM Queue 2012; RFC 8289, 2018).
//     A good queue absorbs a burst and drains; a bad queue stands. When the
//     sojourn time has stayed above Target for a whole Interval the queue is
//     standing and CoDel starts dropping. Law RFC8289 follows RFC 8289 §5:
//     drops spaced Interval/√count apart until the sojourn falls below
//     Target. Law Cutoff is seed 000's simpler "CoDel-like" rule: after an
//     Interval above Target every entry above Target is dropped.
//
// # Composition
//
// A server that uses all three applies them in this order: the ClassLimiter
// at arrival (refuse early, before any work, with 503 and Retry-After); the
// Queue's Push for requests admitted but not yet running (refuse when full);
// at dequeue, Queue.Pop (expired entries are refused, not served) and then
// CoDel.Drop on the entry Pop chose; only an entry that survives both is
// served. Call CoDel.Idle when Pop finds the queue empty.
//
// # Time
//
// No decision reads a clock. Every method that depends on time takes now, in
// float64 seconds on a monotonic timeline of the caller's choosing (see
// package clock); durations in configurations are float64 seconds too. The
// simulator passes virtual time, servers pass clock.Real's Now.
//
// # Concurrency
//
// ClassLimiter is safe for concurrent use and lock-free (atomics only).
// Queue and CoDel are not safe for concurrent use: they are small state
// machines meant to live under the lock of whatever owns the queue.
package shed
