package certs

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/imagewarm/peertls"
)

// PeerSigner signs the agents' peer certificates (package
// imagewarm/peertls) with the Manager's current CA. The agents already
// trust that CA for the coordinator; the certificates it signs for peers
// carry neither DNS names nor the server-only usage of the coordinator's
// own serving certificates, so a peer certificate cannot pass for the
// coordinator, nor a serving certificate for a peer.
type PeerSigner struct {
	// Manager holds the current CA. Required.
	Manager *Manager
	// Validity is a certificate's lifetime; default
	// peertls.DefaultValidity.
	Validity time.Duration
	// Clock tells the time; default the real clock.
	Clock clock.PassiveClock
}

var _ dispatch.PeerSigner = (*PeerSigner)(nil)

// SignPeer implements dispatch.PeerSigner. A request it cannot read is
// dispatch.ErrBadCertificateRequest; no CA loaded yet is another error.
func (p *PeerSigner) SignPeer(_ context.Context, csr []byte, node string) (chainPEM, bundlePEM []byte, err error) {
	b := p.Manager.Bundle()
	if b == nil {
		return nil, nil, errors.New("the coordinator has not loaded its CA yet; retry")
	}
	now := time.Now()
	if p.Clock != nil {
		now = p.Clock.Now()
	}
	var chain []*x509.Certificate
	for _, c := range b.Chain {
		if now.Before(c.NotAfter) {
			chain = append(chain, c)
		}
	}
	chainPEM, err = peertls.Sign(peertls.SignRequest{
		CSR: csr, Node: node, CACert: b.CACert, CAKey: b.CAKey, Chain: chain, Validity: p.Validity, Now: now,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", dispatch.ErrBadCertificateRequest, err)
	}
	return chainPEM, b.BundlePEM, nil
}
