package balancerhttp

import (
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/spillwayhq/spillway/balancer"
	"github.com/spillwayhq/spillway/clock"
	"github.com/spillwayhq/spillway/health"
)

// cannedRT answers every request with the same response object and a body
// that is at its end at once: it allocates nothing, so a benchmark through
// it measures the balancing Transport alone. Not safe for concurrent use.
type cannedRT struct {
	resp http.Response
	body eofBody
}

type eofBody struct{}

func (eofBody) Read([]byte) (int, error) { return 0, io.EOF }
func (eofBody) Close() error             { return nil }

func (c *cannedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.resp = http.Response{StatusCode: 200, Body: c.body, Request: r}
	return &c.resp, nil
}

func benchSet(b *testing.B, n int, cfg balancer.SetConfig) *balancer.Set {
	set, err := balancer.NewSet(cfg)
	if err != nil {
		b.Fatal(err)
	}
	eps := make([]balancer.Endpoint, n)
	for i, a := range benchAddrs(n) {
		eps[i] = balancer.Endpoint{Addr: a}
	}
	set.Update(0, eps)
	return set
}

func benchAddrs(n int) []string {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = "10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250) + ":8080"
	}
	return addrs
}

func benchDetector(b *testing.B, n int) *health.Detector {
	d, err := health.NewDetector(health.OutlierConfig{})
	if err != nil {
		b.Fatal(err)
	}
	d.SetHosts(benchAddrs(n))
	return d
}

// BenchmarkRoundTrip measures RoundTrip's overhead over an inner transport
// that costs nothing: pick, Start, the request copy, Done at Close.
func BenchmarkRoundTrip(b *testing.B) {
	maglev := &balancer.MaglevConfig{}
	for _, n := range []int{10, 1000} {
		for _, mode := range []string{"p2c", "maglev", "p2c+outlier"} {
			b.Run(mode+"/n="+strconv.Itoa(n), func(b *testing.B) {
				cfg := Config{Transport: &cannedRT{}, Clock: clock.NewReal()}
				setCfg := balancer.SetConfig{}
				switch mode {
				case "maglev":
					cfg.Hash = &balancer.HashPolicy{Header: "X-User"}
					cfg.Table = maglev
					setCfg.Tables = []balancer.TableBuilder{maglev}
				case "p2c+outlier":
					cfg.Outlier = benchDetector(b, n)
				}
				cfg.Set = benchSet(b, n, setCfg)
				rt, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				req, _ := http.NewRequest("GET", "http://svc.example/x", nil)
				req.Header.Set("X-User", "alice")
				b.ReportAllocs()
				for b.Loop() {
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
				}
			})
		}
	}
}
