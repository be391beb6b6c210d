package balancer

// Member is one endpoint of a Set as Members reports it.
type Member struct {
	State State
	*EndpointState
}

// Members returns every endpoint in the set, whatever its state, in the
// order of the last Update, with its state at now (for status pages and
// for carrying state into another Set).
func (s *Set) Members(now float64) []Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.advanceLocked(now)
	if s.expireLocked(now) {
		s.publishLocked(now)
	}
	out := make([]Member, len(s.order))
	for i, m := range s.order {
		out[i] = Member{State: s.stateLocked(m, now), EndpointState: m.st}
	}
	return out
}
