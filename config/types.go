package config

import (
	"crypto/tls"
	"regexp"

	"github.com/spillwayhq/spillway/balancer"
)

// These structs are the one source of the file format: the decoder, the
// defaults, docs/CONFIG.md and docs/config.schema.json all come from their
// tags (see the package doc for what each tag means). Fields without a yaml
// tag, or tagged yaml:"-", are filled by Load from the others.

// Config is a whole gateway configuration file.
type Config struct {
	Version   int        `yaml:"version" doc:"Format version of the file; must be 1." required:"true"`
	Admin     Admin      `yaml:"admin" doc:"The admin endpoint (status, metrics)."`
	Listeners []Listener `yaml:"listeners" doc:"Where the gateway accepts connections; at least one." required:"true" min:"1"`
	Routes    []Route    `yaml:"routes" doc:"HTTP routes, tried in file order: the first whose match fits a request takes it; a request no route takes gets a 404."`
	Clusters  []Cluster  `yaml:"clusters" doc:"Groups of upstream endpoints that routes and tcp listeners send to."`
	Drain     Drain      `yaml:"drain" doc:"What SIGTERM does: fail readiness, keep serving for delay, then stop within timeout."`
	Reload    Reload     `yaml:"reload" doc:"Hot reload of this file (also on SIGHUP and POST /reload on the admin endpoint)."`
	Overload  Overload   `yaml:"overload" doc:"The gateway's protection of itself, over all listeners: connections, TLS handshakes, heap and goroutines."`
	RateLimit RateLimit  `yaml:"ratelimit" doc:"Where the routes' rate-limit state lives (the rules are the routes'): this process's memory, or Redis shared by every gateway using it."`

	file string     // the name Load or Parse was given
	pos  *positions // where each decoded value was written
}

// Admin is the admin endpoint.
type Admin struct {
	Address string   `yaml:"address" doc:"host:port of the admin endpoint; \"\" or \"off\" turns it off (stored as \"\")." default:"127.0.0.1:9901" kind:"listen-or-off"`
	Token   string   `yaml:"token" doc:"Bearer token every admin request but GET /live and /ready must carry (Authorization: Bearer …); required when address is not a loopback address; usually ${ENV} or file:." secret:"true"`
	Hosts   []string `yaml:"hosts" doc:"Host header values the admin endpoint answers besides localhost, loopback addresses and its own address (a guard against DNS rebinding)." kind:"host"`
	Metrics bool     `yaml:"metrics" doc:"Serve Prometheus metrics at /metrics and count them on the request path; false: neither." default:"true"`
}

// Drain is the shutdown sequence started by SIGTERM (or SIGINT).
type Drain struct {
	Delay   Duration `yaml:"delay" doc:"After SIGTERM, readiness fails at once and the listeners keep accepting for this long, answering with Connection: close and sending HTTP/2 GOAWAY (Kubernetes removes a terminating pod from its endpoints a few seconds after SIGTERM; set about 5s there)." default:"0s"`
	Timeout Duration `yaml:"timeout" doc:"Then the listeners and idle connections close and in-flight requests may run this long before their connections are closed; the process then exits 0." default:"10s" min:"1ms"`
}

// Reload is how the gateway follows its config file.
type Reload struct {
	Watch    bool     `yaml:"watch" doc:"Watch the file's directory and reload when the file changes (a Kubernetes ConfigMap's ..data symlink swap included)." default:"true"`
	Debounce Duration `yaml:"debounce" doc:"Quiet time after the last change before a watched change is reloaded (editors and kubelet write in several steps)." default:"500ms" min:"1ms"`
}

// Overload is the gateway's self-protection.
type Overload struct {
	MaxConnections int      `yaml:"max_connections" doc:"Most client connections open at once over every listener (beyond it a new connection is closed at once); 0: half the process's open-file limit." default:"0" min:"0"`
	HandshakeRate  float64  `yaml:"tls_handshakes_per_second" doc:"Most TLS handshakes started per second over every listener (bursts of as many); a connection beyond it is closed before its handshake; 0: unlimited." default:"0" min:"0"`
	HeapSoft       Bytes    `yaml:"heap_soft" doc:"Live heap above which keep-alive is turned off (each HTTP/1.1 response closes its connection); 0: never." default:"0"`
	HeapHard       Bytes    `yaml:"heap_hard" doc:"Live heap above which new connections are refused as well; 0: never." default:"0"`
	GoroutinesSoft int      `yaml:"goroutines_soft" doc:"Goroutines above which keep-alive is turned off; 0: never." default:"0" min:"0"`
	GoroutinesHard int      `yaml:"goroutines_hard" doc:"Goroutines above which new connections are refused as well; 0: never." default:"0" min:"0"`
	Interval       Duration `yaml:"interval" doc:"How often the heap and goroutines are measured." default:"250ms" min:"1ms"`
}

// Listener is one address the gateway listens on.
type Listener struct {
	Name           string       `yaml:"name" doc:"Name used in logs and metrics." default:"listener-<index>" kind:"name"`
	Address        string       `yaml:"address" doc:"host:port to listen on (\":8080\": every interface; port 0: any free port)." required:"true" kind:"listen"`
	Protocol       string       `yaml:"protocol" doc:"http: an HTTP/1.1 and HTTP/2 proxy with routes; tcp: each connection is balanced over one cluster." default:"http" enum:"http,tcp"`
	Cluster        string       `yaml:"cluster" doc:"The cluster a tcp listener sends connections to; required for tcp, not allowed for http." kind:"name"`
	Routes         []string     `yaml:"routes" doc:"Names of the routes this http listener serves, in the routes' file order; absent: every route." kind:"name"`
	TLS            *ListenerTLS `yaml:"tls" doc:"TLS termination; absent: plaintext."`
	HTTP2          bool         `yaml:"http2" doc:"Serve HTTP/2: h2 through ALPN with TLS, h2c with prior knowledge without (the h2c Upgrade header is never honoured)." default:"true"`
	HTTP2Engine    string       `yaml:"http2_engine" doc:"The HTTP/2 server: wire (Spillway's own, on x/net's framer and HPACK: no goroutine per stream) or std (x/net/http2's server). Both forward through the same path; std is there to fall back on." default:"wire" enum:"wire,std"`
	TrustedProxies []string     `yaml:"trusted_proxies" doc:"Peers (IP addresses or CIDR prefixes) whose X-Forwarded-* and Forwarded headers are kept and extended; from any other peer they are replaced." kind:"cidr"`
	Limits         Limits       `yaml:"limits" doc:"Protection against slow and oversized clients."`
	ProxyProtocol  *ProxyProto  `yaml:"proxy_protocol" doc:"Accept a PROXY protocol (v1 or v2) header from the listed peers (a load balancer in front), so the client's address is the one it sends; absent: never."`
	ReasonHeader   bool         `yaml:"reason_header" doc:"Send the Spillway-Reason header (the reason code, such as ratelimit:per-ip, breaker-open, no-route or upstream-timeout) on the gateway's own answers on this listener; false: left out, as for clients that should not see it (the access log and spillway_refusals_total keep the reason)." default:"true"`

	tls       *tls.Config // TLS made by Load; nil without
	certFiles []CertFiles // the certificates' files, when given as file: references
}

// ProxyProto says whose PROXY protocol headers a listener accepts.
type ProxyProto struct {
	From     []string `yaml:"from" doc:"Peers (IP addresses or CIDR prefixes) allowed to send a PROXY header; from any other peer the connection is served as is (a header from it is not read and fails as a bad request)." required:"true" min:"1" kind:"cidr"`
	Required bool     `yaml:"required" doc:"A connection from those peers without a header is closed; false: it is served with the peer's own address (load balancers' health checks often send none)." default:"false"`
}

// ListenerTLS is a listener's TLS termination.
type ListenerTLS struct {
	Certificates []Certificate `yaml:"certificates" doc:"Certificates, chosen by the client's SNI name (the first when none fits)." required:"true" min:"1"`
	MinVersion   string        `yaml:"min_version" doc:"Oldest TLS version accepted." default:"1.2" enum:"1.2,1.3"`
	ALPN         []string      `yaml:"alpn" doc:"Protocols offered through ALPN, preferred first; the default leaves h2 out when http2 is false." default:"h2,http/1.1" kind:"alpn"`
	ClientCA     string        `yaml:"client_ca" doc:"CA certificates in PEM (usually file:/path/to/ca.pem) that client certificates must chain to (mutual TLS); absent: no client certificate is asked for." file:"true"`
	ClientAuth   string        `yaml:"client_auth" doc:"With client_ca: required (a client without a valid certificate is refused in the handshake) or optional (one without a certificate is served; an invalid one is refused)." default:"required" enum:"required,optional"`
}

// CertFiles are the files a certificate was read from ("" for one given
// inline), for reloading it when they change.
type CertFiles struct{ Cert, Key string }

// Certificate is one certificate chain and its private key, in PEM.
type Certificate struct {
	Cert string `yaml:"cert" doc:"The certificate chain in PEM, usually file:/path/to/cert.pem." required:"true" file:"true"`
	Key  string `yaml:"key" doc:"The private key in PEM, usually file:/path/to/key.pem or ${ENV}." required:"true" secret:"true"`
}

// Limits bounds what one client may cost a listener.
type Limits struct {
	HeaderTimeout  Duration `yaml:"header_timeout" doc:"Longest time to read a request's line and headers (then 408)." default:"10s" min:"1ms"`
	IdleTimeout    Duration `yaml:"idle_timeout" doc:"Longest wait for the next request on a keep-alive connection." default:"75s" min:"1ms"`
	BodyInactivity Duration `yaml:"body_inactivity" doc:"Longest wait for the next bytes of a request body, and for a response write to progress; re-armed on every read and write, so a slow upload is cut and a large fast one is not." default:"60s" min:"1ms"`
	MaxHeaderBytes Bytes    `yaml:"max_header_bytes" doc:"Largest request line plus headers (then 431)." default:"32KiB" min:"1KiB" max:"16MiB"`
	MaxHeaderCount int      `yaml:"max_header_count" doc:"Most header fields in one request (then 431)." default:"100" min:"1" max:"10000"`
	MaxConnections int      `yaml:"max_connections" doc:"Most connections open at once on this listener; 0: unlimited (overload.max_connections still holds)." default:"0" min:"0"`
	MaxPerIP       int      `yaml:"max_connections_per_ip" doc:"Most connections open at once from one client IP address (after the PROXY header, if any); 0: unlimited." default:"0" min:"0"`
	MaxAge         Duration `yaml:"max_connection_age" doc:"Age after which a client connection is asked to go: HTTP/1.1 gets Connection: close on its next response (or is closed when idle), HTTP/2 gets GOAWAY, so long-lived clients rebalance; upgraded connections (WebSocket) are closed at age plus drain.timeout; 0: never." default:"0s"`
	MaxAgeJitter   float64  `yaml:"max_connection_age_jitter" doc:"Spread of max_connection_age, as a fraction: each connection's age limit is drawn uniformly within ± this share, so connections opened together do not leave together." default:"0.1" min:"0" max:"0.5"`
}

// Route sends the requests it matches to a cluster.
type Route struct {
	Name            string    `yaml:"name" doc:"Name used in logs, metrics and listeners' routes lists." default:"route-<index>" kind:"name"`
	Match           Match     `yaml:"match" doc:"Which requests the route takes; absent: every request."`
	Cluster         string    `yaml:"cluster" doc:"The cluster requests are sent to." required:"true" kind:"name"`
	Timeouts        Timeouts  `yaml:"timeouts" doc:"Upstream timeouts (answered 504)."`
	Streaming       bool      `yaml:"streaming" doc:"Long-lived exchanges (server-sent events, gRPC streams, long downloads): timeouts.idle bounds the silence instead of timeouts.request bounding the whole exchange, and they are kept out of the cluster's adaptive limit (bound them with policies.max_concurrent)." default:"false"`
	RequestHeaders  HeaderOps `yaml:"request_headers" doc:"Headers changed on the way upstream."`
	ResponseHeaders HeaderOps `yaml:"response_headers" doc:"Headers changed on the way back."`
	Rewrite         Rewrite   `yaml:"rewrite" doc:"Path rewriting before forwarding."`
	MaxBodyBytes    Bytes     `yaml:"max_body_bytes" doc:"Largest request body (then 413); 0: unlimited." default:"0"`
	Upgrades        []string  `yaml:"upgrades" doc:"Upgrade tokens forwarded (WebSocket), stored lower-cased; any other Upgrade request is refused." default:"websocket" kind:"token"`
	AccessLog       string    `yaml:"access_log" doc:"One JSON line per request through log/slog (route, cluster, endpoint, method, host, status — 499 when the client left first —, reason code, bytes, duration, upstream duration, client IP, request id, attempts): off, full (every request) or sampled (a share of them, access_log_sample)." default:"off" enum:"off,full,sampled"`
	AccessSample    float64   `yaml:"access_log_sample" doc:"With access_log: sampled, the share of requests logged, in (0, 1]." default:"0.01" min:"0.000001" max:"1"`
	GRPC            bool      `yaml:"grpc" doc:"The route carries gRPC: refusals on it (rate limit, admission, deadline, breaker) are answered as gRPC statuses (trailers-only grpc-status RESOURCE_EXHAUSTED, UNAVAILABLE or DEADLINE_EXCEEDED, with grpc-retry-pushback-ms), not problem+json." default:"false"`
	Policies        Policies  `yaml:"policies" doc:"The route's policy chain: class, deadline, rate-limit rules, retries (admission and the breaker are the cluster's); absent: retries with a budget and nothing else."`
}

// Match says which requests a route takes. Every condition given must hold.
type Match struct {
	Host    string        `yaml:"host" doc:"Host, exact (api.example.com) or a wildcard for one or more labels (*.example.com); the port is ignored." kind:"host"`
	Hosts   []string      `yaml:"hosts" doc:"Several hosts, any of which matches; not with host." kind:"host"`
	Path    string        `yaml:"path" doc:"Exact path; only one of path, prefix and regex." kind:"path"`
	Prefix  string        `yaml:"prefix" doc:"Path prefix, on segment boundaries: /api matches /api, /api/ and /api/users, not /apiv2; a prefix ending in / matches everything under it." kind:"path"`
	Regex   string        `yaml:"regex" doc:"Regular expression (RE2 syntax) the whole path must match." kind:"regex"`
	Methods []string      `yaml:"methods" doc:"Request methods, any of which matches (upper-cased)." kind:"method"`
	Headers []HeaderMatch `yaml:"headers" doc:"Header conditions, all of which must hold."`

	// PathRegexp is Regex compiled, anchored at both ends; nil without Regex.
	PathRegexp *regexp.Regexp `yaml:"-"`
}

// HeaderMatch is one condition on a request header.
type HeaderMatch struct {
	Name    string `yaml:"name" doc:"Header name." required:"true" kind:"token"`
	Value   string `yaml:"value" doc:"The header's value, exactly; only one of value, regex and present."`
	Regex   string `yaml:"regex" doc:"Regular expression (RE2) the whole value must match." kind:"regex"`
	Present bool   `yaml:"present" doc:"true: the header must be present, any value; false: it must be absent."`

	// ValueRegexp is Regex compiled, anchored at both ends; nil without Regex.
	ValueRegexp *regexp.Regexp `yaml:"-"`
	// HasPresent records that present: was written (false then means absent).
	HasPresent bool `yaml:"-"`
}

// Timeouts bounds one route's upstream exchange.
type Timeouts struct {
	Connect        Duration `yaml:"connect" doc:"Longest time to connect to an endpoint (TLS handshake included)." default:"5s" min:"1ms"`
	ResponseHeader Duration `yaml:"response_header" doc:"Longest wait for the response's headers once the request is sent." default:"30s" min:"1ms"`
	Request        Duration `yaml:"request" doc:"Longest whole exchange, first byte to last; not used when streaming." default:"60s" min:"1ms"`
	Idle           Duration `yaml:"idle" doc:"With streaming: longest silence in either direction." default:"60s" min:"1ms"`
}

// HeaderOps changes headers.
type HeaderOps struct {
	Add    map[string]string `yaml:"add" doc:"Headers set, replacing any of the same name (values may be ${ENV} or file: references, and are redacted)." kind:"token" secret:"true"`
	Remove []string          `yaml:"remove" doc:"Headers removed." kind:"token"`
}

// Rewrite changes the path before forwarding.
type Rewrite struct {
	Prefix string `yaml:"prefix" doc:"Replaces the part of the path that match.prefix matched (requires match.prefix)." kind:"path"`
}

// Cluster is a group of endpoints and how to balance over them.
type Cluster struct {
	Name           string                `yaml:"name" doc:"Name that routes and tcp listeners refer to." required:"true" kind:"name"`
	Endpoints      []Endpoint            `yaml:"endpoints" doc:"Static endpoints: \"host:port\" strings or mappings; only one of endpoints and discovery. The balancer takes them in address order, as discovery emits them (round robin rotates in that order)."`
	Discovery      *Discovery            `yaml:"discovery" doc:"Endpoints from DNS or from a file, kept up to date."`
	Picker         string                `yaml:"picker" doc:"How an endpoint is chosen for each request or connection (see the balancer package); least_request is two random choices by requests in flight, weighted." default:"least_request" enum:"least_request,round_robin,random,weighted_random,smooth_weighted,least_outstanding,peak_ewma,ring_hash,maglev"`
	LeastRequest   *LeastRequest         `yaml:"least_request" doc:"Options of picker least_request."`
	RingHash       *RingHash             `yaml:"ring_hash" doc:"Options of picker ring_hash."`
	Maglev         *Maglev               `yaml:"maglev" doc:"Options of picker maglev."`
	HashKey        *HashKey              `yaml:"hash_key" doc:"What a request hashes on with ring_hash and maglev (required there); the first source present is used, else the request is balanced at random."`
	SlowStart      Duration              `yaml:"slow_start" doc:"Linear weight ramp for an endpoint back in service or newly added; 0: none." default:"0s"`
	SlowStartMin   float64               `yaml:"slow_start_min" doc:"Weight fraction at the start of the ramp, in (0, 1]." default:"0.1" min:"0.000001" max:"1"`
	PanicThreshold float64               `yaml:"panic_threshold" doc:"Healthy share below which every endpoint is used, healthy or not; 0 or negative: never." default:"0.5" max:"1"`
	LatencyDecay   Duration              `yaml:"latency_decay" doc:"Time constant of the latency estimate peak_ewma uses." default:"10s" min:"1ms"`
	Health         Health                `yaml:"health" doc:"Active and passive health checking."`
	Protocol       string                `yaml:"protocol" doc:"Upstream protocol: http1, http2 (h2 over TLS: needs tls) or h2c (HTTP/2 without TLS, prior knowledge)." default:"http1" enum:"http1,http2,h2c"`
	TLS            *ClusterTLS           `yaml:"tls" doc:"TLS to the endpoints; absent: plaintext."`
	Pool           Pool                  `yaml:"pool" doc:"Upstream connection pool, per endpoint."`
	ProxyProtocol  string                `yaml:"proxy_protocol" doc:"PROXY protocol header sent first on every connection a tcp listener opens to the endpoints, carrying the client's address: off, v1 (text) or v2 (binary); only for clusters of tcp listeners." default:"off" enum:"off,v1,v2"`
	Admission      *Admission            `yaml:"admission" doc:"Adaptive admission of the routes' requests to this cluster: a concurrency limit found from latency, shared by class, with a wait queue; absent: none."`
	Breaker        *Breaker              `yaml:"breaker" doc:"Circuit breaker of the cluster, with an optional fallback; absent: none."`
	table          balancer.TableBuilder // the ring or Maglev builder, made once by Load
	tls            *tls.Config           // TLS made by Load; nil without
}

// Endpoint is one static endpoint; a plain "host:port" string sets Address.
type Endpoint struct {
	Address string `yaml:"address" doc:"host:port of the endpoint." required:"true" kind:"endpoint" shorthand:"true"`
	Weight  int    `yaml:"weight" doc:"Relative share of traffic." default:"1" min:"1" max:"1000000"`
	Zone    string `yaml:"zone" doc:"Zone label (kept in the endpoint's metadata as zone)."`
}

// Discovery is a dynamic endpoint source: DNS or a file, one of them.
type Discovery struct {
	DNS     string   `yaml:"dns" doc:"Name to resolve (fully qualified; no search domains); only one of dns and file." kind:"dnsname"`
	Port    int      `yaml:"port" doc:"Port of every endpoint with dns (A/AAAA); 0 with srv." min:"0" max:"65535"`
	SRV     bool     `yaml:"srv" doc:"Resolve SRV records (_service._proto.name), which carry ports and weights." default:"false"`
	Network string   `yaml:"network" doc:"Address families without srv: ip (A and AAAA), ip4 or ip6." default:"ip" enum:"ip,ip4,ip6"`
	MinTTL  Duration `yaml:"min_ttl" doc:"Resolve at most this often, whatever the answer's TTL." default:"5s" min:"1ms"`
	MaxTTL  Duration `yaml:"max_ttl" doc:"Resolve at least this often." default:"5m" min:"1ms"`
	File    string   `yaml:"file" doc:"Path of an endpoints file (YAML or JSON list of {addr, weight, meta}), relative to this file's directory; only one of dns and file." kind:"filepath"`
	Poll    Duration `yaml:"poll" doc:"How often the file is looked at." default:"2s" min:"1ms"`
}

// LeastRequest holds the options of picker least_request.
type LeastRequest struct {
	Choices int     `yaml:"choices" doc:"Candidates drawn per pick." default:"2" min:"1" max:"64"`
	Bias    float64 `yaml:"active_request_bias" doc:"How strongly requests in flight lower an endpoint's weight (Envoy's active_request_bias); matters only with unequal weights." default:"1" min:"0.000001"`
}

// RingHash holds the options of picker ring_hash.
type RingHash struct {
	MinSize         int `yaml:"min_size" doc:"Least number of points on the ring." default:"1024" min:"1" max:"8388608"`
	MaxSize         int `yaml:"max_size" doc:"Most points on the ring." default:"8388608" min:"1" max:"8388608"`
	PointsPerWeight int `yaml:"points_per_weight" doc:"When set, every endpoint gets weight × this many points (classic consistent hashing); 0: sized from min_size." default:"0" min:"0" max:"8388608"`
}

// Maglev holds the options of picker maglev.
type Maglev struct {
	TableSize int `yaml:"table_size" doc:"Entries of the lookup table, a prime." default:"65537" min:"2" max:"5000011"`
}

// HashKey is the request key of ring_hash and maglev.
type HashKey struct {
	Header   string `yaml:"header" doc:"A request header whose value is the key." kind:"token"`
	Cookie   string `yaml:"cookie" doc:"A cookie whose value is the key." kind:"token"`
	ClientIP bool   `yaml:"client_ip" doc:"The peer's IP address is the key." default:"false"`
	Path     bool   `yaml:"path" doc:"The URL path is the key." default:"false"`
}

// Health is a cluster's health checking.
type Health struct {
	Active  *ActiveCheck `yaml:"active" doc:"Active checks: each endpoint is probed on a timer; absent: none."`
	Outlier *Outlier     `yaml:"outlier" doc:"Passive checks: endpoints failing real requests are ejected for a while; absent: none."`
}

// ActiveCheck is an active health check.
type ActiveCheck struct {
	Type             string   `yaml:"type" doc:"http: a request expecting an accepted status; tcp: a connection; grpc: grpc.health.v1 Check." default:"http" enum:"http,tcp,grpc"`
	Path             string   `yaml:"path" doc:"With http: the request path (and query)." default:"/" kind:"path"`
	Method           string   `yaml:"method" doc:"With http: the request method." default:"GET" kind:"method"`
	Host             string   `yaml:"host" doc:"With http: the Host header; absent: the endpoint's address."`
	Expected         []string `yaml:"expected" doc:"With http: accepted statuses, codes (204) or ranges (\"200-399\")." default:"200-399" kind:"status"`
	Service          string   `yaml:"service" doc:"With grpc: the service asked about; absent: the whole server."`
	Interval         Duration `yaml:"interval" doc:"Time between the starts of two checks of one endpoint." default:"2s" min:"1ms"`
	Timeout          Duration `yaml:"timeout" doc:"Longest a check may take; absent or 0: 1s, or interval if shorter." default:"0s"`
	Jitter           float64  `yaml:"jitter" doc:"Spread of each wait, as a fraction of interval; 0 or negative: none." default:"0.1" max:"0.999999"`
	Fall             int      `yaml:"fall" doc:"Failed checks in a row that mark an endpoint unhealthy." default:"3" min:"1" max:"1000"`
	Rise             int      `yaml:"rise" doc:"Passed checks in a row that mark it healthy again." default:"2" min:"1" max:"1000"`
	InitiallyHealthy bool     `yaml:"initially_healthy" doc:"Endpoints take traffic before their first check; false: only once one passed." default:"false"`
}

// Outlier is passive health checking (outlier detection).
type Outlier struct {
	Consecutive5xx            int      `yaml:"consecutive_5xx" doc:"5xx answers in a row (gateway failures included) that eject an endpoint; 0 or negative: never." default:"5" max:"100000"`
	ConsecutiveGatewayFailure int      `yaml:"consecutive_gateway_failure" doc:"Gateway failures (502, 503, 504, connect errors, timeouts) in a row that eject an endpoint; 0 or negative: never." default:"5" max:"100000"`
	BaseEjectionTime          Duration `yaml:"base_ejection_time" doc:"Length of a first ejection; the n-th lasts n times as long, up to max_ejection_time." default:"30s" min:"1ms"`
	MaxEjectionTime           Duration `yaml:"max_ejection_time" doc:"Longest ejection; absent or 0: 300s, or base_ejection_time if longer." default:"0s"`
	MaxEjectionPercent        int      `yaml:"max_ejection_percent" doc:"Largest share of endpoints ejected at once, in percent (one may always be)." default:"10" min:"1" max:"100"`
	Interval                  Duration `yaml:"interval" doc:"Time in service that earns back one step of the ejection multiplier." default:"10s" min:"1ms"`
}

// ClusterTLS is TLS from the gateway to a cluster's endpoints.
type ClusterTLS struct {
	ServerName         string `yaml:"server_name" doc:"Name to verify (and send as SNI); absent: the endpoint's host."`
	CA                 string `yaml:"ca" doc:"CA certificates in PEM, usually file:/path/to/ca.pem; absent: the system's roots." file:"true"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify" doc:"Accept any certificate (tests only)." default:"false"`
	Cert               string `yaml:"cert" doc:"Client certificate chain in PEM that the gateway presents to the endpoints (mutual TLS), usually file:/path/to/cert.pem; with key." file:"true"`
	Key                string `yaml:"key" doc:"The client certificate's private key in PEM, usually file:/path/to/key.pem or ${ENV}; with cert." secret:"true"`
}

// Pool sizes the upstream connection pool.
type Pool struct {
	MaxIdlePerEndpoint  int      `yaml:"max_idle_per_endpoint" doc:"Idle keep-alive connections kept per endpoint." default:"64" min:"0" max:"100000"`
	MaxConnsPerEndpoint int      `yaml:"max_conns_per_endpoint" doc:"Most connections per endpoint, busy or idle; 0: unlimited." default:"0" min:"0"`
	IdleTimeout         Duration `yaml:"idle_timeout" doc:"How long an idle connection is kept." default:"90s" min:"1ms"`
}
