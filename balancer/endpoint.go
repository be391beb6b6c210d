package balancer

// Endpoint is a backend as discovery reports it: its address (its identity
// within a set), its weight and optional labels. Endpoint sets, health
// checkers and discovery sources all speak in Endpoints and addresses.
type Endpoint struct {
	// Addr is "host:port" (or any string the transport dials); two
	// endpoints with the same Addr are the same endpoint.
	Addr string
	// Weight is the endpoint's relative share of traffic, ≥ 1; 0 means 1.
	Weight int
	// Meta holds optional labels (zone, version); nil is fine. It is not
	// copied: do not modify it after handing it over.
	Meta map[string]string
}

// weight returns e's weight with the default applied.
func (e Endpoint) weight() int {
	if e.Weight < 1 {
		return 1
	}
	return e.Weight
}
