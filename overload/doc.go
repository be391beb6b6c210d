// Package overload is the gateway's protection of itself: before it protects
// any backend, a gateway must not fall over under the connections and the
// memory its clients make it hold (Envoy's overload manager, HAProxy's
// maxconn).
//
// # Admission at accept
//
// A Guard holds the limits shared by every listener (Guard.SetConfig
// replaces them at a reload); each listener has a Gate (Guard.Gate, kept by
// name across reloads). At every accepted
// connection the listener calls Gate.Admit, which refuses the connection —
// the caller closes the socket at once, no goroutine kept — in this order:
//
//  1. the Guard is in state Refuse (heap or goroutines above their hard
//     thresholds): ReasonOverload;
//  2. Config.MaxConns connections are open over every listener:
//     ReasonMaxConns;
//  3. the Gate's own connection limit (Gate.SetLimits) is reached:
//     ReasonListenerMaxConns;
//  4. the connection is a TLS one and the handshake token bucket
//     (Config.HandshakeRate per second, bursts of max(1, ⌊rate⌋)) is empty:
//     ReasonHandshakeRate.
//
// An admitted connection holds a Ticket. Once the client's address is known
// (after a PROXY protocol header, if any) Ticket.SetIP applies the Gate's
// per-IP limit (ReasonPerIP); Ticket.Release, when the connection closes,
// gives every count back (idempotent). Each refusal is counted by reason
// (Stats, GateStats), never logged: a flood must not become a log flood.
//
// The counts are lock-free atomics (a compare-and-swap loop, so a limit is
// never exceeded and never refuses early); the per-IP counts are a map in 16
// shards, each under its own mutex, in which an address has an entry only
// while it has a connection open: the map holds at most as many entries as
// there are open connections. The handshake bucket is ratelimit's
// TokenBucket behind ratelimit.Limiter (one mutex, taken only for TLS
// connections that passed the connection limits): the library's own bucket,
// which already takes the time as a parameter.
//
// # States
//
// The Guard measures the live heap and the goroutines (Guard.Run, every
// Config.Interval) and moves between three states:
//
//	Normal ──(≥ soft)──▶ KeepAliveOff ──(≥ hard)──▶ Refuse
//
// each measure on its own (heap and goroutines), the Guard's state being the
// higher of the two. In KeepAliveOff the OnKeepAlive hooks are told to turn
// keep-alive off (every HTTP/1.1 response closes its connection, so the
// connections held shrink); in Refuse new connections are refused as well.
// Hysteresis: a measure leaves a state only when it falls below 90% of that
// state's threshold (threshold − ⌊threshold/10⌋), so a heap hovering around
// a threshold does not flap. Every transition is counted and logged once
// (Warn going up, Info going down). Guard.Sample is the step itself, with
// the instant and the measures as parameters, for tests.
//
// The heap measure is runtime/metrics' /gc/heap/live:bytes — the heap marked
// live by the last garbage collection — rather than
// /memory/classes/heap/objects:bytes, which also counts dead objects not yet
// swept and so swings between half and all of GOGC's target within every GC
// cycle: it would cross a threshold and come back without the gateway's
// memory having changed. The live heap moves only when what is held moves.
package overload
