package certs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultInterval is how often a Manager checks the CA.
const DefaultInterval = time.Minute

// Manager keeps the CA, the serving certificates, the webhook caBundles and
// the mesh key current. Set its exported fields before Run.
type Manager struct {
	// Authority keeps the CA; its Client and Namespace are also used for
	// the webhook configurations and the mesh key. Required.
	Authority *Authority
	// IsLeader tells whether this replica leads: only the leader rotates
	// the CA, patches caBundles and creates the mesh key. Nil: never.
	IsLeader func() bool
	// Interval between checks; default DefaultInterval.
	Interval time.Duration
	// ValidatingWebhooks and MutatingWebhooks name the webhook
	// configurations whose caBundle the leader keeps current; NewManager
	// sets DefaultValidatingWebhook, DefaultMutatingWebhook and
	// PodMutatingWebhook.
	ValidatingWebhooks []string
	// MutatingWebhooks: see ValidatingWebhooks.
	MutatingWebhooks []string
	// CRDClient and CRDs: the CRDs whose conversion webhook caBundle the
	// leader keeps current (PatchCRDCABundles). Nil or empty: none.
	CRDClient apiextensionsclient.Interface
	// CRDs: see CRDClient.
	CRDs []string
	// MeshKeySecret is the mesh key Secret in the Authority's namespace;
	// NewManager sets MeshKeySecretName. Empty: no mesh key.
	MeshKeySecret string
	// Clock drives the interval and the expiry gauge; default the real
	// clock.
	Clock clock.WithTicker

	mu       sync.Mutex
	servings []*Serving
	bundle   *Bundle

	caNotAfter atomic.Int64 // unix nanoseconds; 0 before the first Ensure
	readyOnce  sync.Once
	ready      chan struct{}
}

// NewManager returns a Manager for a with the backbone's webhook and mesh
// key names, and registers the shoal_coordinator_ca_expiry_seconds gauge
// on reg (if not nil).
func NewManager(a *Authority, isLeader func() bool, reg prometheus.Registerer) (*Manager, error) {
	m := &Manager{
		Authority:          a,
		IsLeader:           isLeader,
		ValidatingWebhooks: []string{DefaultValidatingWebhook},
		MutatingWebhooks:   []string{DefaultMutatingWebhook, PodMutatingWebhook},
		MeshKeySecret:      MeshKeySecretName,
		ready:              make(chan struct{}),
	}
	if reg != nil {
		if err := reg.Register(expiryCollector{m}); err != nil {
			return nil, fmt.Errorf("register CA expiry gauge: %w", err)
		}
	}
	return m, nil
}

// Register adds a Serving to be fed every bundle. When a bundle is already
// known, s gets its certificate right away.
func (m *Manager) Register(s *Serving) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.servings = append(m.servings, s)
	if m.bundle != nil {
		return s.Update(m.bundle)
	}
	return nil
}

// Run checks the CA at once and then every Interval until ctx ends, and
// returns nil then. A failed check is logged and retried at the next one.
func (m *Manager) Run(ctx context.Context) error {
	if m.Authority == nil {
		return errors.New("certs.Manager needs an Authority")
	}
	log := klog.FromContext(ctx).WithName("certs")
	ctx = klog.NewContext(ctx, log)
	interval := m.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	ticker := m.clock().NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := m.Sync(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Keeping certificates current failed; retrying", "in", interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// Sync runs one check: Ensure (rotating only on the leader), feed every
// registered Serving, and on the leader patch the webhook caBundles and
// ensure the mesh key. It returns every error it met.
func (m *Manager) Sync(ctx context.Context) error {
	leader := m.IsLeader != nil && m.IsLeader()
	b, err := m.Authority.Ensure(ctx, leader)
	if err != nil {
		return err
	}
	m.observe(ctx, b)

	var errs []error
	if leader {
		// Trust goes out before new leaves do.
		if err := PatchWebhookCABundles(ctx, m.Authority.Client, b.BundlePEM, m.ValidatingWebhooks, m.MutatingWebhooks); err != nil {
			errs = append(errs, err)
		}
		if m.CRDClient != nil && len(m.CRDs) > 0 {
			if err := PatchCRDCABundles(ctx, m.CRDClient, b.BundlePEM, m.CRDs); err != nil {
				errs = append(errs, err)
			}
		}
		if m.MeshKeySecret != "" {
			if err := EnsureMeshKey(ctx, m.Authority.Client, m.Authority.Namespace, m.MeshKeySecret); err != nil {
				errs = append(errs, err)
			}
		}
	}

	m.mu.Lock()
	m.bundle = b
	servingOK := true
	for _, s := range m.servings {
		if err := s.Update(b); err != nil {
			servingOK = false
			errs = append(errs, err)
		}
	}
	m.mu.Unlock()
	if servingOK {
		m.readyOnce.Do(func() { close(m.readyChan()) })
	}
	return errors.Join(errs...)
}

// Bundle returns the CA state of the last successful Sync, nil before it.
func (m *Manager) Bundle() *Bundle {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bundle
}

// observe records b's CA for the gauge and logs when it changed.
func (m *Manager) observe(ctx context.Context, b *Bundle) {
	notAfter := b.CACert.NotAfter.UnixNano()
	if old := m.caNotAfter.Swap(notAfter); old != notAfter {
		klog.FromContext(ctx).Info("Using CA", "serial", b.CACert.SerialNumber.Text(16),
			"notAfter", b.CACert.NotAfter, "bundleSize", len(b.Certs))
	}
}

// Ready tells whether the CA was read and every registered Serving got a
// certificate at least once.
func (m *Manager) Ready() bool {
	select {
	case <-m.readyChan():
		return true
	default:
		return false
	}
}

// WaitReady blocks until Ready or until ctx ends, and returns ctx's error
// then.
func (m *Manager) WaitReady(ctx context.Context) error {
	select {
	case <-m.readyChan():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for certificates: %w", ctx.Err())
	}
}

func (m *Manager) readyChan() chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ready == nil {
		m.ready = make(chan struct{})
	}
	return m.ready
}

func (m *Manager) clock() clock.WithTicker {
	if m.Clock == nil {
		return clock.RealClock{}
	}
	return m.Clock
}

// expiryCollector exposes shoal_coordinator_ca_expiry_seconds, once the CA
// is known.
type expiryCollector struct{ m *Manager }

var expiryDesc = prometheus.NewDesc("shoal_coordinator_ca_expiry_seconds",
	"Seconds until the coordinator's current CA certificate expires.", nil, nil)

// Describe implements prometheus.Collector.
func (c expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

// Collect implements prometheus.Collector.
func (c expiryCollector) Collect(ch chan<- prometheus.Metric) {
	notAfter := c.m.caNotAfter.Load()
	if notAfter == 0 {
		return
	}
	left := time.Unix(0, notAfter).Sub(c.m.clock().Now())
	ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, left.Seconds())
}
