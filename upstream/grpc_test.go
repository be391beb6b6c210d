package upstream

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestH2CToGRPCServer sends one unary gRPC call (health Check) through the
// h2c transport to grpc-go's own server and reads the answer and the
// grpc-status trailer.
func TestH2CToGRPCServer(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := grpchealth.NewServer()
	hs.SetServingStatus("echo", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	defer gs.Stop()
	rt := NewH2Transport(Config{}, true)
	defer closeIdle(rt)

	// HealthCheckRequest{service: "echo"} by hand: field 1, length 4.
	msg := []byte{0x0a, 4, 'e', 'c', 'h', 'o'}
	frame := make([]byte, 5, 5+len(msg)) // uncompressed, 4-byte length
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	frame = append(frame, msg...)
	req, err := http.NewRequest("POST", "http://"+ln.Addr().String()+"/grpc.health.v1.Health/Check", bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
		t.Fatalf("grpc-status trailer %q (message %q), want \"0\"", got, resp.Trailer.Get("Grpc-Message"))
	}
	// One uncompressed frame of HealthCheckResponse{status: SERVING}: field
	// 1, varint 1.
	if want := []byte{0, 0, 0, 0, 2, 0x08, 1}; !bytes.Equal(body, want) {
		t.Errorf("response body %x, want %x", body, want)
	}
}
