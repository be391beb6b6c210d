package balancerhttp

import (
	"io"
	"net/http"
	"testing"

	"github.com/spillwayhq/spillway/balancer"
)

// firstPicker always picks the first endpoint: a dead endpoint that keeps
// looking the emptiest, or one hash key's endpoint.
type firstPicker struct{}

func (firstPicker) Pick(*balancer.Snapshot, float64) (int, error) { return 0, nil }

// TestRetryReachesUntried: a retry whose every draw lands on an endpoint
// it tried already goes to an untried one (the least loaded), and only
// when it tried them all back to the picker's choice.
func TestRetryReachesUntried(t *testing.T) {
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	set := newSet(t, balancer.SetConfig{}, a, b, c)
	rt, err := New(Config{Set: set, Picker: firstPicker{}, Transport: inner(t)})
	if err != nil {
		t.Fatal(err)
	}
	first := get(t, rt, 200)
	ctx, tried := balancer.WithTried(t.Context())
	var seen []string
	for range 4 {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://svc.example/path", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen = append(seen, string(body))
	}
	if seen[0] != first || seen[1] == first || seen[2] == first || seen[1] == seen[2] || seen[3] != first {
		t.Fatalf("attempts went to %v (the picker's choice %s); want it, then the two others, then it again once all were tried", seen, first)
	}
	if tried.Len() != 3 {
		t.Fatalf("tried %d endpoints, want 3", tried.Len())
	}
}
