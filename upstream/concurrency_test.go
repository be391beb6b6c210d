package upstream

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentAccounting runs many exchanges at once under MaxConns,
// a third of them canceled at some point, and checks the counts: never more
// than MaxConns open, and at the end nothing in use, nobody waiting, at most
// MaxIdle idle.
func TestConcurrentAccounting(t *testing.T) {
	checkLeaks(t)
	b := newBackend(t, canned(okHello))
	const maxConns, maxIdle = 3, 2
	p := NewPool(b.addr(), Config{MaxConns: maxConns, MaxIdle: maxIdle, ConnectTimeout: 10 * time.Second})
	defer p.Close()
	var over atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			default:
			}
			if s := p.Stats(); s.Open > maxConns {
				over.Store(int64(s.Open))
			}
			time.Sleep(50 * time.Microsecond) // a sample, not a timing
		}
	}()
	var wg sync.WaitGroup
	var okCount, canceled atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp Response
			buf := make([]byte, 16)
			for i := range 150 {
				ctx, cancel := context.WithCancel(context.Background())
				switch (g + i) % 6 {
				case 0:
					cancel() // before the start
				case 1:
					time.AfterFunc(time.Duration(i%5)*50*time.Microsecond, cancel)
				}
				err := p.RoundTrip(ctx, get("GET", "/"), &resp)
				if err == nil {
					_, err = io.ReadFull(resp.Body, buf[:5])
					if (g+i)%6 == 2 {
						cancel() // after the body, before Close
					}
					resp.Close()
				}
				cancel()
				var e *Error
				switch {
				case err == nil:
					okCount.Add(1)
				case errors.As(err, &e) && e.Kind == KindCanceled:
					canceled.Add(1)
				default:
					t.Errorf("exchange %d/%d: %v", g, i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	if n := over.Load(); n != 0 {
		t.Errorf("saw %d connections open, above MaxConns %d", n, maxConns)
	}
	s := p.Stats()
	if s.InUse != 0 || s.Waiting != 0 || s.Idle > maxIdle || s.Open != s.Idle {
		t.Errorf("final Stats = %+v, want nothing in use or waiting, at most %d idle", s, maxIdle)
	}
	// 200 are canceled before they start, 200 maybe during the exchange,
	// 800 never before Close.
	if okCount.Load() < 800 || canceled.Load() < 200 {
		t.Errorf("%d of 1200 exchanges succeeded, %d canceled: want at least 800 and 200", okCount.Load(), canceled.Load())
	}
	t.Logf("%d ok, %d canceled, %+v", okCount.Load(), canceled.Load(), s)
}
