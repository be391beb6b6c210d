package overload

import (
	"net/netip"
	"testing"
)

// BenchmarkAdmitRelease is one admitted connection's whole path: Admit,
// SetIP, Release (one allocation: the Ticket's hold).
func BenchmarkAdmitRelease(b *testing.B) {
	g, err := New(Config{MaxConns: 1 << 20, HandshakeRate: 1e9})
	if err != nil {
		b.Fatal(err)
	}
	gt := g.Gate("b")
	gt.SetLimits(1<<20, 1<<20)
	ip := netip.MustParseAddr("192.0.2.7")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		tk, r := gt.Admit(float64(i)*1e-6, true)
		if r != ReasonNone || !tk.SetIP(ip) {
			b.Fatal(r)
		}
		tk.Release()
	}
}

// BenchmarkAdmitRefused is a refusal at the overall limit (a flood's
// excess): no allocation, no lock.
func BenchmarkAdmitRefused(b *testing.B) {
	g, err := New(Config{MaxConns: 1})
	if err != nil {
		b.Fatal(err)
	}
	gt := g.Gate("b")
	tk, _ := gt.Admit(0, false)
	defer tk.Release()
	b.ReportAllocs()
	for b.Loop() {
		if _, r := gt.Admit(0, false); r != ReasonMaxConns {
			b.Fatal(r)
		}
	}
}

func TestAdmitAllocations(t *testing.T) {
	if raceOn {
		t.Skip("allocation counts differ under the race detector")
	}
	g, _ := newGuard(t, Config{MaxConns: 1})
	gt := g.Gate("a")
	tk, _ := gt.Admit(0, false)
	defer tk.Release()
	if n := testing.AllocsPerRun(100, func() { gt.Admit(0, false) }); n != 0 {
		t.Errorf("a refusal allocates %v times, want 0", n)
	}
	tk.Release()
	ip := netip.MustParseAddr("192.0.2.7")
	if n := testing.AllocsPerRun(100, func() {
		tk, _ := gt.Admit(0, false)
		tk.SetIP(ip)
		tk.Release()
	}); n != 1 {
		t.Errorf("an admitted connection allocates %v times, want 1 (its Ticket)", n)
	}
}
