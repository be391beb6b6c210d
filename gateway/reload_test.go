package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// reloadConfig is the file of TestReloadUnderLoad in one of three
// variants: "a" (two app endpoints), "b" (a /extra route and a response
// header on the main route), "c" (a third app endpoint).
func reloadConfig(variant string, app []string, ws, grpcAddr string) string {
	extra, header := "", ""
	if variant == "b" {
		extra = "  - {name: extra, match: {prefix: /extra}, cluster: app, response_headers: {add: {X-Extra: on}}}\n"
		header = ", response_headers: {add: {X-Variant: b}}"
	}
	eps := `"` + app[0] + `", "` + app[1] + `"`
	if variant == "c" {
		eps += `, "` + app[2] + `"`
	}
	return `version: 1
admin: {address: off}
reload: {watch: false}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes:
  - {name: ws, match: {prefix: /ws}, cluster: ws, streaming: true, timeouts: {idle: 60s}}
  - {name: grpc, match: {prefix: /test.Echo/}, cluster: grpc, streaming: true, timeouts: {idle: 60s}}
` + extra + `  - {name: main, cluster: app` + header + `}
clusters:
  - {name: app, picker: round_robin, endpoints: [` + eps + `]}
  - {name: ws, endpoints: ["` + ws + `"]}
  - {name: grpc, protocol: h2c, endpoints: ["` + grpcAddr + `"]}
`
}

// TestReloadUnderLoad: 500 requests a second (open loop, HTTP/1.1
// keep-alive and h2c in turn), 10 WebSockets and 2 gRPC bidirectional
// streams echoing every 100 ms, and 50 reloads in 10 s cycling through
// three files (a route and a response header added and removed, a third
// endpoint added and removed). No request fails, every upgraded exchange
// still echoes, the generation is 51, and once the WebSockets and streams
// (which hold generation 1) are closed only the current generation is
// left.
func TestReloadUnderLoad(t *testing.T) {
	noLeaks(t)
	app := []string{named(t, "a"), named(t, "b"), named(t, "c")}
	wsb, grpcAddr := newWSBackend(t), grpcBackend(t)
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, file, reloadConfig("a", app, wsb.addr, grpcAddr))
	g := startFile(t, file)
	addr := g.Addr("web")

	var echoers []*echoer
	var wss []*wsConn
	for i := range 10 {
		ws := dialWS(t, addr, fmt.Sprintf("/ws/%d", i))
		wss = append(wss, ws)
		echoers = append(echoers, runEchoer(fmt.Sprintf("websocket %d", i), 100*time.Millisecond, ws.echo))
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	var streams []*grpcStream
	for i := range 2 {
		st := openStream(t, cc)
		streams = append(streams, st)
		echoers = append(echoers, runEchoer(fmt.Sprintf("stream %d", i), 100*time.Millisecond, st.echo))
	}

	okBody := func(b string) bool { return b == "a /load" || b == "b /load" || b == "c /load" }
	load := startLoad("http://"+addr+"/load", 500, okBody, h1Client(t), h2cClient(t))
	began := time.Now()
	variants := []string{"a", "b", "c"}
	tick := time.NewTicker(200 * time.Millisecond)
	for i := 1; i <= 50; i++ {
		<-tick.C
		writeFile(t, file, reloadConfig(variants[i%3], app, wsb.addr, grpcAddr))
		if err := g.Reload("test"); err != nil {
			tick.Stop()
			load.Stop()
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	tick.Stop()
	reloading := time.Since(began)
	load.Stop()
	summary := load.verify(t, 2000) // 500/s for 10 s is 5,000; a starved machine still sends 2,000

	var echoes []int64
	for _, e := range echoers {
		if err := e.halt(); err != nil {
			t.Error(err)
		}
		echoes = append(echoes, e.echoes.Load())
	}
	// Alive after the last reload: one more echo each, then a clean close.
	for i, ws := range wss {
		if err := ws.echo("last"); err != nil {
			t.Errorf("websocket %d after the reloads: %v", i, err)
		}
	}
	for i, st := range streams {
		if err := st.echo("last"); err != nil {
			t.Errorf("stream %d after the reloads: %v", i, err)
		}
	}
	if got := g.Generation(); got != 51 {
		t.Errorf("Generation() = %d after 50 reloads, want 51", got)
	}
	// The last file is variant "c" (50 % 3 == 2): three endpoints, no X-Variant.
	c := h1Client(t)
	seen := map[string]bool{}
	for range 6 {
		code, h, body := fetch(t, c, "GET", "http://"+addr+"/extra", nil)
		if code != 200 || h.Get("X-Variant") != "" || h.Get("X-Extra") != "" {
			t.Fatalf("after the last reload (variant c): %d %v %q, want 200 without X-Variant or X-Extra", code, h, body)
		}
		seen[body] = true
	}
	if !seen["c /extra"] {
		t.Errorf("after the last reload (variant c), 6 requests reached %v, want the third endpoint among them", seen)
	}
	live := g.GenerationsLive()
	for i, ws := range wss {
		if err := ws.close(); err != nil {
			t.Errorf("websocket %d: %v", i, err)
		}
	}
	for i, st := range streams {
		if err := st.close(); err != nil {
			t.Errorf("stream %d: %v", i, err)
		}
	}
	eventually(t, 10*time.Second, "GenerationsLive back to 1 once the upgraded exchanges closed", func() bool {
		return g.GenerationsLive() == 1
	})
	t.Logf("50 reloads in %v; load: %s; echoes per WebSocket and stream: %v; generations live before the closes: %d",
		reloading.Round(time.Millisecond), summary, echoes, live)
}

// TestReloadRefusesBadFile: a file naming a cluster that does not exist
// is refused — the error wraps ErrReloadRefused, LastReload lists the
// problem at its line and column — and requests keep the old routes; the
// file fixed, the next reload goes through.
func TestReloadRefusesBadFile(t *testing.T) {
	noLeaks(t)
	a := named(t, "a")
	file := filepath.Join(t.TempDir(), "gateway.yaml")
	const head = "version: 1\nadmin: {address: off}\nreload: {watch: false}\nlisteners: [{name: web, address: \"127.0.0.1:0\"}]\n"
	clusters := `clusters: [{name: app, endpoints: ["` + a + `"]}]` + "\n"
	writeFile(t, file, head+"routes: [{name: main, cluster: app, response_headers: {add: {X-Config: one}}}]\n"+clusters)
	g := startFile(t, file)
	c := h1Client(t)
	url := "http://" + g.Addr("web") + "/x"

	writeFile(t, file, head+"routes: [{name: main, cluster: nope, response_headers: {add: {X-Config: two}}}]\n"+clusters)
	err := g.Reload("test")
	if !errors.Is(err, ErrReloadRefused) {
		t.Fatalf("Reload of a dangling cluster: %v, want an error wrapping ErrReloadRefused", err)
	}
	st := g.LastReload()
	want := file + `:5:32: routes[0].cluster: no cluster is named "nope" (clusters: app)`
	if st.OK || st.Generation != 1 || st.Trigger != "test" || len(st.Errors) != 1 || st.Errors[0] != want {
		t.Fatalf("LastReload() = %+v, want not OK, generation 1, trigger test, errors [%s]", st, want)
	}
	if code, h, body := fetch(t, c, "GET", url, nil); code != 200 || body != "a /x" || h.Get("X-Config") != "one" {
		t.Fatalf("after the refused reload: %d X-Config %q %q, want 200 X-Config one \"a /x\"", code, h.Get("X-Config"), body)
	}
	if got := g.Generation(); got != 1 {
		t.Fatalf("Generation() = %d after a refused reload, want 1", got)
	}

	writeFile(t, file, head+"routes: [{name: main, cluster: app, response_headers: {add: {X-Config: three}}}]\n"+clusters)
	if err := g.Reload("test"); err != nil {
		t.Fatalf("Reload of the fixed file: %v", err)
	}
	if code, h, _ := fetch(t, c, "GET", url, nil); code != 200 || h.Get("X-Config") != "three" || g.Generation() != 2 {
		t.Fatalf("after the fixed file: %d X-Config %q generation %d, want 200 three 2", code, h.Get("X-Config"), g.Generation())
	}
}

// TestReloadConfigMapSymlinkSwap lays the file out as a Kubernetes
// ConfigMap volume does (config.yaml -> ..data/config.yaml, ..data ->
// ..2026_12_01_a) and updates it as the kubelet does: a new timestamped
// directory, a new symlink renamed over ..data, the old directory
// removed. The watch (debounce 50ms) reloads, and a route's response
// changes.
func TestReloadConfigMapSymlinkSwap(t *testing.T) {
	noLeaks(t)
	a := named(t, "a")
	dir := t.TempDir()
	version := func(name, value string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, "config.yaml"), `version: 1
admin: {address: off}
reload: {watch: true, debounce: 50ms}
listeners: [{name: web, address: "127.0.0.1:0"}]
routes: [{name: main, cluster: app, response_headers: {add: {X-Version: `+value+`}}}]
clusters: [{name: app, endpoints: ["`+a+`"]}]
`)
	}
	symlink := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_12_01_a", "a")
	symlink("..2026_12_01_a", "..data")
	symlink("..data/config.yaml", "config.yaml")
	g := startFile(t, filepath.Join(dir, "config.yaml"))
	c := h1Client(t)
	url := "http://" + g.Addr("web") + "/"
	if code, h, _ := fetch(t, c, "GET", url, nil); code != 200 || h.Get("X-Version") != "a" {
		t.Fatalf("before the swap: %d X-Version %q, want 200 a", code, h.Get("X-Version"))
	}

	version("..2026_12_01_b", "b")
	symlink("..2026_12_01_b", "..data_tmp")
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2026_12_01_a")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the swapped ConfigMap's X-Version: b served", func() bool {
		_, h, _ := fetch(t, c, "GET", url, nil)
		return h.Get("X-Version") == "b"
	})
	if st := g.LastReload(); !st.OK || st.Generation != 2 || st.Trigger != "watch" || g.Generation() != 2 {
		t.Fatalf("after the swap: LastReload %+v, Generation %d; want OK, generation 2, trigger watch", st, g.Generation())
	}
}
