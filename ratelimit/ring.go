package ratelimit

// ring is a FIFO of times (int64 nanoseconds) in a circular buffer that grows, doubling,
// up to a caller-given maximum and then stays. Header: 32 bytes.
type ring struct {
	buf  []int64
	head uint32 // index of the oldest element
	n    uint32 // number of elements
}

func (r *ring) front() int64 { return r.buf[r.head] }

func (r *ring) back() int64 { return r.at(r.n - 1) }

// at returns the i-th oldest element (0 is the front); i < r.n.
func (r *ring) at(i uint32) int64 {
	j := uint64(r.head) + uint64(i)
	if j >= uint64(len(r.buf)) {
		j -= uint64(len(r.buf))
	}
	return r.buf[j]
}

func (r *ring) popFront() {
	r.head++
	if int(r.head) == len(r.buf) {
		r.head = 0
	}
	r.n--
	if r.n == 0 {
		r.head = 0
	}
}

// push appends x; the caller guarantees r.n < max. When the buffer is full it
// is replaced by one twice as large (at most max).
func (r *ring) push(x int64, max int) {
	if int(r.n) == len(r.buf) {
		r.grow(max)
	}
	j := uint64(r.head) + uint64(r.n)
	if j >= uint64(len(r.buf)) {
		j -= uint64(len(r.buf))
	}
	r.buf[j] = x
	r.n++
}

func (r *ring) grow(max int) {
	size := 2 * len(r.buf)
	if size < 4 {
		size = 4
	}
	if size > max {
		size = max
	}
	buf := make([]int64, size)
	for i := uint32(0); i < r.n; i++ {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}
