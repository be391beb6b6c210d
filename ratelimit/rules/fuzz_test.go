package rules

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the loader: it must never panic, must
// return either a Set that validates or a *FileError whose every problem
// names the file, and never both.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/seed.json", "testdata/full.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "rules: []", "rules:\n- {id: a, rate: 1, per: 1s}\n", "[1, 2]", "rules: [*a]", "x-a: &a {id: a}\nrules: [{<<: *a, rate: 1, per: 1d}]",
		"rules:\n- {id: a, key: [user, ip, \"header:X\"], rate: 1, per: 1s, match: {methods: [get], paths: [\"/a/{b}/*\"]}}\n",
		"trustedProxies: [10.0.0.0/8, \"::1\"]\nrules: []", "identities: {u: X-U}\nrules: [{id: a, key: u, rate: 1, per: 1}]",
		"rules: [{id: a, rate: 1e308, per: 1e-308}]", "rules: [{id: a, rate: 4294967296, per: 1s}]",
		"rules: [{id: a, rate: 1, per: 0.000000001d, burst: 9007199254740993}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse("fuzz.yaml", data)
		if (set == nil) == (err == nil) {
			t.Fatalf("set %v and err %v", set, err)
		}
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || len(fe.Errors) == 0 || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %T %v", err, err)
			}
			for _, e := range fe.Errors {
				if !strings.HasPrefix(e.Error(), "fuzz.yaml:") || e.Msg == "" {
					t.Fatalf("problem without file or reason: %q", e.Error())
				}
			}
			return
		}
		if err := set.Validate(); err != nil {
			t.Fatalf("loaded set does not validate: %v", err)
		}
		for i := range set.Rules {
			r := &set.Rules[i]
			if r.RequestCost() > r.Capacity() || r.Capacity() < 1 {
				t.Fatalf("rule %q: cost %d capacity %d", r.ID, r.RequestCost(), r.Capacity())
			}
		}
	})
}
