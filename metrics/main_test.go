package metrics

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind (the
// proxies and backends of the end-to-end tests and benchmarks).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
