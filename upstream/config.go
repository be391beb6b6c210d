package upstream

import (
	"crypto/tls"
	"time"

	"github.com/spillwayhq/spillway/httpwire"
)

// Config is one cluster's upstream settings; zero fields take the defaults
// in brackets.
type Config struct {
	// ConnectTimeout bounds a dial plus its TLS handshake [5s]. It also bounds
	// the wait for a connection when MaxConns are in use.
	ConnectTimeout time.Duration
	// IdleTimeout: an idle pooled connection is closed after this [90s].
	IdleTimeout time.Duration
	// MaxIdle is the number of idle connections kept per endpoint [64];
	// a connection released beyond it is closed. Negative keeps none.
	MaxIdle int
	// MaxConns bounds the connections open per endpoint [0 = unlimited].
	// When reached, RoundTrip waits for a release up to ConnectTimeout, then
	// fails with KindPoolFull.
	MaxConns int
	// TLS, when not nil, is the client configuration for TLS to the
	// endpoint (its ServerName and RootCAs are the caller's to set); nil
	// means plaintext.
	TLS *tls.Config
	// Limits bound response heads (and chunked trailers).
	Limits httpwire.Limits
}

// Defaults for the zero fields of Config.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultIdleTimeout    = 90 * time.Second
	DefaultMaxIdle        = 64
)

// Bounds that are not configurable.
const (
	// maxInterim is the most 1xx heads accepted before the final response.
	maxInterim = 16
	// bodyBufSize is the size of the pooled buffers request bodies are
	// copied through.
	bodyBufSize = 32 << 10
	// readBufSize and writeBufSize size each connection's bufio reader and
	// writer. A response head longer than readBufSize is gathered in the
	// Response's own buffer, up to Limits.MaxHeaderBytes.
	readBufSize  = 4 << 10
	writeBufSize = 4 << 10
	// defaultMaxHeaderBytes mirrors httpwire's default head bound, used
	// when Limits.MaxHeaderBytes is zero.
	defaultMaxHeaderBytes = 32 << 10
)

// withDefaults returns c with its zero (or negative) fields set to the
// defaults.
func (c Config) withDefaults() Config {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxIdle == 0 {
		c.MaxIdle = DefaultMaxIdle
	} else if c.MaxIdle < 0 {
		c.MaxIdle = 0
	}
	if c.MaxConns < 0 {
		c.MaxConns = 0
	}
	return c
}

func (c *Config) maxHeaderBytes() int {
	if c.Limits.MaxHeaderBytes > 0 {
		return c.Limits.MaxHeaderBytes
	}
	return defaultMaxHeaderBytes
}
