package health

import "testing"

func benchDetector(b *testing.B, n int) (*Detector, []string) {
	d, err := NewDetector(OutlierConfig{})
	if err != nil {
		b.Fatal(err)
	}
	hosts := hostNames(n)
	d.SetHosts(hosts)
	return d, hosts
}

// The request path: one Record per finished request, mostly successes.
func BenchmarkDetectorRecord(b *testing.B) {
	d, hosts := benchDetector(b, 1000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := Success
		if i&3 == 3 {
			r = ServerError // runs of one: never ejects
		}
		d.Record(1, hosts[i%len(hosts)], r)
		i++
	}
}

func BenchmarkDetectorRecordParallel(b *testing.B) {
	d, hosts := benchDetector(b, 1000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			d.Record(1, hosts[i%len(hosts)], Success)
			i += 7
		}
	})
}

// Tick with nothing due is O(1).
func BenchmarkDetectorTickIdle(b *testing.B) {
	d, _ := benchDetector(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		d.Tick(1)
	}
}

func BenchmarkTrackerRecord(b *testing.B) {
	tr, err := NewTracker(0, ActiveConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tr.Record(float64(i), i%5 != 0)
		i++
	}
}
