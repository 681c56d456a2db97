package peertls

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Refusal messages of Guard.
const (
	msgNoCertificate  = "peer blobs and the tracker need a client certificate of a Shoal agent, issued by the coordinator's CA"
	msgBadCertificate = "client certificate refused: "
)

// nodeKey is the context key of the verified peer node.
type nodeKey struct{}

// Guard wraps the peer handler (blobs and tracker). A request without a
// verified client identity is refused before next runs:
//
//   - no TLS, or no client certificate: 401 (without WWW-Authenticate: no
//     HTTP authentication scheme would help);
//   - a certificate that does not verify against the current bundle at the
//     clock's now (another CA, expired, no ClientAuth usage, O without
//     Organization): 403 "client certificate refused: <reason>";
//   - a node that alive says is not a live mesh member: 403.
//
// alive may be nil; then only the certificate is checked. On success the
// verified node name is available to next through NodeFrom. Refusals are
// logged at V(2) and every request is counted in
// shoal_agent_peer_tls_requests_total.
func (id *Identity) Guard(next http.Handler, alive func(node string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		node, code, err := id.authorize(r, alive)
		if err != nil {
			id.log.V(2).Info("Refused a peer request", "remoteAddr", r.RemoteAddr, "code", code, "reason", err.Error())
			http.Error(w, err.Error(), code)
			return
		}
		id.m.requests.WithLabelValues(resultAllowed).Inc()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nodeKey{}, node)))
	})
}

// authorize returns the verified peer node of r, or the status code and
// message of its refusal (and counts the refusal).
func (id *Identity) authorize(r *http.Request, alive func(string) bool) (string, int, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		id.m.requests.WithLabelValues(resultNoCertificate).Inc()
		return "", http.StatusUnauthorized, errors.New(msgNoCertificate)
	}
	node, err := id.verifyClient(r.TLS.PeerCertificates)
	if err != nil {
		id.m.requests.WithLabelValues(resultBadCertificate).Inc()
		return "", http.StatusForbidden, errors.New(msgBadCertificate + err.Error())
	}
	if alive != nil && !alive(node) {
		id.m.requests.WithLabelValues(resultNotMember).Inc()
		return "", http.StatusForbidden, fmt.Errorf("node %s is not a live member of the agent mesh", node)
	}
	return node, 0, nil
}

// maxVerified bounds the verified chains a state remembers.
const maxVerified = 4096

// verified is a client chain that verified against a state's bundle.
type verified struct {
	node  string
	until time.Time // the earliest expiry in the chain
}

// verifyClient checks a client's chain against the current bundle. A chain
// that verified before against the same bundle is not checked again until
// it expires: a peer sends the same certificate on every piece request,
// and the signature checks cost about 0.1 ms each.
func (id *Identity) verifyClient(chain []*x509.Certificate) (string, error) {
	st := id.cur.Load()
	if st == nil {
		return "", errors.New("this agent has no trust bundle yet")
	}
	now := id.clock.Now()
	h := sha256.New()
	for _, c := range chain {
		h.Write(c.Raw)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	if v, ok := st.verified.Load(key); ok && now.Before(v.(verified).until) {
		return v.(verified).node, nil
	}
	node, err := verifyPeer(chain, st.roots, now, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return "", err
	}
	until := chain[0].NotAfter
	for _, c := range chain[1:] {
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	if st.nVerified.Add(1) > maxVerified {
		st.verified.Clear()
		st.nVerified.Store(1)
	}
	st.verified.Store(key, verified{node: node, until: until})
	return node, nil
}

// NodeFrom returns the verified peer node of a request Guard let through.
func NodeFrom(ctx context.Context) (string, bool) {
	node, ok := ctx.Value(nodeKey{}).(string)
	return node, ok
}
