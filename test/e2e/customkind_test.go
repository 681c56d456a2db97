//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// crdResource is the CustomResourceDefinition resource.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCustomKind installs a namespaced CRD of kind for gvr (one
// version, any content, no status subresource) unless the cluster has
// one, deleting it when the test ends if it made it, and lets the
// coordinator get, list and watch the resource until the test ends (the
// operator's part of following a custom workload kind). It waits until
// the kind is served.
func installCustomKind(ctx context.Context, t *testing.T, f *framework.Framework, gvr schema.GroupVersionResource, kind string) {
	t.Helper()
	crdGVR := crdResource
	crdName := gvr.Resource + "." + gvr.Group
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": crdName},
		"spec": map[string]any{
			"group": gvr.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": gvr.Resource, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{"name": gvr.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	_, err := f.Dynamic.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		t.Logf("CRD %s exists: using it, leaving it", crdName)
	case err != nil:
		require.NoError(t, err, "create CRD %s", crdName)
	default:
		t.Cleanup(func() {
			_ = f.Dynamic.Resource(crdGVR).Delete(context.WithoutCancel(ctx), crdName, metav1.DeleteOptions{})
		})
	}

	name := gvr.Resource + "-" + f.Namespace
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"get", "list", "watch"}}}}
	_, err = f.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = f.Kube.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "shoal-coordinator", Namespace: framework.ShoalNamespace}}}
	_, err = f.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = f.Kube.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})

	// Served once a list answers.
	err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := f.Dynamic.Resource(gvr).Namespace(f.Namespace).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "%s is not served", gvr)
}

// addWhiteListEntries adds entries to the custom workload white list
// under key of the coordinator's kruise-configuration ConfigMap (as
// OpenKruise's e2e does for its manager) and removes them when the test
// ends. Other entries and keys stay; tests running side by side each edit
// their own entries.
func addWhiteListEntries(ctx context.Context, t *testing.T, f *framework.Framework, key string, entries ...map[string]any) {
	t.Helper()
	cms := f.Kube.CoreV1().ConfigMaps(framework.ShoalNamespace)
	edit := func(ctx context.Context, change func([]map[string]any) []map[string]any) error {
		return framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			cm, err := cms.Get(ctx, wellknown.ConfigMapKruiseConfiguration, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wellknown.ConfigMapKruiseConfiguration, Namespace: framework.ShoalNamespace}}
				err = nil
			}
			if err != nil {
				return false, err
			}
			var list struct {
				Workloads []map[string]any `json:"workloads"`
			}
			if v := cm.Data[key]; strings.TrimSpace(v) != "" {
				if err := json.Unmarshal([]byte(v), &list); err != nil {
					return false, fmt.Errorf("ConfigMap %s key %s: %w", cm.Name, key, err)
				}
			}
			list.Workloads = change(list.Workloads)
			b, err := json.Marshal(list)
			if err != nil {
				return false, err
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[key] = string(b)
			if cm.ResourceVersion == "" {
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			} else {
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			}
			return err == nil, nil
		})
	}
	require.NoError(t, edit(ctx, func(list []map[string]any) []map[string]any { return append(list, entries...) }))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := edit(ctx, func(list []map[string]any) []map[string]any {
			for _, mine := range entries {
				if i := slices.IndexFunc(list, func(e map[string]any) bool { return reflect.DeepEqual(e, mine) }); i >= 0 {
					list = slices.Delete(list, i, i+1)
				}
			}
			return list
		})
		if err != nil {
			t.Logf("remove the %s entries: %v", key, err)
		}
	})
}
