package framework

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	// LabelE2E marks every namespace the framework creates.
	LabelE2E = "e2e"
	// AnnotationTest records the full name of the test owning a namespace.
	AnnotationTest = "e2e.shoal.io/test"

	// NamespaceDeleteTimeout bounds the wait for a test namespace to be gone.
	NamespaceDeleteTimeout = 3 * time.Minute
	// ArtifactsTimeout bounds artifact collection after a failure.
	ArtifactsTimeout = 2 * time.Minute
)

// deferNamespaceWaits says that a test's cleanup does not wait for its
// namespace to be gone (see DeferNamespaceWaits).
var deferNamespaceWaits atomic.Bool

// DeferNamespaceWaits makes the tests' cleanups start the deletion of
// their namespaces without waiting for it; WaitNamespacesGone then waits
// for all of them at once. For a group that runs one test at a time,
// where each wait (10 s and more: the namespace controller goes through
// every resource type, and finalizers wait for their controllers) only
// holds up the next test. A parallel group keeps the waits: they bound
// how many namespaces are torn down at once.
func DeferNamespaceWaits() { deferNamespaceWaits.Store(true) }

// Framework is one test's handle on the cluster: the clients, the Config,
// and a namespace of its own that is deleted when the test ends.
type Framework struct {
	*Clients
	// Config is the suite's configuration.
	Config *Config
	// Namespace is the test's own namespace, labelled e2e=true.
	Namespace string
	// APIVersion is the apps.kruise.io version the test's helpers write
	// and read requests at: "v1alpha1" unless the test runs under a
	// v1beta1 parent (see test/e2e/versions_test.go).
	APIVersion string

	t testing.TB

	readerMu    sync.Mutex
	readerToken string
}

// New loads the Config, builds the clients and creates a namespace for t.
// It registers a cleanup that, if t failed, collects artifacts first and
// then deletes the namespace and waits (bounded) until it is gone
// (unless DeferNamespaceWaits).
func New(t testing.TB) *Framework {
	t.Helper()
	cfg, err := Load()
	require.NoError(t, err)
	clients, err := NewClients(cfg)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := clients.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "e2e-" + dnsLabel(t.Name(), 40) + "-",
			Labels:       map[string]string{LabelE2E: "true"},
			Annotations:  map[string]string{AnnotationTest: t.Name()},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "create test namespace")

	f := &Framework{Clients: clients, Config: cfg, Namespace: ns.Name, APIVersion: "v1alpha1", t: t}
	t.Logf("test namespace %s", f.Namespace)
	t.Cleanup(f.cleanup)
	return f
}

// cleanup runs after the test; t.Context() is already cancelled then, so it
// uses its own bounded contexts.
func (f *Framework) cleanup() {
	if f.t.Failed() {
		ctx, cancel := context.WithTimeout(context.Background(), ArtifactsTimeout)
		dir, err := f.CollectArtifacts(ctx)
		cancel()
		if err != nil {
			f.t.Logf("collecting artifacts (partial, in %s): %v", dir, err)
		} else {
			f.t.Logf("artifacts of the failed test: %s", dir)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), NamespaceDeleteTimeout+10*time.Second)
	defer cancel()
	if deferNamespaceWaits.Load() {
		if err := f.StartNamespaceDeletion(ctx, f.Namespace); err != nil {
			f.t.Errorf("cleanup: %v", err)
		}
		return
	}
	if err := f.DeleteNamespace(ctx, f.Namespace, NamespaceDeleteTimeout); err != nil {
		f.t.Errorf("cleanup: %v", err)
	}
}

// WaitNamespacesGone waits (bounded by timeout) until no namespace the
// framework created is left, and names those that are.
func (c *Clients) WaitNamespacesGone(ctx context.Context, timeout time.Duration) error {
	var left []string
	err := WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: LabelE2E + "=true"})
		if err != nil {
			return false, err
		}
		left = left[:0]
		for _, ns := range list.Items {
			left = append(left, ns.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("test namespaces not gone within %v: %s: %w", timeout, strings.Join(left, ", "), err)
	}
	return nil
}

// DeleteNamespace deletes namespace ns (StartNamespaceDeletion) and waits
// until it is gone.
func (c *Clients) DeleteNamespace(ctx context.Context, ns string, timeout time.Duration) error {
	if err := c.StartNamespaceDeletion(ctx, ns); err != nil {
		return err
	}
	var phase corev1.NamespacePhase
	err := WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		got, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		phase = got.Status.Phase
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone (phase %q): %w", ns, phase, err)
	}
	return nil
}

// StartNamespaceDeletion deletes namespace ns without waiting for it.
//
// Its pods go at once (grace period 0): the test is over, and their
// grace periods and preStop hooks (30 s for a process that ignores
// SIGTERM, more for the hook tests) would only hold the namespace, and
// with it the test's place in its group. The namespace is deleted first,
// so no controller can create their replacements.
func (c *Clients) StartNamespaceDeletion(ctx context.Context, ns string) error {
	err := c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	// Best effort: a pod a budget still protects, or one already gone, is
	// left to the namespace controller.
	_ = c.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	return nil
}

// ExecInPod runs cmd in a container of a pod in the test namespace and
// returns what it wrote. A non-zero exit status is an error.
func (f *Framework) ExecInPod(ctx context.Context, pod, container string, cmd []string) (stdout, stderr string, err error) {
	return f.Exec(ctx, f.Namespace, pod, container, cmd)
}

// PodLogs returns the current log of a container of a pod in the test
// namespace.
func (f *Framework) PodLogs(ctx context.Context, pod, container string) (string, error) {
	return f.Logs(ctx, f.Namespace, pod, container, false)
}

// Image returns the reference of a test image in the configured registry.
func (f *Framework) Image(nameAndTag string) string {
	return f.Config.Image(nameAndTag)
}

var notDNS = regexp.MustCompile(`[^a-z0-9]+`)

// dnsLabel turns s into a DNS label fragment of at most limit characters.
func dnsLabel(s string, limit int) string {
	s = notDNS.ReplaceAllString(strings.ToLower(s), "-")
	if len(s) > limit {
		s = s[:limit]
	}
	return strings.Trim(s, "-")
}
