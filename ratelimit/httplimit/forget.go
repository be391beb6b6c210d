package httplimit

// Forget drops what the verdict holds of the limiter that made it (its
// rule, its pre-built answers), keeping only the last client address's
// key part: a pooled verdict then pins no limiter, and the next Check for
// the same client does not format its address again.
func (v *Verdict) Forget() {
	ip := v.ip
	*v = Verdict{ip: ip}
}
