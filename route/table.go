package route

import (
	"slices"

	"github.com/spillwayhq/spillway/request"
)

// Table maps requests to values of type T: Lookup returns the value of the
// first route, in insertion order, whose Match holds. The zero Table is
// empty and ready for Add. See the package documentation for the build,
// Freeze, then share discipline.
type Table[T any] struct {
	routes []entry[T]
	frozen bool
	// The index, built by Freeze; immutable afterwards. Each list holds
	// route indices in increasing order: every route whose host condition
	// may hold for the key.
	exact map[string][]int32 // exact host → its routes, covering wildcards, any-host routes
	wild  map[string][]int32 // wildcard suffix → its wildcards and shorter ones, any-host routes
	any   []int32            // any-host routes: hosts no exact name or wildcard covers
}

// entry is one route: its compiled match and its value.
type entry[T any] struct {
	m   *compiled
	val T
}

// Add appends a route matching m with value v. It returns a *MatchError
// (wrapping ErrInvalid) when m is malformed — a bad host pattern or regular
// expression, two of Path, Prefix and Regex, a bad method or header
// condition — and ErrFrozen after Freeze; the table is unchanged then.
func (t *Table[T]) Add(m Match, v T) error {
	if t.frozen {
		return ErrFrozen
	}
	c, err := compile(m)
	if err != nil {
		err.Route = len(t.routes)
		return err
	}
	t.routes = append(t.routes, entry[T]{m: c, val: v})
	return nil
}

// Len returns the number of routes.
func (t *Table[T]) Len() int { return len(t.routes) }

// Freeze builds the host index and makes the table read-only: from then on
// Add fails and Lookup may run from many goroutines at once. Calling it
// again does nothing. It costs O(routes + index entries) plus a sort of
// each host's list.
func (t *Table[T]) Freeze() {
	if t.frozen {
		return
	}
	t.frozen = true
	exactOf := map[string][]int32{}
	wildOf := map[string][]int32{}
	for i, r := range t.routes {
		if r.m.anyHost {
			t.any = append(t.any, int32(i))
		}
		for _, h := range r.m.exact {
			exactOf[h] = append(exactOf[h], int32(i))
		}
		for _, s := range r.m.wild {
			wildOf[s] = append(wildOf[s], int32(i))
		}
	}
	t.exact = make(map[string][]int32, len(exactOf))
	for h, own := range exactOf {
		t.exact[h] = t.merge(own, h, wildOf)
	}
	t.wild = make(map[string][]int32, len(wildOf))
	for s, own := range wildOf {
		t.wild[s] = t.merge(own, s, wildOf)
	}
}

// merge returns, in increasing order and without repeats, own (the routes
// written for key), the wildcard routes whose suffix is a proper label
// suffix of key, and the any-host routes. For an exact host those are the
// wildcards that cover it; for a wildcard suffix, the shorter wildcards
// that cover every host it covers ("*.com" for "*.example.com").
func (t *Table[T]) merge(own []int32, key string, wildOf map[string][]int32) []int32 {
	out := append([]int32(nil), own...)
	for i := 1; i < len(key); i++ {
		if key[i] == '.' {
			out = append(out, wildOf[key[i+1:]]...)
		}
	}
	out = append(out, t.any...)
	slices.Sort(out)
	return slices.Clip(slices.Compact(out))
}

// Lookup returns the value and index (the number of routes added before
// it) of the first route whose Match holds for v, and ok true; or the zero
// value, -1 and false when none does. It does not allocate.
func (t *Table[T]) Lookup(v *request.View) (val T, index int, ok bool) {
	if !t.frozen {
		return t.scan(v)
	}
	for _, i := range t.candidates(v.Host) {
		if r := &t.routes[i]; r.m.matchRest(v) {
			return r.val, int(i), true
		}
	}
	return val, -1, false
}

// candidates returns the routes whose host condition holds for host, in
// order: an exact name's list, else the list of the longest wildcard suffix
// that covers host, else the any-host routes.
func (t *Table[T]) candidates(host string) []int32 {
	if l, ok := t.exact[host]; ok {
		return l
	}
	if len(t.wild) > 0 {
		for i := 1; i < len(host); i++ {
			if host[i] == '.' {
				if l, ok := t.wild[host[i+1:]]; ok {
					return l
				}
			}
		}
	}
	return t.any
}

// scan is Lookup on a table that is not frozen: every route, in order.
func (t *Table[T]) scan(v *request.View) (val T, index int, ok bool) {
	for i := range t.routes {
		if r := &t.routes[i]; r.m.matchHost(v.Host) && r.m.matchRest(v) {
			return r.val, i, true
		}
	}
	return val, -1, false
}
