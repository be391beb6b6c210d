package listener

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The flood's child processes (flood_test.go): each opens its share of the
// idle connections and holds them.

// floodEnv, in a child process of the test binary, holds "address count":
// the child opens that many connections and holds them until its stdin
// closes.
const floodEnv = "SPILLWAY_LISTENER_FLOOD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(floodEnv); spec != "" {
		os.Exit(floodChild(spec))
	}
	os.Exit(m.Run())
}

// floodChild dials the connections with 64 dialers, prints "dialed N reset
// R failed F", waits for stdin's end, resets them and returns 0. A dial
// "reset" is a connection the gateway accepted and refused (per-IP) before
// the dialer's goroutine ran again to see its connect complete: Go then
// reads the reset as the connect's error.
func floodChild(spec string) int {
	addr, count, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Println("bad spec", spec)
		return 2
	}
	var (
		mu     sync.Mutex
		conns  = make([]net.Conn, 0, n)
		failed int
		resets int
		first  error
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	d := net.Dialer{Timeout: 30 * time.Second}
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, err := d.Dial("tcp", addr)
				mu.Lock()
				switch {
				case errors.Is(err, syscall.ECONNRESET):
					resets++
				case err != nil:
					failed++
					first = cmp(first, err)
				default:
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("dialed %d reset %d failed %d %v\n", len(conns), resets, failed, first)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		// A reset, not a FIN: 20,000 TIME_WAIT sockets would hold 20,000
		// of the machine's 28,000 ephemeral ports for a minute.
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	}
	return 0
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// child is a flood process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	line  chan string   // its "dialed" line
	done  chan struct{} // closed when its stdout ends
}

// startChild starts a flood process of n connections to addr; the test's
// end closes its stdin (it closes its connections and exits) and waits.
func startChild(t *testing.T, addr string, n int) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), floodEnv+"="+addr+" "+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, line: make(chan string, 1), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case c.line <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			t.Error("a flood process did not exit 20 s after its stdin closed; killed")
			_ = cmd.Process.Kill()
			<-c.done
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("flood process: %v", err)
		}
	})
	return c
}

// dialed waits for the child's line and returns its count of connections
// the gateway accepted: connected, or reset before the connect was seen.
func (c *child) dialed(t *testing.T, ctx context.Context) int {
	t.Helper()
	select {
	case line := <-c.line:
		var n, resets, failed int
		if _, err := fmt.Sscanf(line, "dialed %d reset %d failed %d", &n, &resets, &failed); err != nil {
			t.Fatalf("flood process said %q", line)
		}
		if failed > 0 {
			t.Errorf("flood process: %s", line)
		}
		t.Logf("flood process: %s", line)
		return n + resets
	case <-ctx.Done():
		t.Fatal("a flood process did not finish dialing in the test's time budget")
	}
	return 0
}
