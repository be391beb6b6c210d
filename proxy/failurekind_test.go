package proxy

import (
	"errors"
	"net"
	"testing"

	"github.com/spillwayhq/spillway/upstream"
)

// An HTTP/2 transport's errors map onto the upstream kinds: a failed dial
// and a TLS alert from the endpoint (TLS 1.3 refuses a client certificate
// after the client's side of the handshake) are refusals, the rest resets.
func TestFailureKindOfTransportErrors(t *testing.T) {
	alert := &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}
	dial := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}
	for _, tc := range []struct {
		err  error
		want upstream.Kind
	}{{alert, upstream.KindRefused}, {dial, upstream.KindRefused}, {read, upstream.KindReset}} {
		if k, ok := failureKind(tc.err, false); !ok || k != tc.want {
			t.Errorf("%v: kind %v (%v), want %v", tc.err, k, ok, tc.want)
		}
	}
	cl := &Cluster{Name: "app"}
	cl.Init()
	if p := cl.problemFor(alert); p != cl.refused {
		t.Errorf("problemFor(a TLS alert) = %q, want the refusal", p.Reason)
	}
}
