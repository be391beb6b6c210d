package proxy

import (
	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/request"
)

// pick chooses the endpoint for one request: by its hash key in the
// cluster's ring or Maglev table when the cluster hashes and the request
// has a key, else with the cluster's picker. The endpoint's request is
// counted started (EndpointState.Start, as Set.Pick does): the caller
// owes it exactly one Done.
func (c *Cluster) pick(now float64, v *request.View) (*balancer.EndpointState, error) {
	if c.Hash != nil {
		if key, ok := c.Hash.ViewKey(v); ok {
			snap := c.Set.Current(now)
			if snap.Len() > 0 {
				if t, err := snap.Table(c.Table); err == nil {
					if i := t.(balancer.HashTable).Lookup(key); i >= 0 && i < snap.Len() {
						e := snap.Endpoint(i)
						e.Start()
						return e, nil
					}
				}
			}
		}
	}
	return c.Set.Pick(now, c.Picker)
}
