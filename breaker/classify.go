package breaker

// HTTPFailure is the default rule for what an HTTP call's outcome tells a
// breaker about the dependency: pass its result as Done's ok = !HTTPFailure.
//
//   - err != nil (the transport failed: connection refused or reset, TLS,
//     DNS, a timeout or deadline) → true, whatever status is;
//   - status 500–599 except 501 → true: the server is failing or overloaded
//     (502, 503 and 504 included);
//   - everything else → false: 1xx–4xx (a 4xx, 429 included, says the
//     request was wrong or unwelcome, not that the server is unhealthy), 501
//     Not Implemented (the server answers, it does not support the method)
//     and statuses outside 100–599.
//
// When the caller itself gave up (its context was cancelled before the
// dependency answered), the call tested nothing: call Ticket.Cancel instead
// of Done rather than asking this function. It is a pure function of its
// arguments, safe for concurrent use, and does not allocate.
func HTTPFailure(status int, err error) bool {
	if err != nil {
		return true
	}
	return status >= 500 && status <= 599 && status != 501
}
