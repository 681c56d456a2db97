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

// versionedClient creates and reads objects of one kind at the test's
// f.APIVersion, taking and giving v1alpha1 objects (A): under TestV1beta1
// it sends and reads v1beta1 objects (B) and converts at the edges.
type versionedClient[A, B any] struct {
	t    *testing.T
	f    *framework.Framework
	kind string

	alphaCreate func(context.Context, *A, metav1.CreateOptions) (*A, error)
	alphaGet    func(context.Context, string, metav1.GetOptions) (*A, error)
	betaCreate  func(context.Context, *B, metav1.CreateOptions) (*B, error)
	betaGet     func(context.Context, string, metav1.GetOptions) (*B, error)
}

func (c versionedClient[A, B]) create(ctx context.Context, obj *A) (*A, error) {
	if c.f.APIVersion != "v1beta1" {
		return c.alphaCreate(ctx, obj, metav1.CreateOptions{})
	}
	got, err := c.betaCreate(ctx, convertTo[B](c.t, obj, c.kind, "v1alpha1", "v1beta1"), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return convertTo[A](c.t, got, c.kind, "v1beta1", "v1alpha1"), nil
}

func (c versionedClient[A, B]) get(ctx context.Context, name string) (*A, error) {
	if c.f.APIVersion != "v1beta1" {
		return c.alphaGet(ctx, name, metav1.GetOptions{})
	}
	got, err := c.betaGet(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return convertTo[A](c.t, got, c.kind, "v1beta1", "v1alpha1"), nil
}

// crrs is the test's ContainerRecreateRequest client at f.APIVersion.
func crrs(t *testing.T, f *framework.Framework) versionedClient[v1alpha1.ContainerRecreateRequest, v1beta1.ContainerRecreateRequest] {
	alpha := f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace)
	beta := f.Shoal.AppsV1beta1().ContainerRecreateRequests(f.Namespace)
	return versionedClient[v1alpha1.ContainerRecreateRequest, v1beta1.ContainerRecreateRequest]{
		t: t, f: f, kind: "ContainerRecreateRequest",
		alphaCreate: alpha.Create, alphaGet: alpha.Get, betaCreate: beta.Create, betaGet: beta.Get,
	}
}

// pullJobs is the test's ImagePullJob client at f.APIVersion.
func pullJobs(t *testing.T, f *framework.Framework) versionedClient[v1alpha1.ImagePullJob, v1beta1.ImagePullJob] {
	alpha := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace)
	beta := f.Shoal.AppsV1beta1().ImagePullJobs(f.Namespace)
	return versionedClient[v1alpha1.ImagePullJob, v1beta1.ImagePullJob]{
		t: t, f: f, kind: "ImagePullJob",
		alphaCreate: alpha.Create, alphaGet: alpha.Get, betaCreate: beta.Create, betaGet: beta.Get,
	}
}

// udClient reads and writes UnitedDeployments at the test's f.APIVersion,
// taking and giving v1alpha1 objects: under TestV1beta1 every create, get
// and update goes through apps.kruise.io/v1beta1 (whose adaptive fields
// differ: unschedulableDuration for unschedulableLastSeconds), converted
// at the edges.
type udClient struct {
	t *testing.T
	f *framework.Framework
}

// uds is the test's UnitedDeployment client.
func uds(t *testing.T, f *framework.Framework) udClient { return udClient{t: t, f: f} }

// Create creates ud.
func (c udClient) Create(ctx context.Context, ud *v1alpha1.UnitedDeployment, opts metav1.CreateOptions) (*v1alpha1.UnitedDeployment, error) {
	if c.f.APIVersion != "v1beta1" {
		return c.f.Shoal.AppsV1alpha1().UnitedDeployments(c.f.Namespace).Create(ctx, ud, opts)
	}
	got, err := c.f.Shoal.AppsV1beta1().UnitedDeployments(c.f.Namespace).Create(ctx, c.beta(ud), opts)
	if err != nil {
		return nil, err
	}
	return c.alpha(got), nil
}

// Get reads the UnitedDeployment name.
func (c udClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1alpha1.UnitedDeployment, error) {
	if c.f.APIVersion != "v1beta1" {
		return c.f.Shoal.AppsV1alpha1().UnitedDeployments(c.f.Namespace).Get(ctx, name, opts)
	}
	got, err := c.f.Shoal.AppsV1beta1().UnitedDeployments(c.f.Namespace).Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return c.alpha(got), nil
}

// Update writes ud (its resourceVersion guards the write).
func (c udClient) Update(ctx context.Context, ud *v1alpha1.UnitedDeployment, opts metav1.UpdateOptions) (*v1alpha1.UnitedDeployment, error) {
	if c.f.APIVersion != "v1beta1" {
		return c.f.Shoal.AppsV1alpha1().UnitedDeployments(c.f.Namespace).Update(ctx, ud, opts)
	}
	got, err := c.f.Shoal.AppsV1beta1().UnitedDeployments(c.f.Namespace).Update(ctx, c.beta(ud), opts)
	if err != nil {
		return nil, err
	}
	return c.alpha(got), nil
}

func (c udClient) beta(ud *v1alpha1.UnitedDeployment) *v1beta1.UnitedDeployment {
	return convertTo[v1beta1.UnitedDeployment](c.t, ud, "UnitedDeployment", "v1alpha1", "v1beta1")
}

func (c udClient) alpha(ud *v1beta1.UnitedDeployment) *v1alpha1.UnitedDeployment {
	return convertTo[v1alpha1.UnitedDeployment](c.t, ud, "UnitedDeployment", "v1beta1", "v1alpha1")
}
