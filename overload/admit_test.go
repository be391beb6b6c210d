package overload

import (
	"net/netip"
	"sync"
	"testing"
)

// admit is one Admit call and its expected reason.
type admit struct {
	gate string
	now  float64
	tls  bool
	want Reason
}

// runAdmits runs steps, keeping the admitted tickets, which it returns.
func runAdmits(t *testing.T, g *Guard, steps []admit) []Ticket {
	t.Helper()
	var held []Ticket
	for i, s := range steps {
		tk, r := g.Gate(s.gate).Admit(s.now, s.tls)
		if r != s.want {
			t.Fatalf("step %d: Admit(%q, %v, tls %v) = %v, want %v", i, s.gate, s.now, s.tls, r, s.want)
		}
		if r == ReasonNone {
			held = append(held, tk)
		} else if tk != (Ticket{}) {
			t.Fatalf("step %d: a refusal returned a ticket", i)
		}
	}
	return held
}

func TestAdmitConnectionLimits(t *testing.T) {
	g, _ := newGuard(t, Config{MaxConns: 3})
	g.Gate("a").SetLimits(2, 0)
	held := runAdmits(t, g, []admit{
		{"a", 0, false, ReasonNone},
		{"a", 0, false, ReasonNone},
		{"a", 0, false, ReasonListenerMaxConns}, // a's 2
		{"b", 0, false, ReasonNone},             // b has no limit of its own
		{"b", 0, false, ReasonMaxConns},         // 3 over both
		{"a", 0, false, ReasonMaxConns},         // the overall limit is checked first
	})
	held[0].Release()
	held[0].Release() // idempotent: gives one place back, not two
	held = append(held, runAdmits(t, g, []admit{
		{"a", 1, false, ReasonNone},
		{"b", 1, false, ReasonMaxConns},
	})...)
	st := g.Stats()
	if st.Open != 3 || st.Admitted != 4 || st.Refused != [NumReasons]uint64{0, 3, 1, 0, 0, 0} {
		t.Errorf("Stats open %d admitted %d refused %v; want 3, 4, [0 3 1 0 0 0]", st.Open, st.Admitted, st.Refused)
	}
	if a := g.Gate("a").Stats(); a.Open != 2 || a.Admitted != 3 || a.Refused[ReasonListenerMaxConns] != 1 || a.Refused[ReasonMaxConns] != 1 || a.MaxConns != 2 {
		t.Errorf("gate a: %+v; want open 2, admitted 3, one refusal of each limit, MaxConns 2", a)
	}
	for _, tk := range held {
		tk.Release()
	}
	if st := g.Stats(); st.Open != 0 {
		t.Errorf("all released: Open %d", st.Open)
	}
}

func TestAdmitHandshakeRate(t *testing.T) {
	// Rate 2 per second, burst 2.
	g, _ := newGuard(t, Config{MaxConns: -1, HandshakeRate: 2})
	runAdmits(t, g, []admit{
		{"tls", 0, true, ReasonNone},
		{"tls", 0, true, ReasonNone},
		{"tls", 0, true, ReasonHandshakeRate},
		{"plain", 0, false, ReasonNone}, // no handshake, no token
		{"tls", 0.25, true, ReasonHandshakeRate},
		{"tls", 0.5, true, ReasonNone}, // one token back
		{"tls", 0.5, true, ReasonHandshakeRate},
		{"tls", 10, true, ReasonNone}, // full again: 2, no more
		{"tls", 10, true, ReasonNone},
		{"tls", 10, true, ReasonHandshakeRate},
	})
	if st := g.Stats(); st.Refused[ReasonHandshakeRate] != 4 || st.Open != 6 {
		t.Errorf("refused[handshake-rate] %d open %d, want 4 and 6 (refusals hold nothing)", st.Refused[ReasonHandshakeRate], st.Open)
	}
}

func TestAdmitHandshakeRateBelowOne(t *testing.T) {
	// Rate 0.5 per second: burst max(1, 0) = 1.
	g, _ := newGuard(t, Config{MaxConns: -1, HandshakeRate: 0.5})
	runAdmits(t, g, []admit{
		{"t", 0, true, ReasonNone},
		{"t", 0, true, ReasonHandshakeRate},
		{"t", 1, true, ReasonHandshakeRate}, // half a token
		{"t", 2, true, ReasonNone},
	})
}

func TestHandshakeTokenNotSpentOnRefusal(t *testing.T) {
	// A connection refused by a connection limit takes no token.
	g, _ := newGuard(t, Config{MaxConns: 1, HandshakeRate: 1})
	held := runAdmits(t, g, []admit{
		{"t", 0, true, ReasonNone},
		{"t", 0, true, ReasonMaxConns},
	})
	held[0].Release()
	runAdmits(t, g, []admit{
		{"t", 0, true, ReasonHandshakeRate}, // the one token was spent by the first
		{"t", 1, true, ReasonNone},
	})
}

func TestPerIP(t *testing.T) {
	g, _ := newGuard(t, Config{MaxConns: -1})
	gt := g.Gate("a")
	gt.SetLimits(0, 2)
	a := netip.MustParseAddr("192.0.2.1")
	mapped := netip.MustParseAddr("::ffff:192.0.2.1")
	b := netip.MustParseAddr("2001:db8::1")
	tks := make([]Ticket, 5)
	for i := range tks {
		var r Reason
		if tks[i], r = gt.Admit(0, false); r != ReasonNone {
			t.Fatal(r)
		}
	}
	for i, c := range []struct {
		ip   netip.Addr
		want bool
	}{{a, true}, {mapped, true}, {a, false}, {b, true}, {netip.Addr{}, true}} {
		if got := tks[i].SetIP(c.ip); got != c.want {
			t.Errorf("ticket %d: SetIP(%v) = %v, want %v", i, c.ip, got, c.want)
		}
	}
	if tks[2].SetIP(b) {
		t.Error("a second SetIP changed the first one's answer")
	}
	if st := gt.Stats(); st.IPs != 2 || st.Refused[ReasonPerIP] != 1 || st.Open != 5 {
		t.Errorf("gate: %+v; want 2 IPs, 1 per-IP refusal, 5 open (the refused one until released)", st)
	}
	tks[2].Release() // the refused one held no IP count
	tks[0].Release()
	if !admitIP(t, gt, a) {
		t.Error("after one of a's two was released, a third was refused")
	}
	tks[1].Release()
	tks[3].Release()
	tks[4].Release()
	if st := gt.Stats(); st.IPs != 1 || st.Open != 1 {
		t.Errorf("after releases: %d IPs, %d open; want 1 and 1 (the map keeps only open addresses)", st.IPs, st.Open)
	}
	if tks[0].SetIP(b) {
		t.Error("SetIP after Release admitted")
	}
	var zero Ticket
	zero.Release()
	if zero.SetIP(a) {
		t.Error("zero Ticket SetIP = true")
	}
}

// admitIP admits one connection of ip on gt and keeps it open until the
// test ends.
func admitIP(t *testing.T, gt *Gate, ip netip.Addr) bool {
	t.Helper()
	tk, r := gt.Admit(0, false)
	if r != ReasonNone {
		t.Fatal(r)
	}
	t.Cleanup(tk.Release)
	return tk.SetIP(ip)
}

func TestGateKeptByName(t *testing.T) {
	g, _ := newGuard(t, Config{})
	a := g.Gate("a")
	tk, _ := a.Admit(0, false)
	if g.Gate("a") != a || g.Gate("a").Stats().Open != 1 {
		t.Fatal("Gate(a) is not the same Gate on a second call")
	}
	g.RemoveGate("a")
	if g.Gate("a") == a {
		t.Fatal("RemoveGate kept the Gate")
	}
	tk.Release() // counted by the Gate it came from
	if a.Stats().Open != 0 || g.Stats().Open != 0 {
		t.Errorf("after release: old gate open %d, guard open %d", a.Stats().Open, g.Stats().Open)
	}
}

// TestConcurrentAdmitRelease admits and releases from many goroutines over
// a few IPs, under limits the goroutines exceed: every count must come back
// to zero and never pass its limit. Run it with -race.
func TestConcurrentAdmitRelease(t *testing.T) {
	const workers, rounds, maxConns, perIP = 16, 2000, 10, 3
	g, _ := newGuard(t, Config{MaxConns: maxConns, HandshakeRate: 1e6})
	gates := []*Gate{g.Gate("x"), g.Gate("y")}
	gates[0].SetLimits(6, perIP)
	gates[1].SetLimits(0, perIP)
	ips := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted uint64
		refused  [NumReasons]uint64
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine [NumReasons]uint64
			var ok uint64
			for i := range rounds {
				gt := gates[(w+i)%2]
				tk, r := gt.Admit(float64(i), i%3 == 0)
				mine[r]++
				if r != ReasonNone {
					continue
				}
				ok++
				if o := g.open.Load(); o > maxConns {
					t.Errorf("open %d > MaxConns %d", o, maxConns)
				}
				if !tk.SetIP(ips[i%2]) {
					mine[ReasonPerIP]++
				}
				tk.Release()
				tk.Release()
			}
			mu.Lock()
			admitted += ok
			for r := range mine {
				refused[r] += mine[r]
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	st := g.Stats()
	if st.Open != 0 || st.Admitted != admitted {
		t.Errorf("after the storm: open %d admitted %d; want 0 and %d", st.Open, st.Admitted, admitted)
	}
	if admitted+refused[ReasonMaxConns]+refused[ReasonListenerMaxConns]+refused[ReasonHandshakeRate] != workers*rounds {
		t.Errorf("admitted %d + refused %v ≠ %d calls", admitted, refused, workers*rounds)
	}
	for _, r := range []Reason{ReasonMaxConns, ReasonListenerMaxConns, ReasonPerIP, ReasonHandshakeRate} {
		if st.Refused[r] != refused[r] {
			t.Errorf("Stats.Refused[%v] = %d, callers saw %d", r, st.Refused[r], refused[r])
		}
	}
	for _, gt := range gates {
		if s := gt.Stats(); s.Open != 0 || s.IPs != 0 {
			t.Errorf("gate %s after the storm: open %d, %d IPs; want 0 and 0", gt.Name(), s.Open, s.IPs)
		}
	}
}

func TestPerIPMapDroppedAfterFlood(t *testing.T) {
	g, _ := newGuard(t, Config{MaxConns: -1})
	gt := g.Gate("a")
	const n = 8000 // about 500 addresses per shard, above shrinkPeak
	tks := make([]Ticket, n)
	for i := range tks {
		tks[i], _ = gt.Admit(0, false)
		ip := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		if !tks[i].SetIP(ip) {
			t.Fatal("refused without a per-IP limit")
		}
	}
	if s := gt.Stats(); s.IPs != n {
		t.Fatalf("%d IPs tracked, want %d", s.IPs, n)
	}
	for _, tk := range tks {
		tk.Release()
	}
	for i := range gt.ips {
		if sh := &gt.ips[i]; sh.n != nil {
			t.Errorf("shard %d kept its map (%d entries, peak %d) after every address left", i, len(sh.n), sh.peak)
		}
	}
}

func TestSetConfig(t *testing.T) {
	g, _ := newGuard(t, Config{MaxConns: 1, HandshakeRate: 1, GoroutinesSoft: 10})
	held := runAdmits(t, g, []admit{
		{"a", 0, true, ReasonNone}, // spends the one token
		{"a", 0, false, ReasonMaxConns},
	})
	if g.Sample(0, 0, 10) != KeepAliveOff {
		t.Fatal("goroutines at soft: not keepalive-off")
	}
	if err := g.SetConfig(Config{MaxConns: 3, HandshakeRate: 1, GoroutinesSoft: 20, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	held = append(held, runAdmits(t, g, []admit{
		{"a", 0, false, ReasonNone},         // room for 3 now
		{"a", 0, true, ReasonHandshakeRate}, // same rate: the bucket carried over, still empty
	})...)
	if g.Sample(1, 0, 10) != Normal { // 10 < 18, 90% of the new soft 20
		t.Error("under the new threshold: not normal")
	}
	if err := g.SetConfig(Config{MaxConns: 3, HandshakeRate: 2, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	held = append(held, runAdmits(t, g, []admit{
		{"a", 0, true, ReasonNone}, // a new rate: a new, full bucket of 2
		{"a", 0, true, ReasonMaxConns},
	})...)
	if err := g.SetConfig(Config{MaxConns: 3, HandshakeRate: -1}); err == nil {
		t.Error("SetConfig took a negative rate")
	}
	if g.MaxConns() != 3 {
		t.Errorf("after a refused SetConfig MaxConns() = %d, want the old 3", g.MaxConns())
	}
	for _, tk := range held {
		tk.Release()
	}
}
