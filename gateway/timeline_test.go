package gateway

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/timeline"
)

// TestTimelineFills: under 50 requests a second, the dashboard's data
// (GET /dashboard/data) fills once a second with the route's requests,
// goodput and latency and the cluster's admission, and shows an endpoint
// drained through the admin API as draining; since gives only newer
// points.
func TestTimelineFills(t *testing.T) {
	noLeaks(t)
	a, b := newBackend(t, "a"), newBackend(t, "b")
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, appConfig("round_robin", "127.0.0.1:0", "    admission: {algorithm: fixed, initial_limit: 64}\n", a, b))
	g := startFile(t, file)
	load := startLoad("http://"+g.Addr("web")+"/x", 50, nil, h1Client(t))
	stopped := false
	defer func() {
		if !stopped {
			load.Stop()
		}
	}()
	var d timeline.Data
	read := func(since int64) {
		body := adminCheck(t, g, "GET", "/dashboard/data?since="+strconv.FormatInt(since, 10), nil, 200)
		d = timeline.Data{}
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			t.Fatalf("data: %v\n%s", err, body)
		}
	}
	full := func() bool {
		read(0)
		if len(d.Routes) != 1 || len(d.Clusters) != 1 || len(d.T) < 3 {
			return false
		}
		r, c, n := d.Routes[0], d.Clusters[0], len(d.T)-1
		return r.Offered[n] >= 20 && r.Goodput[n] >= 20 && r.P99[n] > 0 && c.Limit[n] == 64 && len(c.Endpoints) == 2
	}
	eventually(t, 15*time.Second, "the timeline to fill", full)
	if r := d.Routes[0]; r.Name != "main" || r.Cluster != "app" || d.StepMS != 1000 || !d.Metrics {
		t.Errorf("route %s of %s, step %d ms, metrics %v", r.Name, r.Cluster, d.StepMS, d.Metrics)
	}
	adminCheck(t, g, "POST", "/clusters/app/endpoints/"+b.addr+"/drain", http.Header{"X-Spillway-Admin": {"1"}}, 200)
	last := d.Now
	eventually(t, 5*time.Second, "the drained endpoint in the timeline", func() bool {
		read(last)
		for _, e := range d.Clusters[0].Endpoints {
			if e.Address == b.addr && e.State == "draining" {
				return true
			}
		}
		return false
	})
	if len(d.T) == 0 || d.T[0] <= last || len(d.T) > 6 {
		t.Errorf("since %d: %d points from %v, want 1 to 6 newer ones", last, len(d.T), d.T)
	}
	load.Stop()
	stopped = true
	load.verify(t, 100)
}
