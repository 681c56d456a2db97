package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shoal-io/shoal/coordinator/resourcedistribution"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// testDistribution distributes Secret "shared" to the included
// namespaces a, b, c, d and gone (which does not exist).
func testDistribution() *v1alpha1.ResourceDistribution {
	list := v1alpha1.ResourceDistributionTargetNamespaces{}
	for _, n := range []string{"a", "b", "c", "d", "gone"} {
		list.List = append(list.List, v1alpha1.ResourceDistributionNamespace{Name: n})
	}
	return &v1alpha1.ResourceDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "share", Generation: 2, CreationTimestamp: metav1.NewTime(now.Add(-3600e9))},
		Spec: v1alpha1.ResourceDistributionSpec{
			Resource: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"shared"},"data":{"k":"dg=="}}`)},
			Targets:  v1alpha1.ResourceDistributionTargets{IncludedNamespaces: list},
		},
		Status: v1alpha1.ResourceDistributionStatus{Desired: 4, Succeeded: 2, Failed: 2, ObservedGeneration: 2, Conditions: []v1alpha1.ResourceDistributionCondition{
			{Type: v1alpha1.ResourceDistributionConflictOccurred, Status: v1alpha1.ResourceDistributionConditionTrue, FailedNamespaces: []string{"c"}},
			{Type: v1alpha1.ResourceDistributionNamespaceNotExists, Status: v1alpha1.ResourceDistributionConditionTrue, FailedNamespaces: []string{"gone"}},
		}},
	}
}

// copyIn is Secret "shared" in ns written by distribution from with hash.
func copyIn(ns, from, hash string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns, Annotations: map[string]string{
		wellknown.AnnotationResourceDistributionFrom:                 from,
		wellknown.AnnotationResourceDistributionHashCode:             hash,
		wellknown.AnnotationResourceDistributionDistributedTimestamp: now.Add(-120e9).UTC().Format("2006-01-02T15:04:05Z07:00"),
	}}}
}

func TestGetResourceDistribution(t *testing.T) {
	rd := testDistribution()
	hash := resourcedistribution.HashCode(rd.Spec.Resource.Raw)
	f := newFakeCluster(rd)
	for _, n := range []string{"a", "b", "c", "d", "other"} {
		require.NoError(t, f.kube.Tracker().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	for _, s := range []*corev1.Secret{copyIn("a", "share", hash), copyIn("b", "share", "old"), copyIn("c", "someone-else", "x"), copyIn("other", "share", hash)} {
		require.NoError(t, f.kube.Tracker().Add(s))
	}

	t.Run("one distribution by namespace", func(t *testing.T) {
		code, stdout, stderr := f.run(t, "get", "rd", "share")
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, ""+
			"ResourceDistribution share: Secret/shared to 4 namespaces, 2 succeeded, 2 failed (observed generation 2 of 2)\n"+
			"NAMESPACE   STATE                         DISTRIBUTED\n"+
			"a           synced                        2m ago\n"+
			"b           outdated                      2m ago\n"+
			"c           conflict (ConflictOccurred)   2m ago\n"+
			"d           missing                       -\n"+
			"gone        namespace not found           -\n", stdout)
	})
	t.Run("list", func(t *testing.T) {
		code, stdout, stderr := f.run(t, "get", "resourcedistributions")
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, ""+
			"NAME    RESOURCE        DESIRED   SUCCEEDED   FAILED   AGE\n"+
			"share   Secret/shared   4         2           2        60m\n", stdout)
	})
	t.Run("not found", func(t *testing.T) {
		code, _, stderr := f.run(t, "get", "resourcedistribution", "nope")
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, `get resourcedistribution nope: resourcedistributions.apps.kruise.io "nope" not found`)
	})
	t.Run("two names", func(t *testing.T) {
		code, _, stderr := f.run(t, "get", "rd", "a", "b")
		require.Equal(t, exitUsage, code)
		require.Contains(t, stderr, "takes at most one name")
	})
}
