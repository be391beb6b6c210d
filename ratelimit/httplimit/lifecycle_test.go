package httplimit

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/ratelimit"
	"github.com/spillwayhq/spillway/ratelimit/rules"
)

// closer is a store that counts its Close calls.
type closer struct {
	name string
	mu   sync.Mutex
	n    int
}

func (c *closer) AllowN(context.Context, string, float64, int) (ratelimit.Decision, error) {
	return ratelimit.Decision{Allowed: true, Remaining: 1}, nil
}

func (c *closer) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return nil
}

func (c *closer) closes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// closers is a Store factory that makes a closer per call, remembering
// them by rule id (the latest last).
type closers struct {
	mu   sync.Mutex
	made map[string][]*closer
	fail string // rule id whose store cannot be made
}

func (f *closers) store(r rules.Rule) (ratelimit.Keyed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.ID == f.fail {
		return nil, errDown
	}
	if f.made == nil {
		f.made = map[string][]*closer{}
	}
	c := &closer{name: r.ID}
	f.made[r.ID] = append(f.made[r.ID], c)
	return c, nil
}

func (f *closers) get(id string, i int) *closer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.made[id][i]
}

// waitClosed polls (at most 10 s: RetireAfter is a real timer, late on a
// loaded machine) until c has been closed once.
func waitClosed(t *testing.T, c *closer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.closes() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("store of %s not closed", c.name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Update keeps the store of a rule whose id, spec and fail mode are the
// same, replaces the others and closes the replaced and removed ones
// RetireAfter later; Close closes the rest, each store exactly once.
func TestRetireReplacedStores(t *testing.T) {
	checkGoroutines(t)
	f := &closers{}
	l, _ := newLimiter(t, `rules:
- {id: keep, key: [ip], rate: 1, per: 1h}
- {id: respec, key: [ip], rate: 1, per: 1h}
- {id: mode, key: [ip], rate: 1, per: 1h}
- {id: gone, key: [ip], rate: 1, per: 1h}
`, Config{Store: f.store, RetireAfter: 0.02})
	err := l.Update(mustRules(t, `rules:
- {id: keep, key: [ip], rate: 1, per: 1h}
- {id: respec, key: [ip], rate: 2, per: 1h}
- {id: mode, key: [ip], rate: 1, per: 1h, failMode: closed}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"respec", "mode", "gone"} {
		waitClosed(t, f.get(id, 0))
	}
	if n := f.get("keep", 0).closes(); n != 0 {
		t.Errorf("the kept store was closed %d times", n)
	}
	if len(f.made["keep"]) != 1 || len(f.made["respec"]) != 2 || len(f.made["mode"]) != 2 {
		t.Errorf("stores made: keep %d, respec %d, mode %d; want 1, 2, 2", len(f.made["keep"]), len(f.made["respec"]), len(f.made["mode"]))
	}
	for _, id := range []string{"respec", "mode"} {
		if n := f.get(id, 1).closes(); n != 0 {
			t.Errorf("the new store of %s was closed %d times", id, n)
		}
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*closer{f.get("keep", 0), f.get("respec", 0), f.get("respec", 1), f.get("mode", 0), f.get("mode", 1), f.get("gone", 0)} {
		if n := c.closes(); n != 1 {
			t.Errorf("a store of %s closed %d times, want once", c.name, n)
		}
	}
	if err := l.Update(mustRules(t, "rules: []\n")); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v", err)
	}
}

// A store waiting for retirement is closed by Close (its timer stopped),
// once; one shared by two rules is closed only when neither uses it.
func TestRetireOnCloseAndShared(t *testing.T) {
	checkGoroutines(t)
	shared := &closer{name: "shared"}
	f := &closers{}
	store := func(r rules.Rule) (ratelimit.Keyed, error) {
		if r.ID == "a" || r.ID == "b" {
			return shared, nil
		}
		return f.store(r)
	}
	l, _ := newLimiter(t, `rules:
- {id: a, key: [ip], rate: 1, per: 1h}
- {id: b, key: [ip], rate: 1, per: 1h}
- {id: c, key: [ip], rate: 1, per: 1h}
`, Config{Store: store, RetireAfter: 3600})
	if err := l.Update(mustRules(t, "rules:\n- {id: a, key: [ip], rate: 1, per: 1h}\n")); err != nil {
		t.Fatal(err)
	}
	if shared.closes() != 0 || f.get("c", 0).closes() != 0 {
		t.Fatalf("closed before RetireAfter: shared %d, c %d", shared.closes(), f.get("c", 0).closes())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if shared.closes() != 1 || f.get("c", 0).closes() != 1 {
		t.Errorf("after Close: shared closed %d times, c %d; want 1, 1", shared.closes(), f.get("c", 0).closes())
	}
}

// An Update that fails closes the stores it made, and keeps the old rules
// and their stores.
func TestFailedUpdateClosesNewStores(t *testing.T) {
	f := &closers{fail: "bad"}
	l, _ := newLimiter(t, "rules:\n- {id: old, key: [ip], rate: 1, per: 1h}\n", Config{Store: f.store})
	err := l.Update(mustRules(t, "rules:\n- {id: fresh, key: [ip], rate: 1, per: 1h}\n- {id: bad, key: [ip], rate: 1, per: 1h}\n"))
	if !errors.Is(err, errDown) {
		t.Fatalf("Update: %v", err)
	}
	if n := f.get("fresh", 0).closes(); n != 1 {
		t.Errorf("the store made for the failed update closed %d times", n)
	}
	if n := f.get("old", 0).closes(); n != 0 {
		t.Errorf("the old rule's store closed %d times", n)
	}
	if w := serve(l.Handler(&hello{}), get("/")); w.Code != 200 || w.Header().Get("RateLimit") != `"old";r=1;t=0` {
		t.Errorf("old rules not in force: %d %v", w.Code, w.Header())
	}
	if err := l.Close(); err != nil || f.get("old", 0).closes() != 1 {
		t.Errorf("Close: %v, old closed %d times", err, f.get("old", 0).closes())
	}
}

func TestRetireAfterInvalid(t *testing.T) {
	for _, v := range []float64{-1, math.Inf(1), math.NaN()} {
		if _, err := New(mustRules(t, "rules: []\n"), Config{RetireAfter: v}); !errors.Is(err, ErrConfig) {
			t.Errorf("RetireAfter %v: %v", v, err)
		}
	}
}
