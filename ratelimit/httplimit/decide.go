package httplimit

import (
	"context"
	"sync"

	"github.com/spillwayhq/spillway/ratelimit"
)

// decisions is one request's matching rules and their answers, in rule
// order: items[i] is rules[i]'s store, key, cost and answer. Pooled.
type decisions struct {
	rules   []*rule
	items   []ratelimit.JointItem
	decided []bool
	group   []int                 // scratch: the items of one Joint
	joint   []ratelimit.JointItem // scratch: their copies, contiguous
}

// decisionsPool recycles decisions; one that grew past 64 rules is dropped.
type decisionsPool struct{ p sync.Pool }

func (p *decisionsPool) get() *decisions {
	if d, ok := p.p.Get().(*decisions); ok {
		return d
	}
	return &decisions{}
}

func (p *decisionsPool) put(d *decisions) {
	if cap(d.items) > 64 {
		return
	}
	clear(d.rules)
	clear(d.items)
	clear(d.joint)
	d.rules, d.items, d.decided, d.group, d.joint = d.rules[:0], d.items[:0], d.decided[:0], d.group[:0], d.joint[:0]
	p.p.Put(d)
}

// add appends rule ru's part of the request.
func (d *decisions) add(ru *rule, key string, cost int) {
	d.rules = append(d.rules, ru)
	d.items = append(d.items, ratelimit.JointItem{Store: ru.store, Key: key, Cost: cost, Shadow: ru.Shadow})
	d.decided = append(d.decided, false)
}

// decide decides item i unless it is decided already. An item whose store
// belongs to a ratelimit.Joint is decided together with every later
// undecided item of the same Joint, in one AllowJoint (for Redis rules: one
// round trip and one timeout for all of them, and a refusal spends none of
// the others' units); any other item by its store's AllowN.
func (d *decisions) decide(ctx context.Context, now float64, i int) {
	if d.decided[i] {
		return
	}
	it := &d.items[i]
	var j ratelimit.Joint
	if jk, ok := it.Store.(ratelimit.JointKeyed); ok {
		j = jk.Joint()
	}
	d.group = d.group[:0]
	if j != nil {
		for k := i; k < len(d.items); k++ {
			if jk, ok := d.items[k].Store.(ratelimit.JointKeyed); ok && !d.decided[k] && jk.Joint() == j {
				d.group = append(d.group, k)
			}
		}
	}
	if len(d.group) < 2 {
		it.Decision, it.Err = it.Store.AllowN(ctx, it.Key, now, it.Cost)
		d.decided[i] = true
		return
	}
	d.joint = d.joint[:0]
	for _, k := range d.group {
		d.joint = append(d.joint, d.items[k])
	}
	j.AllowJoint(ctx, now, d.joint)
	for n, k := range d.group {
		d.items[k] = d.joint[n]
		d.decided[k] = true
	}
}
