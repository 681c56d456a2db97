//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/webhook"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// protectionTimeout bounds one deletion-protection step.
const protectionTimeout = time.Minute

// protectionPatch sets (or, with "", removes) the delete-protection label.
func protectionPatch(value wellknown.DeletionProtection) []byte {
	if value == "" {
		return []byte(`{"metadata":{"labels":{"` + wellknown.LabelDeleteProtection + `":null}}}`)
	}
	return []byte(`{"metadata":{"labels":{"` + wellknown.LabelDeleteProtection + `":"` + string(value) + `"}}}`)
}

// protected is one object under test, reached through the dynamic client.
type protected struct {
	t    *testing.T
	f    *framework.Framework
	gvr  schema.GroupVersionResource
	ns   string // "" for cluster-scoped objects
	name string
}

// newProtected names an object and removes its label when the test ends,
// so that a failed test never leaves an object nobody can delete.
func newProtected(t *testing.T, f *framework.Framework, gvr schema.GroupVersionResource, ns, name string) *protected {
	p := &protected{t: t, f: f, gvr: gvr, ns: ns, name: name}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		_, _ = p.client().Patch(ctx, name, types.MergePatchType, protectionPatch(""), metav1.PatchOptions{})
		_ = p.client().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return p
}

func (p *protected) client() interface {
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
	Delete(context.Context, string, metav1.DeleteOptions, ...string) error
} {
	if p.ns == "" {
		return p.f.Dynamic.Resource(p.gvr)
	}
	return p.f.Dynamic.Resource(p.gvr).Namespace(p.ns)
}

// label sets the delete-protection label to value.
func (p *protected) label(value wellknown.DeletionProtection) {
	p.t.Helper()
	_, err := p.client().Patch(p.t.Context(), p.name, types.MergePatchType, protectionPatch(value), metav1.PatchOptions{})
	require.NoError(p.t, err, "label %s %s", p.gvr.Resource, p.name)
}

// refused asserts that deleting the object is refused, with why in the
// message.
func (p *protected) refused(why string) {
	p.t.Helper()
	err := p.client().Delete(p.t.Context(), p.name, metav1.DeleteOptions{})
	require.Error(p.t, err, "deleting %s %s", p.gvr.Resource, p.name)
	require.Contains(p.t, err.Error(), webhook.ForbiddenByDeletionProtection)
	require.Contains(p.t, err.Error(), why)
}

// deleted deletes the object, retrying while the coordinator's informers
// still show the dependents just removed.
func (p *protected) deleted() {
	p.t.Helper()
	var last error
	err := framework.WaitFor(p.t.Context(), protectionTimeout, func(ctx context.Context) (bool, error) {
		last = p.client().Delete(ctx, p.name, metav1.DeleteOptions{})
		return last == nil || apierrors.IsNotFound(last), nil
	})
	require.NoError(p.t, err, "delete %s %s: %v", p.gvr.Resource, p.name, last)
}

// TestDeletionProtection ports OpenKruise's DeletionProtection cases: the
// policy.kruise.io/delete-protection label, Always or Cascading, on
// Namespaces, CRDs, workloads, Services and Ingresses.
func TestDeletionProtection(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	suffix := utilrand.String(6)

	// OpenKruise: "namespace deletion ns should be protected"
	t.Run("ns should be protected", func(t *testing.T) {
		t.Parallel()
		name := "dp-ns-" + suffix
		_, err := f.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{wellknown.LabelDeleteProtection: string(wellknown.DeletionProtectionAlways)}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		ns := newProtected(t, f, corev1.SchemeGroupVersion.WithResource("namespaces"), "", name)
		ns.refused("is never deleted while the label is there")

		cs := testCloneSet(f, "clone", 1)
		_, err = f.Shoal.AppsV1beta1().CloneSets(name).Create(ctx, cs, metav1.CreateOptions{})
		require.NoError(t, err)
		waitObject(ctx, t, f.Shoal.AppsV1beta1().CloneSets(name), protectionTimeout, "clone", "1 replica",
			func(c *v1beta1.CloneSet) bool { return c.Status.Replicas == 1 }, func(c *v1beta1.CloneSet) any { return c.Status })
		ns.label(wellknown.DeletionProtectionCascading)
		ns.refused("active pods")

		updateObject(ctx, t, f.Shoal.AppsV1beta1().CloneSets(name), "clone", func(c *v1beta1.CloneSet) { c.Spec.Replicas = ptr.To[int32](0) })
		err = framework.WaitFor(ctx, protectionTimeout, func(ctx context.Context) (bool, error) {
			pods, err := f.Kube.CoreV1().Pods(name).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		})
		require.NoError(t, err, "the CloneSet's pod is gone")

		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("50Mi")}},
			},
		}
		_, err = f.Kube.CoreV1().PersistentVolumeClaims(name).Create(ctx, pvc, metav1.CreateOptions{})
		require.NoError(t, err)
		waitObject(ctx, t, f.Kube.CoreV1().PersistentVolumeClaims(name), protectionTimeout, "pvc", "Bound",
			func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound },
			func(c *corev1.PersistentVolumeClaim) any { return c.Status })
		ns.refused("Bound PVCs")

		require.NoError(t, f.Kube.CoreV1().PersistentVolumeClaims(name).Delete(ctx, "pvc", metav1.DeleteOptions{}))
		ns.deleted()
	})

	// OpenKruise: "CRD deletion should be protected"
	t.Run("CRD should be protected", func(t *testing.T) {
		t.Parallel()
		group := "dp" + suffix + ".e2e.shoal.io"
		plural := "testdeletioncases"
		crdName := plural + "." + group
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": crdName, "labels": map[string]any{wellknown.LabelDeleteProtection: string(wellknown.DeletionProtectionAlways)}},
			"spec": map[string]any{
				"group": group, "scope": "Namespaced",
				"names": map[string]any{"plural": plural, "singular": "testdeletioncase", "kind": "TestDeletionCase"},
				"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		_, err := f.Dynamic.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err)
		p := newProtected(t, f, crdGVR, "", crdName)
		p.refused("is never deleted while the label is there")

		// Let the coordinator list the CRs, as docs/dev/admission.md says.
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "dp-" + suffix},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{plural}, Verbs: []string{"list"}}}}
		_, err = f.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = f.Kube.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), role.Name, metav1.DeleteOptions{})
		})
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dp-" + suffix},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "shoal-coordinator", Namespace: framework.ShoalNamespace}}}
		_, err = f.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = f.Kube.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(ctx), binding.Name, metav1.DeleteOptions{})
		})

		crGVR := schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: plural}
		cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1beta1", "kind": "TestDeletionCase",
			"metadata": map[string]any{"name": "test-cr"}}}
		err = framework.WaitFor(ctx, protectionTimeout, func(ctx context.Context) (bool, error) {
			_, err := f.Dynamic.Resource(crGVR).Namespace(f.Namespace).Create(ctx, cr, metav1.CreateOptions{})
			return err == nil, nil // until the CRD is established
		})
		require.NoError(t, err, "create a %s", plural)
		p.label(wellknown.DeletionProtectionCascading)
		p.refused(plural + " still exist")

		require.NoError(t, f.Dynamic.Resource(crGVR).Namespace(f.Namespace).Delete(ctx, "test-cr", metav1.DeleteOptions{}))
		p.deleted()
	})

	// OpenKruise: "Workload deletion CloneSet should be protected"
	t.Run("CloneSet should be protected", func(t *testing.T) {
		t.Parallel()
		cs := testCloneSet(f, "dp-clone", 0)
		cs.Labels = map[string]string{wellknown.LabelDeleteProtection: string(wellknown.DeletionProtectionAlways)}
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
		require.NoError(t, err)
		p := newProtected(t, f, v1beta1.SchemeGroupVersion.WithResource("clonesets"), f.Namespace, cs.Name)
		p.refused("is never deleted while the label is there")

		updateObject(ctx, t, f.Shoal.AppsV1beta1().CloneSets(f.Namespace), cs.Name, func(c *v1beta1.CloneSet) {
			c.Spec.Replicas = ptr.To[int32](2)
			c.Labels[wellknown.LabelDeleteProtection] = string(wellknown.DeletionProtectionCascading)
		})
		waitCloneSet(ctx, t, f, cs.Name, "2 replicas", func(c *v1beta1.CloneSet) bool { return c.Status.Replicas == 2 })
		p.refused("spec.replicas 2")

		updateObject(ctx, t, f.Shoal.AppsV1beta1().CloneSets(f.Namespace), cs.Name, func(c *v1beta1.CloneSet) { c.Spec.Replicas = ptr.To[int32](0) })
		waitCloneSet(ctx, t, f, cs.Name, "0 replicas", func(c *v1beta1.CloneSet) bool { return c.Status.Replicas == 0 })
		p.deleted()
	})

	// OpenKruise: "Workload deletion Deployment should be protected"
	t.Run("Deployment should be protected", func(t *testing.T) {
		t.Parallel()
		d := testserverDeployment(f, "dp-deploy", 0)
		d.Labels = map[string]string{wellknown.LabelDeleteProtection: string(wellknown.DeletionProtectionAlways)}
		_, err := f.Kube.AppsV1().Deployments(f.Namespace).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
		p := newProtected(t, f, appsv1.SchemeGroupVersion.WithResource("deployments"), f.Namespace, d.Name)
		p.refused("is never deleted while the label is there")

		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}},"spec":{"replicas":2}}`, wellknown.LabelDeleteProtection, wellknown.DeletionProtectionCascading)
		_, err = f.Kube.AppsV1().Deployments(f.Namespace).Patch(ctx, d.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		waitObject(ctx, t, f.Kube.AppsV1().Deployments(f.Namespace), protectionTimeout, d.Name, "2 replicas",
			func(d *appsv1.Deployment) bool { return d.Status.Replicas == 2 }, func(d *appsv1.Deployment) any { return d.Status })
		p.refused("spec.replicas 2")

		_, err = f.Kube.AppsV1().Deployments(f.Namespace).Patch(ctx, d.Name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		p.deleted()
	})

	// OpenKruise: "Service deletion should be protected"
	t.Run("Service should be protected", func(t *testing.T) {
		t.Parallel()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "dp-svc", Labels: map[string]string{wellknown.LabelDeleteProtection: string(wellknown.DeletionProtectionAlways)}},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"owner": "foo"}, Ports: []corev1.ServicePort{{Port: 80, Name: "http", Protocol: corev1.ProtocolTCP}}},
		}
		_, err := f.Kube.CoreV1().Services(f.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		require.NoError(t, err)
		p := newProtected(t, f, corev1.SchemeGroupVersion.WithResource("services"), f.Namespace, svc.Name)
		p.refused("is never deleted while the label is there")
		p.label("")
		p.deleted()
	})

	// OpenKruise: "Ingress deletion should be protected"
	t.Run("Ingress should be protected", func(t *testing.T) {
		t.Parallel()
		prefix := networkingv1.PathTypePrefix
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "dp-ing", Labels: map[string]string{wellknown.LabelDeleteProtection: string(wellknown.DeletionProtectionAlways)}},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "foo.bar.com", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "test", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}},
			}}}},
		}
		_, err := f.Kube.NetworkingV1().Ingresses(f.Namespace).Create(ctx, ing, metav1.CreateOptions{})
		require.NoError(t, err)
		p := newProtected(t, f, networkingv1.SchemeGroupVersion.WithResource("ingresses"), f.Namespace, ing.Name)
		p.refused("is never deleted while the label is there")
		p.label("")
		p.deleted()
	})
}
