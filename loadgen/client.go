package loadgen

import (
	"math"
	"net"
	"net/http"
	"time"

	"github.com/spillwayhq/spillway/client"
	"github.com/spillwayhq/spillway/retry"
)

// dialTimeout bounds a connection's dial (the attempt's deadline bounds it
// too).
const dialTimeout = 10 * time.Second

// newTransport returns the default transport: enough connections per host
// for MaxInFlight, no compression (bodies are discarded, and a generator
// should not spend its CPU inflating them), no proxy from the environment,
// HTTP/1.1 only unless cfg.HTTP2 (then HTTP/2 only: ALPN over TLS, prior
// knowledge on http:// URLs).
func newTransport(cfg Config) *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: cfg.MaxInFlight,
		MaxConnsPerHost:     cfg.MaxInFlight,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: dialTimeout,
		DisableCompression:  true,
		ForceAttemptHTTP2:   cfg.HTTP2,
	}
	if cfg.TLS != nil {
		t.TLSClientConfig = cfg.TLS.Clone()
	}
	var p http.Protocols
	if cfg.HTTP2 {
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	t.Protocols = &p
	return t
}

// newClient returns the client stack that sends each call: the library's
// client.Transport with the retry policy of cfg.Client (none for
// RetryNone) over the per-attempt layer over base.
//
// Retries are allowed for every method (client.Config.RetryNonIdempotent):
// a load generator knows what it sends, and the retry storm it reproduces is
// the clients' retrying whatever failed.
func newClient(cfg Config, r *runner, base http.RoundTripper) (http.RoundTripper, error) {
	inner := &attempts{next: base, r: r}
	policy, err := retryPolicy(cfg.Client)
	if err != nil || policy == nil {
		return inner, err
	}
	return client.New(client.Config{Transport: inner, Retry: policy, RetryNonIdempotent: true})
}

// retryPolicy maps a ClientPolicy onto retry.Policy; nil for RetryNone.
//
// retry.Backoff has no zero delay (a zero Base means its default), so
// RetryImmediate waits the smallest one it can express: NoJitter with Base
// and Cap the smallest positive float64, which rounds to a 0 ns timer in
// client.Transport — a retry follows its failure at once.
func retryPolicy(c ClientPolicy) (*retry.Policy, error) {
	p := retry.Policy{MaxAttempts: 1 + c.Retries}
	switch c.Retry {
	case RetryNone:
		return nil, nil
	case RetryImmediate:
		p.Backoff = retry.Backoff{Base: math.SmallestNonzeroFloat64, Cap: math.SmallestNonzeroFloat64, Jitter: retry.NoJitter}
	case RetryBackoff, RetryBudget:
		p.Backoff = retry.Backoff{Base: c.BackoffBase.Seconds(), Cap: c.BackoffCap.Seconds(), Jitter: retry.FullJitter}
	}
	if c.Retry == RetryBudget {
		b, err := retry.NewBudget(retry.BudgetConfig{Ratio: c.BudgetRatio, MinPerSecond: c.BudgetMin})
		if err != nil {
			return nil, configErr("Client: %v", err)
		}
		p.Budget = b
	}
	pol, err := retry.NewPolicy(p)
	if err != nil {
		return nil, configErr("Client: %v", err)
	}
	return pol, nil
}
