package redisstore

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// quietLogger drops go-redis's own log lines: the tests that kill Redis on
// purpose would otherwise print a "failed to dial" line per attempt.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}
