package httplimit

import "sync"

// bufPool recycles response body buffers; buffers that grew past 4 KiB are
// dropped rather than kept.
type bufPool struct{ p sync.Pool }

func (b *bufPool) get() *[]byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return v
	}
	s := make([]byte, 0, 512)
	return &s
}

func (b *bufPool) put(s *[]byte) {
	if cap(*s) <= 4096 {
		*s = (*s)[:0]
		b.p.Put(s)
	}
}
