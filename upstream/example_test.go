package upstream_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"

	"github.com/spillwayhq/spillway/upstream"
)

// A backend answering every request on a connection with "hello".
func helloBackend() net.Listener {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if string(line) == "\r\n" {
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
					}
				}
			}()
		}
	}()
	return ln
}

func ExamplePool_RoundTrip() {
	ln := helloBackend()
	defer ln.Close()
	pool := upstream.NewPool(ln.Addr().String(), upstream.Config{})
	defer pool.Close()

	req := &upstream.Request{
		Method:     []byte("GET"),
		Head:       []byte("GET /greeting HTTP/1.1\r\nHost: backend\r\n\r\n"),
		Replayable: true,
	}
	var resp upstream.Response // reused for every exchange
	for range 3 {
		if err := pool.RoundTrip(context.Background(), req, &resp); err != nil {
			fmt.Println(err)
			return
		}
		body, err := io.ReadAll(resp.Body)
		fmt.Println(resp.Head.Status, string(body), err, resp.Reused)
		resp.Close() // body read to its end: back to the pool
	}
	s := pool.Stats()
	fmt.Println("dials:", s.Dials, "reused:", s.Reused, "idle:", s.Idle)
	// Output:
	// 200 hello <nil> false
	// 200 hello <nil> true
	// 200 hello <nil> true
	// dials: 1 reused: 2 idle: 1
}
