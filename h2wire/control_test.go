package h2wire

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestReadDeadline: past the handler's read deadline a waiting Read
// returns ErrDeadline (an os.ErrDeadlineExceeded) and the stream stays
// open: with the deadline cleared, the next Read gets the bytes the client
// sends later, and the handler answers.
func TestReadDeadline(t *testing.T) {
	checkLeaks(t)
	errs := make(chan error, 1)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		st.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
		buf := make([]byte, 16)
		_, err := st.Read(buf)
		errs <- err
		st.SetReadDeadline(time.Time{})
		n, _ := io.ReadFull(st, buf[:4])
		st.WriteHeaders(200, nil, false)
		st.Write(buf[:n])
	}))
	r := dialRaw(t, s, true)
	r.headers(1, false, post("/")...)
	if err := <-errs; !errors.Is(err, ErrDeadline) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v, want ErrDeadline", err)
	}
	r.fr.WriteData(1, true, []byte("late"))
	r.expect(outcome{stream: 1, status: "200"})
	if data, _ := r.nextData(1); data != "late" {
		t.Fatalf("body %q, want the bytes sent after the deadline", data)
	}
}

// TestWriteDeadline: a window that stays shut past the handler's write
// deadline resets the stream with CANCEL, well before WriteTimeout, and
// Write returns ErrDeadline.
func TestWriteDeadline(t *testing.T) {
	checkLeaks(t)
	werr := make(chan error, 1)
	s := newServer(t, Config{WriteTimeout: time.Minute}, HandlerFunc(func(st *Stream) {
		st.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := st.Write([]byte("x"))
		werr <- err
	}))
	r := dialRaw(t, s, false)
	r.write([]byte(http2.ClientPreface))
	r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	r.headers(1, true, get("/")...)
	r.expect(rst(1, http2.ErrCodeCancel))
	if err := <-werr; !errors.Is(err, ErrDeadline) {
		t.Errorf("Write: %v, want ErrDeadline", err)
	}
}

// TestCloseReadEndsWaitingRead: CloseRead from another goroutine ends a
// Read waiting for DATA, at once, and later Reads fail too.
func TestCloseReadEndsWaitingRead(t *testing.T) {
	checkLeaks(t)
	errs := make(chan error, 2)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		go func() {
			time.Sleep(20 * time.Millisecond)
			st.CloseRead()
		}()
		_, err := st.Read(make([]byte, 8)) // nothing comes: only CloseRead ends it
		errs <- err
		_, err = st.Read(make([]byte, 8))
		errs <- err
		st.WriteHeaders(204, nil, true)
	}))
	r := dialRaw(t, s, true)
	r.headers(1, false, post("/")...)
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrBodyClosed) {
			t.Fatalf("Read after CloseRead: %v, want ErrBodyClosed", err)
		}
	}
	r.expect(outcome{stream: 1, status: "204"})
}

// TestReadAndWriteWaitTogether: a Read waiting for DATA on one goroutine
// and a Write waiting for window on another are each woken by their own
// frame: the DATA wakes the Read even though the Write waits as well (one
// shared wakeup could go to the wrong one, and the Read would sleep on).
func TestReadAndWriteWaitTogether(t *testing.T) {
	checkLeaks(t)
	got := make(chan string, 1)
	wrote := make(chan error, 1)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		st.WriteHeaders(200, nil, false)
		wdone := make(chan struct{})
		go func() {
			defer close(wdone)
			_, err := st.Write([]byte("0123456789")) // the window is 0: waits
			wrote <- err
		}()
		buf := make([]byte, 8)
		n, _ := st.Read(buf)
		got <- string(buf[:n])
		<-wdone
	}))
	r := dialRaw(t, s, false)
	r.write([]byte(http2.ClientPreface))
	r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	r.headers(1, false, post("/")...)
	r.expect(outcome{stream: 1, status: "200"})
	time.Sleep(20 * time.Millisecond) // both are waiting by now (were they not, they would not need waking)
	r.fr.WriteData(1, true, []byte("ping"))
	select {
	case s := <-got:
		if s != "ping" {
			t.Fatalf("Read %q, want ping", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the DATA did not wake the waiting Read")
	}
	r.fr.WriteWindowUpdate(1, 10)
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("Write after WINDOW_UPDATE: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the WINDOW_UPDATE did not wake the waiting Write")
	}
}

// TestAfterDone: f runs when the client resets the stream, and not for a
// stream the handler ends normally (nor, set after the end, at once).
func TestAfterDone(t *testing.T) {
	checkLeaks(t)
	ran := make(chan string, 4)
	s := newServer(t, Config{}, HandlerFunc(func(st *Stream) {
		path := string(st.Path())
		st.AfterDone(func() { ran <- path })
		if path == "/reset" {
			<-st.Done()
			return
		}
		st.WriteHeaders(200, nil, true)
	}))
	r := dialRaw(t, s, true)
	r.headers(1, true, get("/ok")...)
	r.expect(outcome{stream: 1, status: "200"})
	r.headers(3, true, get("/reset")...)
	r.fr.WriteRSTStream(3, http2.ErrCodeCancel)
	select {
	case p := <-ran:
		if p != "/reset" {
			t.Fatalf("AfterDone ran for %s, want only /reset", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AfterDone did not run for the reset stream")
	}
	r.headers(5, true, get("/ok")...)
	r.expect(outcome{stream: 5, status: "200"})
	select {
	case p := <-ran:
		t.Fatalf("AfterDone ran for %s, a stream that ended normally", p)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestGoAwayBeforePreface: a GoAway asked for before the connection has
// written its SETTINGS is sent right after them (a GOAWAY may not come
// first), and no stream is served.
func TestGoAwayBeforePreface(t *testing.T) {
	checkLeaks(t)
	served := make(chan struct{}, 1)
	h := HandlerFunc(func(st *Stream) { served <- struct{}{} })
	pool := NewPool(0, 0)
	t.Cleanup(pool.Close)
	s := listen(t, func(s *server, nc net.Conn) {
		c := NewConn(nc, nil, &Config{Pool: pool}, h)
		c.GoAway()
		c.Serve()
	})
	r := dialRaw(t, s, true)
	if f, ok := r.next("SETTINGS").(*http2.SettingsFrame); !ok || f.IsAck() {
		t.Fatalf("first frame %v, want our SETTINGS", f)
	}
	r.headers(1, true, get("/")...)
	r.expect(goaway(http2.ErrCodeNo))
	select {
	case <-served:
		t.Fatal("a stream was served after GOAWAY")
	case <-time.After(50 * time.Millisecond):
	}
}
