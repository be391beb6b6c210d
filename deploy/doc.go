// Package deploy holds no Go code: it is the container image (Dockerfile)
// and the Kubernetes example (kubernetes/) of the gateway. Its test parses
// every manifest and checks the gateway configuration in the ConfigMap with
// config.Parse, and that the manifests agree with it and with the image
// (ports, probes, grace period, mount path), so the example cannot rot.
package deploy
