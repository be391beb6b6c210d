package breaker

import (
	"context"
	"errors"
	"net"
	"testing"
)

func TestHTTPFailure(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Err: errors.New("i/o timeout")}
	for _, c := range []struct {
		status int
		err    error
		want   bool
	}{
		{200, nil, false},
		{204, nil, false},
		{101, nil, false},
		{301, nil, false},
		{304, nil, false},
		{400, nil, false},
		{401, nil, false},
		{403, nil, false},
		{404, nil, false},
		{408, nil, false},
		{429, nil, false},
		{499, nil, false},
		{500, nil, true},
		{501, nil, false}, // Not Implemented
		{502, nil, true},
		{503, nil, true},
		{504, nil, true},
		{599, nil, true},
		{600, nil, false},
		{0, nil, false},
		{-1, nil, false},
		{0, timeout, true},
		{0, context.DeadlineExceeded, true},
		{0, errors.New("connection refused"), true},
		{200, errors.New("body read failed"), true}, // an error wins over the status
		{404, errors.New("reset"), true},
	} {
		if got := HTTPFailure(c.status, c.err); got != c.want {
			t.Errorf("HTTPFailure(%d, %v) = %v, want %v", c.status, c.err, got, c.want)
		}
	}
}
