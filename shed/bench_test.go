package shed

import "testing"

func BenchmarkClassLimiterAdmitRelease(b *testing.B) {
	l, _ := NewClassLimiter(ClassConfig{Limits: []int{50, 20}})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tok, ok := l.Admit(Class(i & 1))
		if !ok {
			b.Fatal("refused")
		}
		tok.Release()
	}
}

func BenchmarkClassLimiterAdmitReleaseParallel(b *testing.B) {
	l, _ := NewClassLimiter(ClassConfig{Limits: []int{NoLimit}})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok, _ := l.Admit(Critical)
			tok.Release()
		}
	})
}

func BenchmarkQueuePushPop(b *testing.B) {
	for _, order := range []Order{FIFO, AdaptiveLIFO} {
		b.Run(order.String(), func(b *testing.B) {
			q, _ := NewQueue[int](QueueConfig{Capacity: 64, Order: order, StandingLen: 16, MaxWait: 1})
			for i := range 32 {
				q.Push(0, i)
			}
			b.ReportAllocs()
			now := 0.0
			for i := 0; b.Loop(); i++ {
				now += 1e-6
				q.Push(now, i)
				if _, st := q.Pop(now); st == Empty {
					b.Fatal("empty")
				}
			}
		})
	}
}

func BenchmarkCoDelDrop(b *testing.B) {
	for _, law := range []Law{RFC8289, Cutoff} {
		b.Run(law.String(), func(b *testing.B) {
			c, _ := NewCoDel(CoDelConfig{Target: 0.005, Interval: 0.1, Law: law})
			b.ReportAllocs()
			now := 0.0
			for i := 0; b.Loop(); i++ {
				now += 1e-4
				sojourn := 0.001
				if i&1024 != 0 {
					sojourn = 0.02 // alternate calm and standing phases
				}
				c.Drop(now, now-sojourn)
			}
		})
	}
}
