package peertls

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Issuer asks the coordinator to sign csrDER; it returns the chain PEM and
// the current trust bundle PEM.
type Issuer func(ctx context.Context, csrDER []byte) (chainPEM, bundlePEM []byte, err error)

// Retry delays of Run: a failed attempt is retried after backoffBase,
// doubling up to backoffMax.
const (
	defaultBackoffBase = time.Second
	defaultBackoffMax  = time.Minute
	// attemptTimeout bounds one call of the Issuer, so that a call that
	// hangs (a half-open connection to the coordinator) does not stop
	// renewals for good.
	attemptTimeout = time.Minute
	// minRenewalWait is the least Run waits after a success. A certificate
	// that is due at once (the coordinator's clock far behind this node's)
	// is then renewed once a minute, not in a tight loop.
	minRenewalWait = time.Minute
)

// Run keeps the identity current until ctx ends: it gets the first
// certificate at once (NewRequest, issue, Install) unless one loaded from
// the state file is not due yet, then renews when two
// thirds of the current certificate's validity have passed. A failed
// attempt is retried with capped exponential backoff (1 s doubling to
// 1 min, with jitter). While renewals fail the agent keeps serving its
// current certificate until it expires, and says so in its log. Run returns
// nil when ctx ends.
func (id *Identity) Run(ctx context.Context, issue Issuer) error {
	if issue == nil {
		return errors.New("peer certificate renewal: no issuer")
	}
	failures := 0
	// A certificate loaded from the state file is kept until it is due.
	if leaf := id.Leaf(); leaf != nil {
		if !id.sleep(ctx, id.renewalDue().Sub(id.clock.Now())) {
			return nil
		}
	}
	for {
		err := id.renew(ctx, issue)
		if ctx.Err() != nil {
			return nil
		}
		var wait time.Duration
		if err != nil {
			failures++
			id.m.renewals.WithLabelValues(resultError).Inc()
			wait = id.backoff(failures)
			id.reportFailure(err, wait)
		} else {
			failures = 0
			id.m.renewals.WithLabelValues(resultOK).Inc()
			wait = max(id.renewalDue().Sub(id.clock.Now()), minRenewalWait)
		}
		if !id.sleep(ctx, wait) {
			return nil
		}
	}
}

// renew gets and installs a new certificate.
func (id *Identity) renew(ctx context.Context, issue Issuer) error {
	csr, err := id.NewRequest()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	chainPEM, bundlePEM, err := issue(ctx, csr)
	if err != nil {
		return fmt.Errorf("issue peer certificate: %w", err)
	}
	return id.Install(chainPEM, bundlePEM)
}

// renewalDue is when two thirds of the current certificate's validity have
// passed: a third of it is left for retries while the coordinator is
// unreachable, and peers never see a certificate about to expire.
func (id *Identity) renewalDue() time.Time {
	leaf := id.Leaf()
	return leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
}

// reportFailure logs a failed attempt according to what the agent is left
// with: no certificate yet, a current one, or an expired one.
func (id *Identity) reportFailure(err error, retryIn time.Duration) {
	leaf := id.Leaf()
	switch {
	case leaf == nil:
		id.log.Error(err, "Cannot get a peer certificate; peers refuse this agent until one is issued", "retryIn", retryIn)
	case id.clock.Now().Before(leaf.NotAfter):
		id.log.Info("Cannot renew the peer certificate; serving the current one until it expires",
			"err", err.Error(), "expiry", leaf.NotAfter, "retryIn", retryIn)
	default:
		id.log.Error(err, "Peer certificate expired; peers refuse this agent until a renewal succeeds",
			"expiry", leaf.NotAfter, "retryIn", retryIn)
	}
}

// backoff is the wait after the n-th failure in a row (n >= 1).
func (id *Identity) backoff(n int) time.Duration {
	d := id.backoffBase
	for i := 1; i < n && d < id.backoffMax; i++ {
		d *= 2
	}
	return id.jitter(min(d, id.backoffMax))
}

// jitter takes up to a fifth off d, so that agents that lost the
// coordinator together do not all come back in the same second.
func jitter(d time.Duration) time.Duration {
	return d - rand.N(d/5+1)
}

// sleep waits d on the identity's clock; it returns false if ctx ended
// first.
func (id *Identity) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := id.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
