package httplimit

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The path is cleaned (and a View's decoded) only when a rule asks for it,
// but every rule that asks sees the same cleaned path: a path key part, a
// path pattern after rules that name none, and a shadow rule's log.
func TestPathCleanedWhenAsked(t *testing.T) {
	const src = `rules:
- {id: by-ip, key: [ip], rate: 100, per: 1s}
- {id: by-path, key: [path], rate: 100, per: 1s, match: {methods: [GET]}}
- {id: login, key: [ip], rate: 100, per: 1s, match: {paths: [/login]}}
- {id: shadow, key: [ip], rate: 1, per: 1h, burst: 1, shadow: true}
`
	for _, engine := range []string{"Check", "Handler"} {
		byPath, login := &fakeStore{}, &fakeStore{}
		var log bytes.Buffer
		l, clk := newLimiter(t, src, Config{Store: fakes(map[string]ratelimit.Keyed{"by-path": byPath, "login": login}),
			Logger: slog.New(slog.NewTextHandler(&log, nil)), LogsPerSecond: 100})
		for _, target := range []string{"/a/../l%6Fgin", "/x/../login"} {
			if engine == "Check" {
				var v Verdict
				l.Check(context.Background(), clk.Now(), view("GET", target, "192.0.2.1:1", false, nil), "", &v)
				if !v.Allowed {
					t.Fatalf("%s %s: refused %d", engine, target, v.Status)
				}
				continue
			}
			r := httptest.NewRequest("GET", target, nil)
			r.RemoteAddr = "192.0.2.1:1"
			if w := serve(l.Handler(&hello{}), r); w.Code != 200 {
				t.Fatalf("%s %s: status %d", engine, target, w.Code)
			}
		}
		for name, f := range map[string]*fakeStore{"by-path": byPath, "login": login} {
			var keys []string
			for _, c := range f.seen() {
				keys = append(keys, c.key)
			}
			want := []string{"/login", "/login"}
			if name == "login" {
				want = []string{"192.0.2.1", "192.0.2.1"}
			}
			if !slices.Equal(keys, want) {
				t.Errorf("%s: rule %s decided keys %q, want %q", engine, name, keys, want)
			}
		}
		if !strings.Contains(log.String(), "path=/login") {
			t.Errorf("%s: the shadow rule's log names no cleaned path:\n%s", engine, &log)
		}
	}
}

// fakeJoint decides its stores' items together, allowing them, and
// records the keys of each AllowJoint.
type fakeJoint struct {
	mu    sync.Mutex
	calls [][]string
}

func (j *fakeJoint) AllowJoint(_ context.Context, _ float64, items []ratelimit.JointItem) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var keys []string
	for i := range items {
		keys = append(keys, items[i].Key)
		items[i].Decision = ratelimit.Decision{Allowed: true, Remaining: 7}
	}
	j.calls = append(j.calls, keys)
}

// jointStore is a fakeStore whose requests j decides.
type jointStore struct {
	fakeStore
	j ratelimit.Joint
}

func (s *jointStore) Joint() ratelimit.Joint { return s.j }

// Rules whose stores share a Joint are decided in one AllowJoint when the
// walk reaches the first of them; another store's rule between them, and
// a store of another Joint, by their own calls.
func TestJointRulesDecidedTogether(t *testing.T) {
	j, other := &fakeJoint{}, &fakeJoint{}
	a, c := &jointStore{j: j}, &jointStore{j: j}
	b, d := &fakeStore{}, &jointStore{j: other}
	l, clk := newLimiter(t, `rules:
- {id: a, key: [ip], rate: 100, per: 1s}
- {id: b, key: [method], rate: 100, per: 1s}
- {id: c, key: [path], rate: 100, per: 1s}
- {id: d, key: [ip], rate: 100, per: 1s}
`, Config{Store: fakes(map[string]ratelimit.Keyed{"a": a, "b": b, "c": c, "d": d})})
	var v Verdict
	l.Check(context.Background(), clk.Now(), view("GET", "/p", "192.0.2.1:1", false, nil), "", &v)
	if !v.Allowed {
		t.Fatalf("refused: %d %s", v.Status, v.Reason)
	}
	if want := [][]string{{"192.0.2.1", "/p"}}; !slices.EqualFunc(j.calls, want, slices.Equal) {
		t.Errorf("joint calls %q, want %q", j.calls, want)
	}
	if len(other.calls) != 0 || len(d.seen()) != 1 {
		t.Errorf("the lone store of another Joint: joint calls %q, %d AllowN; want none, 1", other.calls, len(d.seen()))
	}
	if n, na, nc := len(b.seen()), len(a.seen()), len(c.seen()); n != 1 || na != 0 || nc != 0 {
		t.Errorf("AllowN calls: b %d, a %d, c %d; want 1, 0, 0", n, na, nc)
	}
}
