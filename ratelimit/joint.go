package ratelimit

import (
	"context"
	"errors"
	"fmt"

	"github.com/spillwayhq/spillway/breaker"
)

// JointItem is one rule's part of a request that a Joint decides: the
// rule's store, key and cost going in, the rule's answer coming out.
type JointItem struct {
	// Store is the rule's store. Items whose store is a JointKeyed of the
	// deciding Joint are decided together; any other is decided by its own
	// AllowN.
	Store Keyed
	Key   string
	Cost  int
	// Shadow marks a rule that is observed, not enforced: its refusal
	// refuses nothing and holds back no other item's units.
	Shadow bool

	// Decision and Err are the rule's answer, as Store.AllowN would give
	// it; Err is ErrSkipped for an item that was not decided.
	Decision Decision
	Err      error
}

// Refuses reports whether a decided item refuses its request: an enforced
// rule that refused, or that could not decide and fails closed (an item
// skipped with ErrSkipped refuses nothing).
func (it *JointItem) Refuses() bool {
	if it.Shadow || errors.Is(it.Err, ErrSkipped) {
		return false
	}
	return it.Err != nil || !it.Decision.Allowed
}

// Joint decides one request under several rules at once. For stores that
// keep their state elsewhere (package ratelimit/redisstore) that is one
// round trip and one timeout for all of the request's rules instead of one
// each, and a refusal by one enforced rule spends none of the others'
// units; the implementation documents where it cannot promise that.
type Joint interface {
	// AllowJoint decides items, one request at now, and fills in each
	// item's Decision and Err. Each rule keeps its own semantics (its
	// algorithm, fail mode and layers); an item whose rule allows the
	// request reports Allowed even when another rule refused it, but then
	// spent nothing. The caller answers the request by the first item, in
	// its order, that Refuses. Items must have distinct (store, key)
	// pairs. Safe for concurrent use.
	AllowJoint(ctx context.Context, now float64, items []JointItem)
}

// JointKeyed is a Keyed whose requests its Joint can decide together with
// those of the Joint's other stores.
type JointKeyed interface {
	Keyed
	// Joint returns the Joint that decides this store's requests with
	// others; stores with the same Joint may share a decision. It is the
	// same for the store's whole life (httplimit reads it once per rule).
	Joint() Joint
}

// ErrSkipped is the Err of a JointItem that was not decided because
// another item of the same request refused it before any round trip (a
// local tier, a closed class, an open breaker); nothing was spent for it.
var ErrSkipped = errors.New("ratelimit: not decided: another rule refused the request first")

// GuardTicket is Guarded.AllowN in two steps, for a caller that calls the
// store itself, together with other stores' calls (a Joint): Begin asks
// the breaker, End applies the store's answer or the fail mode and reports
// the outcome to the breaker. A ticket is used once.
type GuardTicket struct {
	g    *Guarded
	t    breaker.Ticket
	now  float64
	open bool // the breaker refused the call
}

// Begin starts a decision at now: it asks the breaker whether the store
// may be called (see Call).
func (g *Guarded) Begin(now float64) GuardTicket {
	t, err := g.br.Allow(now)
	if err != nil {
		g.skipped.Add(1)
		return GuardTicket{g: g, now: now, open: true}
	}
	g.calls.Add(1)
	return GuardTicket{g: g, t: t, now: now}
}

// Call reports whether the store is to be called: false while the breaker
// is open, when End applies the fail mode without a call.
func (t *GuardTicket) Call() bool { return !t.open }

// End finishes the decision for key and cost with the store's answer d,
// err (ignored when Call is false), exactly as AllowN does after its call
// of the store: see the decision table on Guarded.
func (t *GuardTicket) End(ctx context.Context, key string, cost int, d Decision, err error) (Decision, error) {
	g := t.g
	if t.open {
		return g.fail(ctx, key, t.now, cost, ErrStoreOpen)
	}
	if err == nil {
		t.t.Done(t.now, true)
		return d, nil
	}
	if ctx.Err() != nil {
		// The caller went away: that says nothing about the store.
		t.t.Cancel()
		return Decision{}, err
	}
	t.t.Done(t.now, false)
	g.failures.Add(1)
	if !errors.Is(err, ErrStoreUnavailable) {
		err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return g.fail(ctx, key, t.now, cost, err)
}

// Cancel gives the ticket back without an outcome (the store was not
// called after all): the breaker counts nothing.
func (t *GuardTicket) Cancel() {
	if !t.open {
		t.t.Cancel()
	}
}
