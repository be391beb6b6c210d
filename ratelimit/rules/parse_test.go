package rules

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spillwayhq/spillway/ratelimit"
)

func TestSeedFileLoads(t *testing.T) {
	set, err := Load("testdata/seed.json")
	if err != nil {
		t.Fatal(err)
	}
	user := KeyPart{Kind: PartIdentity, Name: "user", Header: "X-User-Id"}
	ip := KeyPart{Kind: PartIP, Name: "ip"}
	want := []Rule{
		{ID: "user-default", Key: []KeyPart{user}, Spec: ratelimit.Spec{Rate: 100, Per: 60, Burst: 20}},
		{ID: "login", Key: []KeyPart{user, ip}, Spec: ratelimit.Spec{Rate: 10, Per: 900}},
		{ID: "otp-sms", Key: []KeyPart{{Kind: PartIdentity, Name: "phone", Header: "X-Phone"}},
			Spec: ratelimit.Spec{Rate: 3, Per: 600}, FailMode: ratelimit.FailClosed},
		{ID: "tenant", Key: []KeyPart{{Kind: PartIdentity, Name: "tenant", Header: "X-Tenant-Id"}},
			Spec: ratelimit.Spec{Rate: 500, Per: 1, Burst: 1000}},
	}
	if !reflect.DeepEqual(set.Rules, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", set.Rules, want)
	}
	if len(set.TrustedProxies) != 0 || set.ForwardedHeaderName() != "X-Forwarded-For" || set.IPv6Bits() != 64 {
		t.Errorf("client IP settings: %+v", set)
	}
}

func TestFullFileLoads(t *testing.T) {
	set, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantProxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32")}
	if !reflect.DeepEqual(set.TrustedProxies, wantProxies) {
		t.Errorf("trustedProxies = %v", set.TrustedProxies)
	}
	if set.ForwardedHeader != "Forwarded" || set.IPv6Prefix != 56 {
		t.Errorf("forwardedHeader %q ipv6Prefix %d", set.ForwardedHeader, set.IPv6Prefix)
	}
	wantIDs := map[string]Identity{"user": {Header: "X-Authenticated-User"}, "device": {Header: "X-Device-Id"}}
	if !reflect.DeepEqual(set.Identities, wantIDs) {
		t.Errorf("identities = %v", set.Identities)
	}
	want := []Rule{
		{ID: "ip-flood", Key: []KeyPart{{Kind: PartIP, Name: "ip"}}, Spec: ratelimit.Spec{Rate: 600, Per: 60}},
		{ID: "login", Key: []KeyPart{{Kind: PartIdentity, Name: "user", Header: "X-Authenticated-User"}, {Kind: PartIP, Name: "ip"}},
			Spec:     ratelimit.Spec{Algorithm: ratelimit.AlgSlidingLog, Rate: 10, Per: 900},
			FailMode: ratelimit.FailClosed, OnMissing: MissingFallback,
			Match: Match{Methods: []string{"POST"}, Paths: []string{"/login"}}},
		{ID: "export", Key: []KeyPart{{Kind: PartIdentity, Name: "tenant", Header: "X-Tenant-Id"}, {Kind: PartRoute, Name: "route"}},
			Spec: ratelimit.Spec{Rate: 100, Per: 3600, Burst: 100}, Cost: 50,
			Match: Match{Paths: []string{"/export/*", "/reports/{id}"}}},
		{ID: "device", Key: []KeyPart{{Kind: PartIdentity, Name: "device", Header: "X-Device-Id"},
			{Kind: PartHeader, Name: "header:X-Client-Version", Header: "X-Client-Version"}},
			Spec: ratelimit.Spec{Algorithm: ratelimit.AlgLeakyQueue, Rate: 5, Per: 2.5, Burst: 10}, Shadow: true},
		{ID: "everyone", Spec: ratelimit.Spec{Rate: 1000, Per: 86400}},
	}
	if !reflect.DeepEqual(set.Rules, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", set.Rules, want)
	}
}

// Each bad file must be refused with the position and reason of its
// problem.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // one per reported problem, in order
	}{
		{"empty", "", []string{"f.yaml: empty file"}},
		{"syntax", "rules: [\n  {id: a,\n", []string{`f.yaml:2:9: could not find flow map content (the "{" at line 2, column 3 is not closed)`}},
		// The cases: yaml.v3 said line 2 for the "[" on line 3, and
		// line 3 for the tab on line 4, with no column.
		{"unclosed bracket", "rules:\n  - id: a\n    key: [ip\n    rate: 1\n    per: 1s\n",
			[]string{`f.yaml:3:13: missing "," or "]" after "ip" (in the "[" opened at line 3, column 10)`}},
		{"tab indentation", "rules:\n  - id: a\n    rate: 1\n\tper: 1s\n",
			[]string{"f.yaml:4:1: tab character: YAML indents with spaces only"}},
		{"indented too little", "rules:\n  - id: a\n    rate: 1\n   per: 1s\n",
			[]string{"f.yaml:4:4: value is not allowed in this context"}},
		{"indented too far", "rules:\n  - id: a\n    rate: 1\n      per: 1s\n",
			[]string{`f.yaml:4:10: ":" is not allowed here (a value holding ": " needs quotes; or is the line indented too far?)`}},
		{"duplicate key", "rules:\n  - id: a\n    rate: 1\n    per: 1s\n    rate: 2\n",
			[]string{`f.yaml:5:5: rule "a": rate is set twice (first at line 3)`}},
		{"duplicate top-level key", "rules: []\nrules: []\n", []string{"f.yaml:2:1: rules is set twice (first at line 1)"}},
		{"json syntax", `{"rules": [{"id": "a", "rate": 1, "per": "1s" "x": 1}]}`,
			[]string{`f.yaml:1:46: missing "," or "}" after "\"1s\"" (in the "{" opened at line 1, column 12)`}},
		// goccy/go-yaml reads 1 "per" as one scalar; yaml.v3's message stays, on line 1.
		{"json syntax without column", `{"rules": [{"id": "a", "rate": 1 "per": "1s"}]}`,
			[]string{`f.yaml:1: did not find expected ',' or '}'`}},
		{"two documents", "rules: []\n---\nrules: []\n", []string{"f.yaml:2:1: one document per file; a second one starts here"}},
		{"top not mapping", "[1, 2]", []string{"f.yaml:1:1: want a mapping with a rules: list at the top, got a list"}},
		{"missing rules", "identities: {}\n", []string{"f.yaml:1:1: missing rules:"}},
		{"unknown top field", "rules: []\nrulez: []\n", []string{`f.yaml:2:1: unknown field "rulez"`}},
		{"rules not a list", "rules: {id: a}\n", []string{"f.yaml:1:8: rules: want a list of rules, got a mapping"}},
		{"unknown rule field", "rules:\n- {id: a, rate: 1, per: 1s, brust: 5}\n",
			[]string{`f.yaml:2:29: rule "a": unknown field "brust"`}},
		{"missing id", "rules:\n- {rate: 1, per: 1s}\n", []string{"f.yaml:2:3: rule #1: missing id"}},
		{"missing rate and per", "rules:\n- id: a\n", []string{`f.yaml:2:3: rule "a": missing rate`, `f.yaml:2:3: rule "a": missing per`}},
		{"rate is a string", `{"rules": [{"id": "a", "rate": "100", "per": "1m"}]}`,
			[]string{`f.yaml:1:32: rule "a": rate: want a number, got "100"`}},
		{"rate zero", "rules:\n- id: a\n  rate: 0\n  per: 1s\n", []string{`f.yaml:3:9: rule "a": rate: must be a positive`}},
		{"rate infinite", "rules:\n- id: a\n  rate: .inf\n  per: 1s\n", []string{`f.yaml:3:9: rule "a": rate: want a finite number`}},
		{"bad per", "rules:\n- id: a\n  rate: 1\n  per: 1 minute\n", []string{`f.yaml:4:8: rule "a": per: "1 minute" is not a duration`}},
		{"negative per", "rules:\n- id: a\n  rate: 1\n  per: -5\n", []string{`f.yaml:4:8: rule "a": per: want a positive number of seconds`}},
		{"burst fraction", "rules:\n- id: a\n  rate: 1\n  per: 1s\n  burst: 2.5\n", []string{`f.yaml:5:10: rule "a": burst: want a whole number`}},
		{"burst negative", "rules:\n- id: a\n  rate: 1\n  per: 1s\n  burst: -1\n", []string{`f.yaml:5:10: rule "a": burst: must be from 0`}},
		{"burst on window", "rules:\n- id: a\n  rate: 5\n  per: 1s\n  algorithm: fixed-window\n  burst: 3\n",
			[]string{`f.yaml:6:10: rule "a": burst: must be omitted for the fixed-window algorithm`}},
		{"fractional window rate", "rules:\n- id: a\n  rate: 2.5\n  per: 1s\n  algorithm: sliding-log\n",
			[]string{`f.yaml:3:9: rule "a": rate: must be a whole number for the sliding-log algorithm`}},
		{"unknown algorithm", "rules:\n- {id: a, rate: 1, per: 1s, algorithm: bogus}\n",
			[]string{`f.yaml:2:40: rule "a": algorithm: unknown algorithm "bogus"`}},
		{"cost over burst", "rules:\n- {id: a, rate: 10, per: 1s, burst: 5, cost: 6}\n",
			[]string{`f.yaml:2:46: rule "a": cost: 6 units is more than the rule ever allows at once (5)`}},
		{"cost zero", "rules:\n- {id: a, rate: 10, per: 1s, cost: 0}\n", []string{`f.yaml:2:36: rule "a": cost: want at least 1`}},
		{"shadow not bool", "rules:\n- {id: a, rate: 1, per: 1s, shadow: yes}\n", []string{`f.yaml:2:37: rule "a": shadow: want true or false, got "yes"`}},
		{"fail mode", "rules:\n- {id: a, rate: 1, per: 1s, failMode: shut}\n", []string{`f.yaml:2:39: rule "a": failMode: want "open" or "closed", got "shut"`}},
		{"on missing", "rules:\n- {id: a, rate: 1, per: 1s, onMissing: drop}\n", []string{`f.yaml:2:40: rule "a": onMissing: want "skip" or "fallback"`}},
		{"unknown key part", "rules:\n- {id: a, key: [user, bogus], rate: 1, per: 1s}\n", []string{`f.yaml:2:23: rule "a": key: unknown key part "bogus"`}},
		{"repeated key part", "rules:\n- {id: a, key: [ip, ip], rate: 1, per: 1s}\n", []string{`f.yaml:2:21: rule "a": key[1]: part "ip" is listed twice`}},
		{"bad header part", "rules:\n- {id: a, key: [\"header:X Y\"], rate: 1, per: 1s}\n", []string{`f.yaml:2:17: rule "a": key: "X Y" is not a valid header name`}},
		{"bad id", "rules:\n- {id: \"a b\", rate: 1, per: 1s}\n", []string{`f.yaml:2:8: rule "a b": id: "a b" may hold only`}},
		{"duplicate id", "rules:\n- {id: a, rate: 1, per: 1s}\n- {id: a, rate: 2, per: 1s}\n",
			[]string{`f.yaml:3:8: rule "a": duplicate id (first at line 2)`}},
		{"duplicate field", "rules:\n- id: a\n  rate: 1\n  rate: 2\n  per: 1s\n", []string{`f.yaml:4:3: rule "a": rate is set twice (first at line 3)`}},
		{"bad path", "rules:\n- {id: a, rate: 1, per: 1s, match: {paths: [\"/ok\", \"/api/\"]}}\n",
			[]string{`f.yaml:2:52: rule "a": match.paths[1]: "/api/" ends with /`}},
		{"wildcard mid-path", "rules:\n- {id: a, rate: 1, per: 1s, match: {paths: [\"/a/*/b\"]}}\n",
			[]string{`f.yaml:2:45: rule "a": match.paths[0]: "/a/*/b": * must be the last segment`}},
		{"bad method", "rules:\n- {id: a, rate: 1, per: 1s, match: {methods: [\"GE T\"]}}\n",
			[]string{`f.yaml:2:47: rule "a": match.methods[0]: "GE T" is not an upper-case method name`}},
		{"unknown match field", "rules:\n- {id: a, rate: 1, per: 1s, match: {host: x}}\n", []string{`f.yaml:2:37: rule "a": match: unknown field "host"`}},
		{"bad proxy", "trustedProxies: [10.0.0.1/8, nonsense]\nrules: []\n",
			[]string{`f.yaml:1:18: trustedProxies: "10.0.0.1/8" has bits set past the prefix length (did you mean 10.0.0.0/8?)`,
				`f.yaml:1:30: trustedProxies: "nonsense" is not an IP address or CIDR prefix`}},
		{"bad forwarded header", "forwardedHeader: X-Real-IP\nrules: []\n", []string{`f.yaml:1:18: forwardedHeader: want "X-Forwarded-For" or "Forwarded"`}},
		{"bad ipv6 prefix", "ipv6Prefix: 129\nrules: []\n", []string{`f.yaml:1:13: ipv6Prefix: want 1 to 128 bits, got 129`}},
		{"identity redefines builtin", "identities: {ip: {header: X-IP}}\nrules: []\n", []string{`f.yaml:1:14: identities.ip: "ip" is a built-in key part`}},
		{"identity without header", "identities: {user: {}}\nrules: []\n", []string{`f.yaml:1:20: identities.user: missing header`}},
		{"two bad rules", "rules:\n- {id: a, rate: 0, per: 1s}\n- {id: b, rate: 1, per: 0s}\n",
			[]string{`f.yaml:2:17: rule "a": rate:`, `f.yaml:3:25: rule "b": per: "0s" must be positive`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := Parse("f.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("no error; got %+v", set)
			}
			if set != nil {
				t.Errorf("a Set came back with the error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, not *FileError", err)
			}
			if len(fe.Errors) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(fe.Errors), len(tc.want), err)
			}
			for i, w := range tc.want {
				if got := fe.Errors[i].Error(); !strings.HasPrefix(got, w) {
					t.Errorf("problem %d:\n got %s\nwant %s...", i, got, w)
				}
			}
		})
	}
}

func TestParseErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n")
	for range 30 {
		b.WriteString("- {id: x, rate: 0, per: 1s}\n")
	}
	_, err := Parse("f", []byte(b.String()))
	var fe *FileError
	if !errors.As(err, &fe) || len(fe.Errors) != MaxErrors || fe.More == 0 {
		t.Fatalf("got %v", err)
	}
	if !strings.HasSuffix(err.Error(), "more problems)") {
		t.Errorf("message does not say problems were left out: %q", err.Error()[len(err.Error())-40:])
	}
}

func TestParseLimits(t *testing.T) {
	if _, err := Parse("f", make([]byte, MaxFileBytes+1)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
	in := "rules:\n- {id: a, rate: 1, per: 1s, key: [ip, method, path, route, user, tenant, phone, apikey, \"header:A\"]}\n"
	if _, err := Parse("f", []byte(in)); err == nil || !strings.Contains(err.Error(), "at most 8 entries") {
		t.Errorf("too many key parts: %v", err)
	}
}

// An alias bomb must not make the loader expand it.
func TestParseAliasBomb(t *testing.T) {
	in := "x-a: &a [ip, ip, ip, ip, ip, ip, ip, ip, ip]\nx-b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
		"x-c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nrules:\n- {id: a, rate: 1, per: 1s, key: *c}\n"
	if _, err := Parse("f", []byte(in)); err == nil {
		t.Fatal("accepted")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.yaml")
	if err := os.WriteFile(path, []byte("rules:\n- {id: a, rate: 1, per: 1x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":2:25: ") {
		t.Errorf("error does not name the file and line: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestParsePer(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"1s", 1}, {"1m", 60}, {"15m", 900}, {"10m", 600}, {"1h", 3600}, {"1d", 86400}, {"7d", 604800},
		{"0.5d", 43200}, {"500ms", 0.5}, {"1h30m", 5400}, {"minute", 60}, {"Day", 86400}, {" 2s ", 2},
	}
	for _, tc := range tests {
		if got, err := ParsePer(tc.in); err != nil || got != tc.want {
			t.Errorf("ParsePer(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "d", "-1d", "0d", "0s", "-1s", "1 minute", "infd", "NaNd", "0x10d", "1e400d", "forever"} {
		if got, err := ParsePer(bad); err == nil {
			t.Errorf("ParsePer(%q) = %v, want an error", bad, got)
		}
	}
	for _, tc := range []struct {
		sec  float64
		want string
	}{{1, "1s"}, {60, "1m"}, {900, "15m"}, {3600, "1h"}, {86400, "1d"}, {1.5, "1.5s"}, {90, "90s"}, {0.25, "0.25s"}} {
		if got := FormatPer(tc.sec); got != tc.want {
			t.Errorf("FormatPer(%v) = %q, want %q", tc.sec, got, tc.want)
		}
	}
}
