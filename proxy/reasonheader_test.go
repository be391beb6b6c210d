package proxy

import (
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/chain"
)

// TestReasonFieldOmitted: a pre-built problem and a chain refusal are
// written with or without Spillway-Reason, everything else the same, and
// neither variant allocates once the buffer has room.
func TestReasonFieldOmitted(t *testing.T) {
	p := NewProblem(404, "no-route", "none", "")
	body := `{"type":"about:blank","title":"Not Found","status":404,"detail":"none","reason":"no-route"}` + "\n"
	fixed := "HTTP/1.1 404 Not Found\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
	length := "Content-Length: 92\r\n\r\n"
	if got := string(p.appendH1(nil, true, false, true)); got != fixed+"Spillway-Reason: no-route\r\n"+length+body {
		t.Errorf("with the reason:\n%q", got)
	}
	if got := string(p.appendH1(nil, true, false, false)); got != fixed+length+body {
		t.Errorf("without the reason:\n%q", got)
	}
	ref := &chain.Refusal{Status: 429, Reason: "ratelimit:r", Body: []byte("{}\n")}
	with := string(appendRefusal(nil, ref, &chain.Pass{}, false, false, true))
	without := string(appendRefusal(nil, ref, &chain.Pass{}, false, false, false))
	if !strings.Contains(with, "\r\nSpillway-Reason: ratelimit:r\r\n") || strings.Contains(without, "Spillway-Reason") ||
		strings.Replace(with, "Spillway-Reason: ratelimit:r\r\n", "", 1) != without {
		t.Errorf("refusal with the reason:\n%q\nwithout:\n%q", with, without)
	}
	if raceOn {
		return
	}
	buf := make([]byte, 0, 4096)
	pass := &chain.Pass{}
	for _, reason := range []bool{true, false} {
		n := testing.AllocsPerRun(100, func() {
			buf = p.appendH1(buf[:0], false, false, reason)
			buf = appendRefusal(buf[:0], ref, pass, true, false, reason)
		})
		if n != 0 {
			t.Errorf("reason %v: %.1f allocations, want 0", reason, n)
		}
	}
}
