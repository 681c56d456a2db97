//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shoal-io/shoal/protocol/apis/apps/conversion"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// v1beta1Parent is the test under which OpenKruise's CRR, ImagePullJob
// and UnitedDeployment cases run again with their requests written and
// read at v1beta1.
const v1beta1Parent = "TestV1beta1"

// TestV1beta1 runs the ported OpenKruise CRR, ImagePullJob and
// UnitedDeployment cases again, with the same assertions, while every
// request their helpers create or read (createCRR, waitCRR, createPullJob,
// getPullJob, waitPullJob, uds) goes through the apiserver at
// apps.kruise.io/v1beta1: admission through matchPolicy Equivalent,
// storage at v1alpha1 through the conversion webhook, and the v1beta1
// answers converted back for the assertions.
func TestV1beta1(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"TestCRRRecreatesSimpleContainers", TestCRRRecreatesSimpleContainers},
		{"TestCRRPostStartHook", TestCRRPostStartHook},
		{"TestCRRPreStopHook", TestCRRPreStopHook},
		{"TestCRRForceRecreate", TestCRRForceRecreate},
		{"TestCRRQueueOnOnePod", TestCRRQueueOnOnePod},
		{"TestImagePullJobOpenKruise", TestImagePullJobOpenKruise},
		{"TestUnitedDeployment", TestUnitedDeployment},
		{"TestUnitedDeploymentAdaptive", TestUnitedDeploymentAdaptive},
		{"TestResourceDistribution", TestResourceDistribution},
	} {
		t.Run(tc.name, tc.test)
	}
}

// apiVersionFor is the apps.kruise.io version a test's requests use:
// v1beta1 under TestV1beta1, else v1alpha1.
func apiVersionFor(t *testing.T) string {
	if strings.HasPrefix(t.Name(), v1beta1Parent+"/") {
		return "v1beta1"
	}
	return "v1alpha1"
}

// convertTo converts in, a typed apps.kruise.io object of kind at
// version from, to version to, with the conversion the webhook runs.
func convertTo[Out any](t *testing.T, in any, kind, from, to string) *Out {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps.kruise.io/" + from)
	u.SetKind(kind)
	conv, err := conversion.Convert(u, "apps.kruise.io/"+to)
	require.NoError(t, err)
	out := new(Out)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(conv.Object, out))
	return out
}

// typedClient is what a typed clientset offers for one kind at one
// version.
type typedClient[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// versionedClient reads and writes objects of kind at the test's
// f.APIVersion, taking and giving v1alpha1 objects (*A): under
// TestV1beta1 every create, get and update goes through
// apps.kruise.io/v1beta1 (*B), converted at the edges with the webhook's
// conversion.
type versionedClient[A, B any] struct {
	t     *testing.T
	f     *framework.Framework
	kind  string
	alpha typedClient[*A]
	beta  typedClient[*B]
}

// uds is the test's UnitedDeployment client (v1beta1's adaptive fields
// differ: unschedulableDuration for unschedulableLastSeconds).
func uds(t *testing.T, f *framework.Framework) versionedClient[v1alpha1.UnitedDeployment, v1beta1.UnitedDeployment] {
	return versionedClient[v1alpha1.UnitedDeployment, v1beta1.UnitedDeployment]{t: t, f: f, kind: "UnitedDeployment",
		alpha: f.Shoal.AppsV1alpha1().UnitedDeployments(f.Namespace), beta: f.Shoal.AppsV1beta1().UnitedDeployments(f.Namespace)}
}

// crrs is the test's ContainerRecreateRequest client.
func crrs(t *testing.T, f *framework.Framework) versionedClient[v1alpha1.ContainerRecreateRequest, v1beta1.ContainerRecreateRequest] {
	return versionedClient[v1alpha1.ContainerRecreateRequest, v1beta1.ContainerRecreateRequest]{t: t, f: f, kind: "ContainerRecreateRequest",
		alpha: f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace), beta: f.Shoal.AppsV1beta1().ContainerRecreateRequests(f.Namespace)}
}

// pullJobs is the test's ImagePullJob client.
func pullJobs(t *testing.T, f *framework.Framework) versionedClient[v1alpha1.ImagePullJob, v1beta1.ImagePullJob] {
	return versionedClient[v1alpha1.ImagePullJob, v1beta1.ImagePullJob]{t: t, f: f, kind: "ImagePullJob",
		alpha: f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace), beta: f.Shoal.AppsV1beta1().ImagePullJobs(f.Namespace)}
}

// rds is the test's ResourceDistribution client (v1beta1 names
// namespaceLabelSelector namespaceSelector).
func rds(t *testing.T, f *framework.Framework) versionedClient[v1alpha1.ResourceDistribution, v1beta1.ResourceDistribution] {
	return versionedClient[v1alpha1.ResourceDistribution, v1beta1.ResourceDistribution]{t: t, f: f, kind: "ResourceDistribution",
		alpha: f.Shoal.AppsV1alpha1().ResourceDistributions(), beta: f.Shoal.AppsV1beta1().ResourceDistributions()}
}

func (c versionedClient[A, B]) atBeta() bool { return c.f.APIVersion == "v1beta1" }

func (c versionedClient[A, B]) toBeta(obj *A) *B {
	return convertTo[B](c.t, obj, c.kind, "v1alpha1", "v1beta1")
}

func (c versionedClient[A, B]) toAlpha(obj *B) *A {
	return convertTo[A](c.t, obj, c.kind, "v1beta1", "v1alpha1")
}

// Create creates obj.
func (c versionedClient[A, B]) Create(ctx context.Context, obj *A, opts metav1.CreateOptions) (*A, error) {
	if !c.atBeta() {
		return c.alpha.Create(ctx, obj, opts)
	}
	got, err := c.beta.Create(ctx, c.toBeta(obj), opts)
	if err != nil {
		return nil, err
	}
	return c.toAlpha(got), nil
}

// Get reads the object name.
func (c versionedClient[A, B]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*A, error) {
	if !c.atBeta() {
		return c.alpha.Get(ctx, name, opts)
	}
	got, err := c.beta.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return c.toAlpha(got), nil
}

// Update writes obj (its resourceVersion guards the write).
func (c versionedClient[A, B]) Update(ctx context.Context, obj *A, opts metav1.UpdateOptions) (*A, error) {
	if !c.atBeta() {
		return c.alpha.Update(ctx, obj, opts)
	}
	got, err := c.beta.Update(ctx, c.toBeta(obj), opts)
	if err != nil {
		return nil, err
	}
	return c.toAlpha(got), nil
}

// Delete deletes the object name.
func (c versionedClient[A, B]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if !c.atBeta() {
		return c.alpha.Delete(ctx, name, opts)
	}
	return c.beta.Delete(ctx, name, opts)
}
