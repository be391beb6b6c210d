// Package certstore serves TLS certificates that follow their files: a
// certificate rotated on disk (cert-manager, certbot, a Secret volume) is
// served to the next handshake without a configuration reload, while
// connections already open keep theirs.
//
// A Store holds the current certificate set in an atomic pointer, as an
// immutable *tls.Config: a clone of the base configuration (minimum
// version, ALPN, client CAs) with that set as its Certificates. The config
// that TLSConfig returns only has GetConfigForClient, which hands each
// handshake the current one. This is chosen over GetCertificate because:
//
//   - crypto/tls then chooses the certificate itself, as it does with a
//     static Certificates list: by the client's SNI name (exact or
//     wildcard) and by what the client can verify (an ECDSA and an RSA
//     certificate for the same name both work), the first when none
//     fits. No name matching is reimplemented here.
//   - A handshake costs one atomic load and no allocation; the per-set
//     config is built once per Reload or Swap.
//   - Session tickets survive rotations: the per-set configs set no ticket
//     keys, so crypto/tls uses those of the config TLSConfig returns
//     (created and rotated automatically), and a ticket issued before a
//     rotation still resumes after it.
//
// The cost of that choice: fields changed on the config TLSConfig returns
// do not reach handshakes. Configure the base given to New.
//
// Reload re-reads every pair that has a file and keeps, per pair, the old
// certificate serving when the new files cannot be read or do not form a
// pair (a rotation caught between writing the certificate and its key).
// Package filewatch tells when to call it.
package certstore
