package limit

// Pin applies the limit n (≥ 1) at now instead of the algorithm's, until
// Unpin: an operator's override. The algorithm keeps learning from the
// samples meanwhile, so Unpin returns to its current limit. Waiters that
// a higher limit has room for are granted places at once.
func (l *Limiter) Pin(now float64, n int) {
	n = max(n, 1)
	l.mu.Lock()
	l.pinned = n
	l.applyLocked(n)
	l.mu.Unlock()
	l.dispatch(now)
}

// Unpin returns to the algorithm's limit at now.
func (l *Limiter) Unpin(now float64) {
	l.mu.Lock()
	l.pinned = 0
	l.applyLocked(l.alg.Limit())
	l.mu.Unlock()
	l.dispatch(now)
}

// Pinned returns the pinned limit, 0 when the algorithm's applies.
func (l *Limiter) Pinned() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pinned
}

// dispatch hands free places to waiters.
func (l *Limiter) dispatch(now float64) {
	if l.queued.Load() > 0 {
		l.qmu.Lock()
		l.dispatchLocked(now)
		l.qmu.Unlock()
	}
}
