package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/upstream"
)

// memNow returns the live heap and the goroutine stacks in use, after
// two collections (the second empties sync.Pool's victim cache, so
// pooled buffers no connection holds are not counted).
func memNow() (heap, stacks uint64) {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

// TestIdleConnMemory: 2,000 kept-alive HTTP/1.1 connections, idle after
// one request each, cost the process less than 16 KiB of heap each, both
// ends of the loopback connection included (the read buffer alone was
// 32.5 KiB and the write buffer 8 KiB per connection when idle
// connections held them).
func TestIdleConnMemory(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's shadow memory is not the program's")
	}
	noLeaks(t)
	be := cannedBackend(t)
	rt := &Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}
	addr, s := startProxy(t, Config{}, one(rt))
	const n = 2000
	req := []byte("GET / HTTP/1.1\r\nHost: idle\r\n\r\n")
	br := bufio.NewReaderSize(nil, 512) // shared: the client's side holds no buffer per connection
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	heap0, stack0 := memNow()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		br.Reset(c)
		if _, err := c.Write(req); err != nil || !readCanned(br) {
			t.Fatalf("connection %d: exchange failed: %v", i, err)
		}
	}
	waitFor(t, "all connections idle", func() bool { return s.Stats().Idle == n })
	// A connection keeps its buffers for busyWait after its answer (a busy
	// client's next request is read straight into them); the last ones
	// answered may be within it still (2,000 exchanges can take less than
	// busyWait), and a loaded machine may run their goroutines late: wait
	// past it, then give them up to 5 s to let go.
	time.Sleep(busyWait)
	var per, stacks int64
	end := time.Now().Add(5 * time.Second)
	for {
		heap1, stack1 := memNow()
		per, stacks = (int64(heap1)-int64(heap0))/n, (int64(stack1)-int64(stack0))/n
		if per <= 16<<10 || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("per idle connection: %d B of heap, %d B of goroutine stacks (%d connections)", per, stacks, n)
	if per > 16<<10 {
		t.Fatalf("%d B of heap per idle connection, want < 16 KiB", per)
	}
}

// watching reports whether some connection of s has its disconnect
// watcher reading (the sweeper started it for a slow exchange).
func watching(s *Server) bool {
	s.sweep.mu.Lock()
	defer s.sweep.mu.Unlock()
	for c := range s.sweep.conns {
		c.watch.mu.Lock()
		w := c.watch.since == -1
		c.watch.mu.Unlock()
		if w {
			return true
		}
	}
	return false
}

// TestPipelinedAcrossBuffers: requests sent back to back are answered in
// order whether the next one's bytes wait in the read buffer or its first
// byte was taken by the disconnect watcher (the connection then keeps its
// buffers instead of waiting idle).
func TestPipelinedAcrossBuffers(t *testing.T) {
	noLeaks(t)
	addr, s, g := drainSetup(t, Config{})
	c := rawDial(t, addr)
	br := bufio.NewReader(c)
	_, _ = c.Write([]byte("GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n"))
	for i := 0; i < 2; i++ {
		resp, body := readResponse(t, br, "GET")
		if m := resp.Header.Get("X-Method"); resp.StatusCode != 200 || body != "ok" || m != "GET" {
			t.Fatalf("pipelined response %d: %d %q, the backend saw method %q", i, resp.StatusCode, body, m)
		}
	}
	_, _ = c.Write([]byte("GET /hold HTTP/1.1\r\nHost: a\r\n\r\n"))
	g.waitEntered(t, 1)
	waitFor(t, "the watcher reading", func() bool { return watching(s) })
	_, _ = c.Write([]byte("GET /c HTTP/1.1\r\nHost: a\r\n\r\n"))
	g.open()
	for i := 0; i < 2; i++ {
		resp, body := readResponse(t, br, "GET")
		if m := resp.Header.Get("X-Method"); resp.StatusCode != 200 || body != "ok" || m != "GET" {
			t.Fatalf("response %d after the held one: %d %q, the backend saw method %q", i, resp.StatusCode, body, m)
		}
	}
}

// TestPipelinedUnseen: a request sent while the one before it is still
// with the backend (so no read of the engine has seen it yet) is answered,
// in order, on every connection — whether the disconnect watcher took its
// first byte or a deferred answer's wait missed it (send.go: the wait then
// ends at busyWait and the connection turns eager). Several connections,
// since which of the two happens depends on timing.
func TestPipelinedUnseen(t *testing.T) {
	noLeaks(t)
	be := backend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(3 * time.Millisecond) // widens the window in which the next request arrives
		}
		w.Header().Set("X-Path", r.URL.Path)
		_, _ = io.WriteString(w, "ok")
	}))
	addr, _ := startProxy(t, Config{}, one(&Route{Name: "r", Cluster: newCluster(t, "app", upstream.Config{}, be)}))
	for i := range 8 {
		c := rawDial(t, addr)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		_, _ = io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
		time.Sleep(time.Millisecond) // after the engine has read it, most often
		_, _ = io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
		for _, want := range []string{"/slow", "/next"} {
			resp, body := readResponse(t, br, "GET")
			if p := resp.Header.Get("X-Path"); resp.StatusCode != 200 || body != "ok" || p != want {
				t.Fatalf("connection %d: %d %q for %q, want 200 \"ok\" for %q", i, resp.StatusCode, body, p, want)
			}
		}
		_, _ = io.WriteString(c, "GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.Header.Get("X-Path") != "/after" {
			t.Fatalf("connection %d: the request after them got %q", i, resp.Header.Get("X-Path"))
		}
		c.Close()
	}
}
