package webhook

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// fakeDependents answers Dependents from fields.
type fakeDependents struct {
	pods, claims int
	crs          bool
	err          error
}

func (f fakeDependents) ActivePods(string) (int, error)  { return f.pods, f.err }
func (f fakeDependents) BoundClaims(string) (int, error) { return f.claims, f.err }
func (f fakeDependents) AnyCustomResource(context.Context, *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	return f.crs, f.err
}

// deleteRequest is a DELETE of kind (group/kind) name in ns, the object
// being old.
func deleteRequest(group, kind, ns, old string) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID: "u1", Kind: metav1.GroupVersionKind{Group: group, Version: "v1", Kind: kind},
		Name: "demo", Namespace: ns, Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: []byte(old)},
	}
}

func TestDeletionProtection(t *testing.T) {
	const always = `{"metadata":{"name":"demo","labels":{"policy.kruise.io/delete-protection":"Always"}}}`
	const cascading = `{"metadata":{"name":"demo","labels":{"policy.kruise.io/delete-protection":"Cascading"}}`
	for _, tc := range []struct {
		name            string
		group, kind, ns string
		old             string
		deps            fakeDependents
		want            []string // substrings of the denial; nil = allowed
	}{
		{"no label", "apps", "Deployment", "ns", `{"metadata":{"name":"demo"},"spec":{"replicas":3}}`, fakeDependents{}, nil},
		{"unknown value", "apps", "Deployment", "ns", `{"metadata":{"name":"demo","labels":{"policy.kruise.io/delete-protection":"Sometimes"}}}`, fakeDependents{}, nil},
		{"Always on a Service", "", "Service", "ns", always, fakeDependents{},
			[]string{"deleting service ns/demo is forbidden by ResourcesProtectionDeletion: it has label policy.kruise.io/delete-protection=Always", "kubectl label -n ns service demo policy.kruise.io/delete-protection-"}},
		{"Always on a Namespace", "", "Namespace", "", always, fakeDependents{},
			[]string{"deleting namespace demo is forbidden", "kubectl label namespace demo policy.kruise.io/delete-protection-"}},
		{"Cascading Namespace with pods", "", "Namespace", "", cascading + `}`, fakeDependents{pods: 2}, []string{"still has 2 active pods"}},
		{"Cascading Namespace with bound PVCs", "", "Namespace", "", cascading + `}`, fakeDependents{claims: 1}, []string{"still has 1 Bound PVCs"}},
		{"Cascading empty Namespace", "", "Namespace", "", cascading + `}`, fakeDependents{}, nil},
		{"Cascading Namespace, counting fails", "", "Namespace", "", cascading + `}`, fakeDependents{err: errors.New("boom")}, []string{"could not be counted (boom)"}},
		{"Cascading CRD with CRs", "apiextensions.k8s.io", "CustomResourceDefinition", "",
			cascading + `,"spec":{"group":"example.com","names":{"plural":"widgets"}}}`, fakeDependents{crs: true}, []string{"widgets still exist"}},
		{"Cascading CRD, list forbidden", "apiextensions.k8s.io", "CustomResourceDefinition", "",
			cascading + `,"spec":{"group":"example.com","names":{"plural":"widgets"}}}`, fakeDependents{err: errors.New("forbidden")},
			[]string{"could not be listed (forbidden; the coordinator needs list on widgets.example.com)"}},
		{"Cascading empty CRD", "apiextensions.k8s.io", "CustomResourceDefinition", "", cascading + `,"spec":{"group":"example.com","names":{"plural":"widgets"}}}`, fakeDependents{}, nil},
		{"Cascading Deployment with replicas", "apps", "Deployment", "ns", cascading + `,"spec":{"replicas":3}}`, fakeDependents{}, []string{"still has spec.replicas 3 (scale it to 0 first)"}},
		{"Cascading Deployment, replicas unset", "apps", "Deployment", "ns", cascading + `}`, fakeDependents{}, []string{"still has spec.replicas 1"}},
		{"Cascading Deployment at 0", "apps", "Deployment", "ns", cascading + `,"spec":{"replicas":0}}`, fakeDependents{}, nil},
		{"Cascading CloneSet", "apps.kruise.io", "CloneSet", "ns", cascading + `,"spec":{"replicas":2}}`, fakeDependents{}, []string{"cloneset ns/demo", "spec.replicas 2"}},
		{"Cascading Advanced StatefulSet", "apps.kruise.io", "StatefulSet", "ns", cascading + `,"spec":{"replicas":1}}`, fakeDependents{}, []string{"spec.replicas 1"}},
		{"Cascading UnitedDeployment", "apps.kruise.io", "UnitedDeployment", "ns", cascading + `,"spec":{"replicas":4}}`, fakeDependents{}, []string{"spec.replicas 4"}},
		{"Cascading is Always-only for Services", "", "Service", "ns", cascading + `}`, fakeDependents{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			d := NewDeletionProtection(tc.deps, reg)
			resp := d.Validate(context.Background(), deleteRequest(tc.group, tc.kind, tc.ns, tc.old))
			if tc.want == nil {
				require.True(t, resp.Allowed, "%+v", resp.Result)
				require.Zero(t, testutil.CollectAndCount(d.denials))
				return
			}
			require.False(t, resp.Allowed)
			for _, w := range tc.want {
				require.Contains(t, resp.Result.Message, w)
			}
			require.Equal(t, 1, testutil.CollectAndCount(d.denials), "one denial counted")
		})
	}
	t.Run("not a delete", func(t *testing.T) {
		req := deleteRequest("apps", "Deployment", "ns", `{"metadata":{"labels":{"policy.kruise.io/delete-protection":"Always"}}}`)
		req.Operation = admissionv1.Update
		require.True(t, NewDeletionProtection(fakeDependents{}, nil).Validate(context.Background(), req).Allowed)
	})
}

func TestClusterDependents(t *testing.T) {
	kube := kubefake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "a"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "b"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "a"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "a"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}},
	)
	f := informers.NewSharedInformerFactory(kube, 0)
	pods, claims := f.Core().V1().Pods(), f.Core().V1().PersistentVolumeClaims()
	pods.Informer()
	claims.Informer()
	f.Start(t.Context().Done())
	f.WaitForCacheSync(t.Context().Done())

	scheme := runtime.NewScheme()
	widget := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v2", Kind: "Widget"}, ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "a"}}
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	meta := metadatafake.NewSimpleMetadataClient(scheme, widget)
	d := ClusterDependents{Pods: pods.Lister(), Claims: claims.Lister(), Metadata: meta}

	n, err := d.ActivePods("a")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the finished pod does not count")
	n, err = d.BoundClaims("a")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the pending claim does not count")

	crd := func(version string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1"}, {Name: version, Storage: true}},
		}}
	}
	found, err := d.AnyCustomResource(t.Context(), crd("v2"))
	require.NoError(t, err)
	require.True(t, found, "the widget at the storage version")
}
