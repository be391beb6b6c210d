package discovery

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/spillwayhq/spillway/balancer"
)

// fakeResolver answers with whatever the test set last and records the
// questions.
type fakeResolver struct {
	mu    sync.Mutex
	ips   []IPRecord
	srvs  []SRVRecord
	err   error
	calls []string // "network name" or "SRV name"
	block bool     // wait for ctx instead of answering
}

func (f *fakeResolver) set(ips []IPRecord, srvs []SRVRecord, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ips, f.srvs, f.err = ips, srvs, err
}

func (f *fakeResolver) LookupIP(ctx context.Context, network, host string) ([]IPRecord, error) {
	f.mu.Lock()
	f.calls = append(f.calls, network+" "+host)
	ips, err, block := f.ips, f.err, f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return ips, err
}

func (f *fakeResolver) LookupSRV(ctx context.Context, name string) ([]SRVRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "SRV "+name)
	return f.srvs, f.err
}

func (f *fakeResolver) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeResolver) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func ipRec(addr string, ttl time.Duration) IPRecord {
	return IPRecord{IP: netip.MustParseAddr(addr), TTL: ttl}
}

func TestDNSAddressRecords(t *testing.T) {
	res := &fakeResolver{}
	res.set([]IPRecord{
		ipRec("10.0.0.2", time.Minute),
		ipRec("10.0.0.1", time.Minute),
		ipRec("10.0.0.1", time.Minute), // repeated: one endpoint
		ipRec("::ffff:10.0.0.3", time.Minute),
		ipRec("2001:db8::1", time.Minute),
	}, nil, nil)
	var r recorder
	st := newStepper()
	run(t, &DNS{Name: "svc.example.com", Port: 8080, Resolver: res, sleep: st.sleep}, r.update)
	st.next(t)
	lists, errs := r.take()
	want := []balancer.Endpoint{ep("10.0.0.1:8080", 1), ep("10.0.0.2:8080", 1), ep("10.0.0.3:8080", 1), ep("[2001:db8::1]:8080", 1)}
	if len(lists) != 1 || !reflect.DeepEqual(lists[0], want) || len(errs) != 0 {
		t.Fatalf("lists %v errors %v, want one list %v", lists, errs, want)
	}
	if want := []string{"ip svc.example.com"}; !reflect.DeepEqual(res.questions(), want) {
		t.Fatalf("resolver asked %q, want %q", res.questions(), want)
	}
}

func TestDNSNetworkPassedToResolver(t *testing.T) {
	res := &fakeResolver{}
	res.set([]IPRecord{ipRec("10.0.0.1", time.Minute)}, nil, nil)
	st := newStepper()
	run(t, &DNS{Name: "svc", Port: 1, Network: "ip6", Resolver: res, sleep: st.sleep}, func([]balancer.Endpoint) {})
	st.next(t)
	if want := []string{"ip6 svc"}; !reflect.DeepEqual(res.questions(), want) {
		t.Fatalf("resolver asked %q, want %q", res.questions(), want)
	}
}

// TestDNSReresolvesAtClampedTTL checks the delay before each re-resolution:
// the smallest TTL of the answer clamped to [MinTTL, MaxTTL].
func TestDNSReresolvesAtClampedTTL(t *testing.T) {
	for _, tc := range []struct {
		name           string
		minTTL, maxTTL time.Duration
		ttls           []time.Duration
		want           time.Duration
	}{
		{"in range", 0, 0, []time.Duration{30 * time.Second}, 30 * time.Second},
		{"smallest of the answer", 0, 0, []time.Duration{60 * time.Second, 20 * time.Second, 40 * time.Second}, 20 * time.Second},
		{"below the default MinTTL", 0, 0, []time.Duration{time.Second}, 5 * time.Second},
		{"zero TTL", 0, 0, []time.Duration{0}, 5 * time.Second},
		{"above the default MaxTTL", 0, 0, []time.Duration{time.Hour}, 5 * time.Minute},
		{"custom MaxTTL", time.Second, 10 * time.Second, []time.Duration{20 * time.Second}, 10 * time.Second},
		{"custom MinTTL", 500 * time.Millisecond, 10 * time.Second, []time.Duration{0}, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []IPRecord
			for i, ttl := range tc.ttls {
				recs = append(recs, IPRecord{IP: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), TTL: ttl})
			}
			res := &fakeResolver{}
			res.set(recs, nil, nil)
			st := newStepper()
			run(t, &DNS{Name: "svc", Port: 80, MinTTL: tc.minTTL, MaxTTL: tc.maxTTL, Resolver: res, sleep: st.sleep}, func([]balancer.Endpoint) {})
			for round := 0; round < 2; round++ {
				if got := st.next(t); got != tc.want {
					t.Fatalf("round %d: waits %v before re-resolving, want %v", round, got, tc.want)
				}
				if got := res.callCount(); got != round+1 {
					t.Fatalf("round %d: %d resolutions, want %d", round, got, round+1)
				}
				st.step()
			}
		})
	}
}

// TestDNSFailureKeepsLastList walks through failures after a good answer:
// no list is sent, every failure reaches OnError, retries back off from
// MinTTL and never wait longer than the good answer's TTL.
func TestDNSFailureKeepsLastList(t *testing.T) {
	res := &fakeResolver{}
	res.set([]IPRecord{ipRec("10.0.0.1", 30*time.Second), ipRec("10.0.0.2", 30*time.Second)}, nil, nil)
	var r recorder
	st := newStepper()
	run(t, &DNS{Name: "svc", Port: 80, Resolver: res, OnError: r.onError, sleep: st.sleep}, r.update)

	if got := st.next(t); got != 30*time.Second {
		t.Fatalf("after the good answer: waits %v, want 30s", got)
	}
	if lists, _ := r.take(); len(lists) != 1 {
		t.Fatalf("%d lists after the good answer, want 1", len(lists))
	}

	boom := errors.New("i/o timeout")
	res.set(nil, nil, boom)
	for i, want := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second} {
		st.step()
		if got := st.next(t); got != want {
			t.Fatalf("failure %d: waits %v, want %v", i+1, got, want)
		}
		lists, errs := r.take()
		if len(lists) != 0 || len(errs) != 1 || !errors.Is(errs[0], boom) {
			t.Fatalf("failure %d: lists %v errors %v, want no list and the error", i+1, lists, errs)
		}
	}

	res.set(nil, nil, nil) // an empty answer is a failure too
	st.step()
	st.next(t)
	if lists, errs := r.take(); len(lists) != 0 || len(errs) != 1 || !errors.Is(errs[0], ErrNoRecords) {
		t.Fatalf("empty answer: lists %v errors %v, want no list and ErrNoRecords", lists, errs)
	}

	res.set([]IPRecord{ipRec("10.0.0.2", 10*time.Second), ipRec("10.0.0.3", 10*time.Second)}, nil, nil)
	st.step()
	if got := st.next(t); got != 10*time.Second {
		t.Fatalf("after recovery: waits %v, want 10s", got)
	}
	want := []balancer.Endpoint{ep("10.0.0.2:80", 1), ep("10.0.0.3:80", 1)}
	if lists, errs := r.take(); len(lists) != 1 || !reflect.DeepEqual(lists[0], want) || len(errs) != 0 {
		t.Fatalf("after recovery: lists %v errors %v, want %v", lists, errs, want)
	}

	st.step() // the same answer again: nothing to send
	st.next(t)
	if lists, _ := r.take(); len(lists) != 0 {
		t.Fatalf("an unchanged answer was sent again: %v", lists)
	}
}

func TestDNSFailuresBeforeAnyAnswerRetryAtMinTTL(t *testing.T) {
	res := &fakeResolver{}
	res.set(nil, nil, errors.New("connection refused"))
	var r recorder
	st := newStepper()
	run(t, &DNS{Name: "svc", Port: 80, MinTTL: 2 * time.Second, Resolver: res, OnError: r.onError, sleep: st.sleep}, r.update)
	for i := 0; i < 3; i++ {
		if i > 0 {
			st.step()
		}
		if got := st.next(t); got != 2*time.Second {
			t.Fatalf("failure %d: waits %v, want MinTTL 2s", i+1, got)
		}
	}
	res.set([]IPRecord{ipRec("10.0.0.1", time.Minute)}, nil, nil)
	st.step()
	st.next(t)
	lists, errs := r.take()
	if len(lists) != 1 || len(errs) != 3 {
		t.Fatalf("%d lists and %d errors, want 1 list (after the answer) and 3 errors", len(lists), len(errs))
	}
}

func TestRetryDelay(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		minTTL, good time.Duration
		n            int
		want         time.Duration
	}{
		{5 * s, 0, 1, 5 * s},
		{5 * s, 0, 9, 5 * s},
		{5 * s, 300 * s, 1, 5 * s},
		{5 * s, 300 * s, 2, 10 * s},
		{5 * s, 300 * s, 6, 160 * s},
		{5 * s, 300 * s, 7, 300 * s},
		{5 * s, 300 * s, 1000, 300 * s},
		{5 * s, 5 * s, 3, 5 * s},
	} {
		if got := retryDelay(tc.minTTL, tc.good, tc.n); got != tc.want {
			t.Errorf("retryDelay(%v, %v, %d) = %v, want %v", tc.minTTL, tc.good, tc.n, got, tc.want)
		}
	}
}

func TestDNSSRVWeightsAndPriorities(t *testing.T) {
	res := &fakeResolver{}
	res.set(nil, []SRVRecord{
		{Target: "a.example.com.", Port: 8080, Priority: 10, Weight: 5, TTL: 60 * time.Second},
		{Target: "b.example.com.", Port: 8080, Priority: 10, Weight: 0, TTL: 45 * time.Second},
		{Target: "A.Example.com.", Port: 8080, Priority: 10, Weight: 2, TTL: 60 * time.Second}, // same as a: weights add
		{Target: "a.example.com.", Port: 9090, Priority: 10, Weight: 3, TTL: 60 * time.Second}, // other port: its own endpoint
		{Target: "c.example.com.", Port: 8080, Priority: 20, Weight: 100, TTL: 300 * time.Second},
		{Target: ".", Port: 0, Priority: 1, Weight: 0, TTL: 40 * time.Second}, // "no service": skipped
	}, nil)
	var r recorder
	st := newStepper()
	run(t, &DNS{Name: "_http._tcp.example.com", SRV: true, Resolver: res, OnError: r.onError, sleep: st.sleep}, r.update)
	if got := st.next(t); got != 40*time.Second {
		t.Fatalf("waits %v, want 40s (the smallest TTL of the answer)", got)
	}
	lists, errs := r.take()
	want := []balancer.Endpoint{ep("a.example.com:8080", 7), ep("a.example.com:9090", 3), ep("b.example.com:8080", 1)}
	if len(lists) != 1 || !reflect.DeepEqual(lists[0], want) || len(errs) != 0 {
		t.Fatalf("lists %v errors %v, want %v", lists, errs, want)
	}
	if want := []string{"SRV _http._tcp.example.com"}; !reflect.DeepEqual(res.questions(), want) {
		t.Fatalf("resolver asked %q, want %q", res.questions(), want)
	}

	// Only "no service" targets: a failed refresh, the list stays.
	res.set(nil, []SRVRecord{{Target: ".", TTL: time.Minute}}, nil)
	st.step()
	st.next(t)
	if lists, errs := r.take(); len(lists) != 0 || len(errs) != 1 || !errors.Is(errs[0], ErrNoRecords) {
		t.Fatalf("only '.': lists %v errors %v, want no list and ErrNoRecords", lists, errs)
	}

	// The preferred group goes away: the backups take over.
	res.set(nil, []SRVRecord{{Target: "c.example.com.", Port: 8080, Priority: 20, Weight: 100, TTL: time.Minute}}, nil)
	st.step()
	st.next(t)
	if lists, _ := r.take(); len(lists) != 1 || !reflect.DeepEqual(lists[0], []balancer.Endpoint{ep("c.example.com:8080", 100)}) {
		t.Fatalf("backups only: lists %v", lists)
	}
}

func TestDNSCancelDuringResolve(t *testing.T) {
	res := &fakeResolver{block: true}
	var r recorder
	stop := run(t, &DNS{Name: "svc", Port: 80, Resolver: res, OnError: r.onError}, r.update)
	deadline := time.Now().Add(guard)
	for res.callCount() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if lists, errs := r.take(); len(lists) != 0 || len(errs) != 0 {
		t.Fatalf("lists %v errors %v: a cancelled resolution is neither a list nor an error", lists, errs)
	}
}

func TestDNSConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		d     DNS
		field string
	}{
		{DNS{Port: 80}, "DNS.Name"},
		{DNS{Name: "a..b", Port: 80}, "DNS.Name"},
		{DNS{Name: "svc"}, "DNS.Port"},
		{DNS{Name: "svc", Port: 65536}, "DNS.Port"},
		{DNS{Name: "_x._tcp.svc", SRV: true, Port: 80}, "DNS.Port"},
		{DNS{Name: "_x._tcp.svc", SRV: true, Network: "ip4"}, "DNS.Network"},
		{DNS{Name: "svc", Port: 80, Network: "tcp"}, "DNS.Network"},
		{DNS{Name: "svc", Port: 80, MinTTL: -time.Second}, "DNS.MinTTL"},
		{DNS{Name: "svc", Port: 80, MinTTL: time.Minute, MaxTTL: time.Second}, "DNS.MaxTTL"},
		{DNS{Name: "svc", Port: 80, MinTTL: 10 * time.Minute}, "DNS.MaxTTL"}, // above the default MaxTTL
	} {
		res := &fakeResolver{}
		tc.d.Resolver = res
		err := tc.d.Run(context.Background(), func([]balancer.Endpoint) {})
		var ce *ConfigError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%+v: Run = %v, want a *ConfigError for %s", tc.d, err, tc.field)
		}
		if res.callCount() != 0 {
			t.Errorf("%+v: resolved despite the bad configuration", tc.d)
		}
	}
	d := DNS{Name: "svc", Port: 80, Resolver: &fakeResolver{}}
	if err := d.Run(context.Background(), nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil update: Run = %v, want ErrConfig", err)
	}
}
