package sim

// ordered is an event type of the simulator's queues: before is a strict
// total order (ties broken by an insertion number), so every run pops
// events in one deterministic order.
type ordered[T any] interface {
	before(other T) bool
}

// minHeap is a binary min-heap of events by before: the simulator's event
// queues (completions, retries, calls in flight).
type minHeap[T ordered[T]] []T

func (h *minHeap[T]) push(e T) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].before(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *minHeap[T]) pop() T {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		m, l, r := i, 2*i+1, 2*i+2
		if l < n && s[l].before(s[m]) {
			m = l
		}
		if r < n && s[r].before(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
