package loadgen

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	s := 10 * time.Second
	for _, tc := range []struct {
		spec  string
		rates []float64
	}{
		{"100", []float64{100}},
		{" 100 ", []float64{100}},
		{"50:200:25", []float64{50, 75, 100, 125, 150, 175, 200}},
		{"50:60:25", []float64{50}}, // to not reached: from only
		{"200:50:50", []float64{200, 150, 100, 50}},
		{"0.1:0.3:0.1", []float64{0.1, 0.2, 0.30000000000000004}},
		{"50,100,200", []float64{50, 100, 200}},
		{"7:7:1", []float64{7}},
	} {
		steps, err := ParseRate(tc.spec, s)
		if err != nil {
			t.Errorf("ParseRate(%q): %v", tc.spec, err)
			continue
		}
		var rates []float64
		for _, st := range steps {
			rates = append(rates, st.Rate)
			if st.Duration != s {
				t.Errorf("ParseRate(%q): step duration %v, want %v", tc.spec, st.Duration, s)
			}
		}
		if !reflect.DeepEqual(rates, tc.rates) {
			t.Errorf("ParseRate(%q) = %v, want %v", tc.spec, rates, tc.rates)
		}
	}
}

func TestParseRateErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", `"" is not a rate`},
		{"abc", `"abc" is not a rate`},
		{"0", `"0" is not a rate`},
		{"-5", `"-5" is not a rate`},
		{"50,,100", `"" is not a rate`},
		{"50:100", "a ramp is from:to:by"},
		{"50:100:0", `"0" is not a rate`},
		{"1:1000000:1", "want at most 10000"},
		{"NaN", `"NaN" is not a rate`},
	} {
		_, err := ParseRate(tc.spec, time.Second)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRate(%q) error %v, want ErrConfig containing %q", tc.spec, err, tc.want)
		}
	}
	if _, err := ParseRate("100", 0); err == nil {
		t.Error("ParseRate with a zero step duration: no error")
	}
}

func TestParseVars(t *testing.T) {
	v, err := ParseVars("user=1000, region = 4")
	if err != nil || !reflect.DeepEqual(v, map[string]int{"user": 1000, "region": 4}) {
		t.Errorf("ParseVars = %v, %v", v, err)
	}
	for _, tc := range []struct{ spec, want string }{
		{"user", "want name=N"},
		{"user=x", "want name=N"},
		{"user=0", "want 1 to"},
		{"user=1,user=2", "user appears twice"},
		{"seq=10", "sequence number"},
		{"1x=10", "a name is a letter"},
	} {
		_, err := ParseVars(tc.spec)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseVars(%q) error %v, want ErrConfig containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestParseClasses(t *testing.T) {
	c, err := ParseClasses("critical=0.3,sheddable=0.7")
	want := []Class{{"critical", 0.3}, {"sheddable", 0.7}}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Errorf("ParseClasses = %v, %v; want %v", c, err, want)
	}
	for _, tc := range []struct{ spec, want string }{
		{"critical", "want name=share"},
		{"critical=0.8,sheddable=0.3", "sum to 1.1"},
		{"critical=0", "want a share in (0, 1]"},
		{"critical=1.5", "want a share in (0, 1]"},
		{"critical=0.1,critical=0.2", "appears twice"},
		{"=0.5", "want a non-empty header value"},
	} {
		_, err := ParseClasses(tc.spec)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseClasses(%q) error %v, want ErrConfig containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestParseTargets(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "order.json"), []byte(`{"id": {{seq}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	file := `# the user pages
GET http://127.0.0.1:8080/users/{{user}} weight=3
Authorization: Bearer abc
X-Two: a
X-Two: b

# an order, from a file
POST http://127.0.0.1:8080/orders
Content-Type: application/json
@order.json
# comment after the body

POST https://example.test/search
<<
{"q": "x",

 "page": {{seq}}}
# not a comment inside a body
>>
` + "\r\nHEAD http://127.0.0.1:8080/\r\n" // CRLF line ends are read as LF
	got, err := ParseTargets(filepath.Join(dir, "t.txt"), []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Method: "GET", URL: "http://127.0.0.1:8080/users/{{user}}", Weight: 3,
			Header: map[string][]string{"Authorization": {"Bearer abc"}, "X-Two": {"a", "b"}}},
		{Method: "POST", URL: "http://127.0.0.1:8080/orders",
			Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id": {{seq}}}`)},
		{Method: "POST", URL: "https://example.test/search", Header: map[string][]string{},
			Body: []byte("{\"q\": \"x\",\n\n \"page\": {{seq}}}\n# not a comment inside a body")},
		{Method: "HEAD", URL: "http://127.0.0.1:8080/", Header: map[string][]string{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseTargets:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseTargetsErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"", "t.txt: no targets"},
		{"# only a comment\n", "t.txt: no targets"},
		{"GET\n", "t.txt:1: want METHOD URL [weight=N]"},
		{"\n\nGET /relative\n", "t.txt:3: URL \"/relative\": want an http:// or https:// URL"},
		{"GET http:// \n", "t.txt:1: URL \"http://\" has no host"},
		{"G(T http://h/\n", `t.txt:1: "G(T" is not an HTTP method`},
		{"GET http://h/ weight=0\n", `t.txt:1: "weight=0": want weight=N`},
		{"GET http://h/ w=2\n", `t.txt:1: "w=2": want weight=N`},
		{"GET http://h/ a b\n", "t.txt:1: want METHOD URL"},
		{"GET http://h/\nno colon here\n", `t.txt:2: "no colon here": want a header line`},
		{"GET http://h/\nBad Name: x\n", `t.txt:2: "Bad Name: x": want a header line`},
		{"GET http://h/\n@missing.json\n", "t.txt:2: body: "},
		{"GET http://h/\n@\n", "t.txt:2: @ without a file name"},
		{"GET http://h/\n<<\nbody\n", "t.txt:2: the body opened by << has no line >>"},
		{"GET http://h/\n<<\nbody\n>>\nX-After: 1\n", `t.txt:5: "X-After: 1" after the body`},
		{"GET http://h/\nA: 1\n\nPUT\n", "t.txt:4: want METHOD URL"},
	} {
		_, err := ParseTargets("dir/t.txt", []byte(tc.file))
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTargets(%q) error %v, want ErrConfig containing %q", tc.file, err, tc.want)
		}
	}
}
