package certstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/filewatch"
)

// TestWatchedRotation wires filewatch to Reload, as the gateway does: a
// certificate rotated on disk is served without anyone calling Reload.
func TestWatchedRotation(t *testing.T) {
	checkLeaks(t)
	ca := newCA(t)
	c1, k1 := ca.leaf(t, 1, "a.test")
	f := newFiles(t, c1, k1)
	s, logs := fromFiles(t, f)
	addr := serve(t, s.TLSConfig())

	w, err := filewatch.New(s.Files(), filewatch.Options{Debounce: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reloads := make(chan error, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx, func([]string) {
			select {
			case reloads <- s.Reload():
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })

	old, _ := dial(t, addr, "a.test", ca.pool)
	c2, k2 := ca.leaf(t, 2, "a.test")
	writeFile(t, f.key, k2) // two steps: a watch may see the key alone first
	writeFile(t, f.cert, c2)
	for ok := false; !ok; {
		select {
		case err := <-reloads:
			ok = err == nil // a failure is the half-written rotation
		case <-time.After(guard):
			t.Fatalf("the rotation was not reloaded within %v", guard)
		}
	}
	if _, serial := dial(t, addr, "a.test", ca.pool); serial != 2 {
		t.Fatalf("after the watched rotation: serial %d, want 2", serial)
	}
	echo(t, old, "still here")
	if n := len(logs.lines(t, msgReloaded)); n != 1 {
		t.Fatalf("%d reload log lines, want 1", n)
	}
}
