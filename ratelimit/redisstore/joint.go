package redisstore

import (
	"context"
	"errors"

	"github.com/spillwayhq/spillway/ratelimit"
)

// How a joint item is decided.
const (
	jointRedis uint8 = iota // in the joint script call
	jointDone               // already, without a round trip
	jointAlone              // after the joint call, by its own layers (leasing) or store
)

// jointScratch is one AllowJoint's bookkeeping, pooled.
type jointScratch struct {
	how     []uint8
	tickets []ratelimit.GuardTicket
	local   []ratelimit.Decision // the local tier's answer, when it allowed
	pending []int                // items for Redis, past their breakers
	inCall  []int                // of those, the items in the call, in its order
}

func (j *jointScratch) reset(n int) {
	j.how = append(j.how[:0], make([]uint8, n)...)
	j.tickets = append(j.tickets[:0], make([]ratelimit.GuardTicket, n)...)
	j.local = append(j.local[:0], make([]ratelimit.Decision, n)...)
	j.pending, j.inCall = j.pending[:0], j.inCall[:0]
}

// AllowJoint decides one request under several of the rules whose stores s
// made (items whose Store is another store are decided by its AllowN
// after the others): ratelimit.Joint. Each rule keeps its layers (see
// Stores) and its fail mode, but the items that Redis decides go in one
// call, queued and batched with other requests like a single decision and
// waiting at most StoresConfig.Store.Timeout in all, instead of one
// round trip and one timeout per rule. With Redis stopped a request waits
// one timeout, not one per rule, and each rule then applies its own fail
// mode.
//
// A refusal does not spend the other rules' units, with these
// exceptions:
//
//   - On a standalone server (or Sentinel's master) the script checks all
//     the request's Redis rules and then commits them all or none. On a
//     Cluster (or another sharded client), the rules whose keys share a
//     hash slot (tag) are checked and committed together, one script call
//     per slot, sent in one pipeline per node; a rule refused in one slot
//     does not hold back the rules of other slots, which spend their units
//     (the keys of one user key are always in one slot: Prefix:{key}:rule).
//   - The in-memory layers spend as they decide: the local tier and the
//     fail-open floor of a rule count the request even if another rule
//     refuses it.
//   - A leased rule (StoresConfig.Lease) is decided after the others, by
//     its lease (a round trip of its own when the lease must be fetched),
//     and only if they admitted the request.
//
// A refusal that needs no round trip (a local tier, a closed class, an
// open breaker of a fail-closed rule, or a fail-open floor) refuses the
// request at once: the other items are then not decided (ratelimit.ErrSkipped).
func (s *Stores) AllowJoint(ctx context.Context, now float64, items []ratelimit.JointItem) {
	if s.cfg.Health != nil {
		s.poll(now)
	}
	j := s.pool.Get().(*jointScratch)
	j.reset(len(items))
	defer s.pool.Put(j)
	refused := false
	for i := range items {
		refused = s.jointFirst(ctx, now, &items[i], j, i) || refused
	}
	if refused {
		for _, i := range j.pending {
			j.tickets[i].Cancel()
			items[i].Err = ratelimit.ErrSkipped
		}
	} else if len(j.pending) > 0 {
		refused = s.jointCall(ctx, now, items, j)
	}
	for i := range items {
		it := &items[i]
		switch {
		case j.how[i] != jointAlone:
		case refused:
			it.Err = ratelimit.ErrSkipped
		default:
			if rs, ok := it.Store.(*RuleStore); ok && rs.owner == s {
				it.Decision, it.Err = rs.guard.AllowN(ctx, it.Key, now, it.Cost)
				tierMerge(it, j.local[i], rs.localK != nil)
			} else {
				it.Decision, it.Err = it.Store.AllowN(ctx, it.Key, now, it.Cost)
			}
			refused = it.Refuses()
		}
	}
}

// jointFirst takes the steps of item it (the i-th) that need no round trip:
// its local tier, its class, its breaker. It reports whether they refused
// the request.
func (s *Stores) jointFirst(ctx context.Context, now float64, it *ratelimit.JointItem, j *jointScratch, i int) bool {
	rs, ok := it.Store.(*RuleStore)
	if !ok || rs.owner != s {
		j.how[i] = jointAlone
		return false
	}
	if rs.localK != nil {
		d, err := rs.localK.AllowN(ctx, it.Key, now, it.Cost)
		if err != nil || !d.Allowed {
			it.Decision, it.Err = d, err
			j.how[i] = jointDone
			return it.Refuses()
		}
		j.local[i] = d
	}
	if rs.lease != nil {
		j.how[i] = jointAlone
		return false
	}
	if rs.redis.pub.Load().params(rs.class) == nil {
		it.Decision, it.Err = rs.redis.closedDecision(it.Cost), nil
		j.how[i] = jointDone
		return it.Refuses()
	}
	t := rs.guard.Begin(now)
	if !t.Call() {
		it.Decision, it.Err = t.End(ctx, it.Key, it.Cost, ratelimit.Decision{}, nil)
		tierMerge(it, j.local[i], rs.localK != nil)
		j.how[i] = jointDone
		return it.Refuses()
	}
	j.tickets[i] = t
	j.pending = append(j.pending, i)
	return false
}

// jointCall decides the pending items in one call of the engine, applies
// each rule's fail mode to the outcome, and reports whether a rule refused.
// An item whose store closed meanwhile (its rule was replaced) or whose
// class closed is decided first, without Redis; if that refuses the
// request, the others are skipped.
func (s *Stores) jointCall(ctx context.Context, now float64, items []ratelimit.JointItem, j *jointScratch) bool {
	c := s.eng.pool.Get().(*call)
	c.now = now
	j.inCall = j.inCall[:0]
	refused := false
	for _, i := range j.pending {
		it, rs := &items[i], items[i].Store.(*RuleStore)
		par, err := rs.redis.prepare(ctx, rs.class, now)
		switch {
		case err != nil:
			it.Decision, it.Err = j.tickets[i].End(ctx, it.Key, it.Cost, ratelimit.Decision{}, err)
			tierMerge(it, j.local[i], rs.localK != nil)
		case par == nil:
			j.tickets[i].Cancel()
			it.Decision, it.Err = rs.redis.closedDecision(it.Cost), nil
		default:
			c.add(rs.redis, par, it.Key, it.Cost, it.Shadow)
			j.inCall = append(j.inCall, i)
			continue
		}
		refused = refused || it.Refuses()
	}
	if refused || len(j.inCall) == 0 {
		for _, i := range j.inCall {
			j.tickets[i].Cancel()
			items[i].Err = ratelimit.ErrSkipped
		}
		s.eng.put(c)
		return refused
	}
	err := s.eng.do(ctx, c, s.timeout)
	for k, i := range j.inCall {
		it, rs := &items[i], items[i].Store.(*RuleStore)
		d, ierr := ratelimit.Decision{}, err
		if err != nil {
			rs.redis.countFailed(err)
		} else {
			for _, ci := range c.items { // the engine may have reordered them
				if int(ci.idx) == k {
					d, ierr = ci.d, ci.err
					break
				}
			}
		}
		it.Decision, it.Err = j.tickets[i].End(ctx, it.Key, it.Cost, d, ierr)
		tierMerge(it, j.local[i], rs.localK != nil)
		refused = refused || it.Refuses()
	}
	if err == nil || errors.Is(err, ErrQueueFull) { // else abandoned: not to be touched again
		s.eng.put(c)
	}
	return refused
}

// tierMerge combines an item's answer with its local tier's allowed one,
// as ratelimit.Tiered does: the smaller Remaining and the larger Reset.
func tierMerge(it *ratelimit.JointItem, local ratelimit.Decision, has bool) {
	if !has || it.Err != nil || !it.Decision.Allowed {
		return
	}
	it.Decision.Remaining = min(it.Decision.Remaining, local.Remaining)
	it.Decision.Reset = max(it.Decision.Reset, local.Reset)
}
