// Package peertls is the mutual TLS between agents: the agent side (its
// peer certificate, the tls.Configs of the peer listener and of the peer
// client, the HTTP guard of blobs and the tracker, renewal) and Sign, the
// function the coordinator issues peer certificates with.
//
// The model:
//
//   - Every agent holds a short-lived certificate (DefaultValidity) for its
//     node, issued by the coordinator's CA: subject CN = node name,
//     O = Organization, usages client and server authentication, no SANs.
//     The agent makes the key itself (NewRequest) and sends only a CSR, over
//     its authenticated gRPC link to the coordinator. The coordinator takes
//     the node name from that link's identity, never from the CSR (Sign
//     ignores the CSR's subject and SANs), so an agent cannot obtain a
//     certificate for another node.
//   - The issuance returns the certificate chain and the current trust
//     bundle (the coordinator's CAs); Install makes both current at once.
//     Run renews when two thirds of the validity have passed, and keeps
//     serving the current certificate while renewals fail.
//   - Organization is what tells a peer certificate from the CA's other
//     certificates (the coordinator's serving certificates, for instance):
//     only Sign issues certificates with it, so "verifies against the
//     bundle and carries O = Organization" means "is a Shoal agent".
//   - The peer listener (ServerConfig) asks for a client certificate but
//     does not verify it in the handshake: Guard does, per HTTP request,
//     against the bundle and the clock at that moment. A refusal is then a
//     401 or 403 with a message instead of an opaque TLS alert, and a
//     certificate that expires or a CA that leaves the bundle stops working
//     even on a keep-alive connection opened before. The handshake still
//     proves that the client holds the certificate's key (TLS checks its
//     CertificateVerify signature either way).
//   - Guard can also require the certificate's node to be a live member of
//     the mesh, so that a node that has left (or was removed) is refused
//     before its certificate expires.
//   - The peer client (ClientConfig) presents the agent's certificate and
//     verifies the server's against the bundle, without a hostname check:
//     peers are dialed by IP, and what matters is that only agents take part
//     (blobs are addressed by digest and verified by the fetcher).
package peertls
