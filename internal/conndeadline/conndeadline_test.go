package conndeadline

import (
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// recConn records the deadlines set on it.
type recConn struct {
	net.Conn
	r, w       time.Time
	sets       int
	rSet, wSet bool
}

func (c *recConn) SetReadDeadline(t time.Time) error {
	c.r, c.sets, c.rSet = t, c.sets+1, true
	return nil
}

func (c *recConn) SetWriteDeadline(t time.Time) error {
	c.w, c.sets, c.wSet = t, c.sets+1, true
	return nil
}

func (c *recConn) SetDeadline(t time.Time) error {
	c.r, c.w, c.sets = t, t, c.sets+1
	return nil
}

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func TestArmSkipsWithinSlack(t *testing.T) {
	var d Conn
	nc := &recConn{}
	const bound = 8 * time.Second // slack 250ms (an eighth is 1s)
	d.ArmWrite(nc, t0, bound)
	if nc.sets != 1 || !nc.w.Equal(t0.Add(bound+MaxSlack)) {
		t.Fatalf("first arm: %d sets, deadline %v, want 1 at +8.25s", nc.sets, nc.w.Sub(t0))
	}
	// Renewals within the slack keep the armed deadline.
	for _, at := range []time.Duration{0, time.Millisecond, 100 * time.Millisecond, MaxSlack} {
		d.ArmWrite(nc, t0.Add(at), bound)
	}
	if nc.sets != 1 {
		t.Fatalf("renewals within the slack set %d deadlines, want none", nc.sets-1)
	}
	d.ArmWrite(nc, t0.Add(MaxSlack+time.Nanosecond), bound)
	if nc.sets != 2 || !nc.w.Equal(t0.Add(MaxSlack+time.Nanosecond+bound+MaxSlack)) {
		t.Fatalf("past the slack: %d sets, deadline %v", nc.sets, nc.w.Sub(t0))
	}
	if nc.rSet {
		t.Fatal("ArmWrite set the read deadline")
	}
}

func TestSlack(t *testing.T) {
	for _, c := range []struct{ d, want time.Duration }{
		{50 * time.Millisecond, 6250 * time.Microsecond},
		{2 * time.Second, 250 * time.Millisecond},
		{time.Minute, 250 * time.Millisecond},
		{8, 1},
		{7, 0},
	} {
		if got := Slack(c.d); got != c.want {
			t.Errorf("Slack(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}

// TestNeverEarlyNeverLate drives random renewals of random bounds and
// checks after each that the connection's deadline lies in [now+d,
// now+d+Slack(d)] (none for d = 0), the package's promise.
func TestNeverEarlyNeverLate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bounds := []time.Duration{50 * time.Millisecond, time.Second, 10 * time.Second, 0}
	var d Conn
	nc := &recConn{}
	now := t0
	skipped := 0
	const steps = 100000
	for i := range steps {
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Microsecond)
		b := bounds[0]
		if rng.IntN(20) == 0 {
			b = bounds[rng.IntN(len(bounds))]
		}
		before := nc.sets
		got := &nc.w
		if rng.IntN(2) == 0 {
			d.ArmRead(nc, now, b)
			got = &nc.r
		} else {
			d.ArmWrite(nc, now, b)
		}
		if nc.sets == before {
			skipped++
		}
		switch {
		case b == 0 && !got.IsZero():
			t.Fatalf("step %d: no bound asked, deadline %v armed", i, got.Sub(now))
		case b > 0 && (got.Before(now.Add(b)) || got.After(now.Add(b+Slack(b)))):
			t.Fatalf("step %d: bound %v armed at %v from now", i, b, got.Sub(now))
		}
	}
	if skipped < steps/2 {
		t.Errorf("only %d of %d renewals skipped", skipped, steps)
	}
}

func TestSetAndClear(t *testing.T) {
	var d Conn
	nc := &recConn{}
	d.Clear(nc)
	d.SetRead(nc, time.Time{})
	if nc.sets != 0 {
		t.Fatalf("clearing what was never armed set %d deadlines", nc.sets)
	}
	at := t0.Add(time.Minute)
	d.SetRead(nc, at)
	d.SetRead(nc, at)
	if nc.sets != 1 || !nc.r.Equal(at) {
		t.Fatalf("SetRead twice: %d sets, read deadline %v", nc.sets, nc.r)
	}
	d.ArmWrite(nc, t0, time.Second)
	d.Clear(nc)
	if nc.sets != 3 || !nc.r.IsZero() || !nc.w.IsZero() {
		t.Fatalf("Clear: %d sets, deadlines %v %v, want 3 and none", nc.sets, nc.r, nc.w)
	}
	d.Clear(nc)
	if nc.sets != 3 {
		t.Fatal("a second Clear set a deadline")
	}
	if !d.ReadArmed().IsZero() {
		t.Fatalf("ReadArmed %v after Clear", d.ReadArmed())
	}
}

// TestForget: after a deadline set behind the tracker's back, the next
// call of each kind reaches the connection, even one that asks for what
// the tracker last armed.
func TestForget(t *testing.T) {
	var d Conn
	nc := &recConn{}
	d.ArmRead(nc, t0, time.Second)
	_ = nc.SetReadDeadline(time.Unix(1, 0)) // behind its back
	d.Forget()
	n := nc.sets
	d.ArmRead(nc, t0, time.Second)
	if nc.sets != n+1 || !nc.r.Equal(t0.Add(time.Second+Slack(time.Second))) {
		t.Fatalf("ArmRead after Forget: %d sets, deadline %v", nc.sets-n, nc.r)
	}
	d.Forget()
	d.Clear(nc)
	if !nc.r.IsZero() || !nc.w.IsZero() {
		t.Fatal("Clear after Forget left a deadline")
	}
	d.Reset()
	n = nc.sets
	d.Clear(nc)
	if nc.sets != n {
		t.Fatal("Clear after Reset set a deadline")
	}
}
