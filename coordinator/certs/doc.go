// Package certs is the coordinator's own small PKI, shared by the node-work
// gRPC server and the admission webhook server.
//
// An Authority keeps a self-signed ECDSA P-256 CA in the Secret shoal-ca
// (keys tls.crt, tls.key and bundle.crt, see docs/dev/backbone.md) and
// publishes the trust bundle in the ConfigMap shoal-ca-bundle (key ca.crt),
// which agents mount. Every replica reads the same Secret; the first one to
// find it missing creates it and a replica that loses that race adopts the
// winner's CA. Only the leader rotates: when the CA is within RotateBefore
// of its expiry it makes a new CA, and the bundle becomes the new CA plus
// every previous CA that has not expired yet, so certificates issued by the
// old CA still verify against the new bundle.
//
// Rotation also cross-signs the new CA with the old one (while the old one
// is valid) and stores that cross-signed certificate in tls.crt after the
// CA itself. Serving certificates send it as an intermediate, so a client
// that still holds only the old bundle (a ConfigMap volume takes a while to
// refresh, the webhook caBundle is patched a moment later) can verify a
// leaf issued by the new CA through it.
//
// A Serving holds the serving certificate of one or more TLS servers and
// re-issues it from the current CA when the CA changes or when less than a
// third of its validity remains. A Manager ties it all together: it calls
// Ensure every Interval, feeds the bundle to its Servings and, on the
// leader, keeps the webhook configurations' caBundle and the mesh key
// Secret current.
package certs
