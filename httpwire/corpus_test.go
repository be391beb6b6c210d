package httpwire

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedCorpora lists the committed seed corpus of each fuzz target: every
// malformed case of the refusal tables and some valid messages, so that
// fuzzing starts next to every rule.
func seedCorpora() map[string]map[string]string {
	req := map[string]string{
		"valid_browser":  string(browserRequest),
		"valid_wrk":      string(wrkRequest),
		"valid_api10":    string(tenFieldRequest),
		"valid_chunked":  crlf("POST /u HTTP/1.1|Host: h|Transfer-Encoding: chunked||5|hello|0||"),
		"valid_absolute": crlf("GET http://h:80/p?q HTTP/1.1|Host: h:80||"),
		"valid_connect":  crlf("CONNECT h:443 HTTP/1.1|Host: h:443||"),
	}
	for _, c := range requestRefusals {
		req["refuse_"+c.name] = crlf(c.head)
	}
	resp := map[string]string{
		"valid_length":  crlf("HTTP/1.1 200 OK|Content-Length: 5||hello"),
		"valid_chunked": crlf("HTTP/1.1 200 OK|Transfer-Encoding: gzip, chunked||"),
		"valid_close":   crlf("HTTP/1.0 200 OK||body"),
		"valid_101":     crlf("HTTP/1.1 101 Switching Protocols|Connection: upgrade|Upgrade: websocket||"),
	}
	for _, c := range responseRefusals {
		resp["refuse_"+c.name] = crlf(c.head)
	}
	chunked := map[string]string{
		"valid_two_chunks": crlf("5|hello|1a;ext=1|abcdefghijklmnopqrstuvwxyz|0||"),
		"valid_trailers":   crlf("2|ab|0|Grpc-Status: 0|Grpc-Message: ok||"),
		"valid_empty":      crlf("0||"),
	}
	for _, c := range chunkedRefusals {
		chunked["refuse_"+c.name] = crlf(c.head)
	}
	return map[string]map[string]string{
		"FuzzParseRequestHead":  req,
		"FuzzParseResponseHead": resp,
		"FuzzChunkedReader":     chunked,
	}
}

// TestFuzzCorpusIsCommitted fails when a case of the tables has no seed
// file in testdata/fuzz, or a different one. HTTPWIRE_WRITE_CORPUS=1
// writes them.
func TestFuzzCorpusIsCommitted(t *testing.T) {
	write := os.Getenv("HTTPWIRE_WRITE_CORPUS") == "1"
	for target, seeds := range seedCorpora() {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, data := range seeds {
			file := filepath.Join(dir, corpusName(name))
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if write {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(file)
			if err != nil || string(got) != want {
				t.Errorf("%s: missing or stale (err %v); run HTTPWIRE_WRITE_CORPUS=1 go test -run FuzzCorpus ./httpwire", file, err)
			}
		}
	}
}

// corpusName turns a case name into a file name.
func corpusName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
}
