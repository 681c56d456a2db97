package resourcedistribution

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

func ns(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func names(list ...string) v1alpha1.ResourceDistributionTargetNamespaces {
	var out v1alpha1.ResourceDistributionTargetNamespaces
	for _, n := range list {
		out.List = append(out.List, v1alpha1.ResourceDistributionNamespace{Name: n})
	}
	return out
}

func TestTargetNamespaces(t *testing.T) {
	all := []*corev1.Namespace{
		ns("default", nil), ns("kube-system", nil), ns("kube-public", nil),
		ns("dev-1", map[string]string{"env": "dev"}), ns("dev-2", map[string]string{"env": "dev"}), ns("prod", map[string]string{"env": "prod"}),
	}
	gone := ns("leaving", map[string]string{"env": "dev"})
	gone.DeletionTimestamp = &metav1.Time{}
	all = append(all, gone)
	for _, tc := range []struct {
		name             string
		targets          v1alpha1.ResourceDistributionTargets
		want, wantAbsent []string
	}{
		{"allNamespaces leaves the system ones out", v1alpha1.ResourceDistributionTargets{AllNamespaces: true},
			[]string{"default", "dev-1", "dev-2", "prod"}, nil},
		{"selector plus included, less excluded", v1alpha1.ResourceDistributionTargets{
			NamespaceLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
			IncludedNamespaces:     names("prod", "kube-system", "missing"),
			ExcludedNamespaces:     names("dev-2"),
		}, []string{"dev-1", "kube-system", "prod"}, []string{"missing"}},
		{"an empty selector selects nothing", v1alpha1.ResourceDistributionTargets{IncludedNamespaces: names("default")},
			[]string{"default"}, nil},
		{"a terminating namespace is not a target", v1alpha1.ResourceDistributionTargets{IncludedNamespaces: names("leaving")},
			nil, []string{"leaving"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, missing, err := TargetNamespaces(&v1alpha1.ResourceDistribution{Spec: v1alpha1.ResourceDistributionSpec{Targets: tc.targets}}, all)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantAbsent, missing)
		})
	}
}

func TestDecodeAndCopy(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"creds","labels":{"team":"a"}},"type":"Opaque","data":{"k":"dg=="}}`)
	rd := &v1alpha1.ResourceDistribution{ObjectMeta: metav1.ObjectMeta{Name: "sample", UID: "u1"},
		Spec: v1alpha1.ResourceDistributionSpec{Resource: runtime.RawExtension{Raw: raw}}}
	res, err := decode(rd)
	require.NoError(t, err)
	require.Equal(t, "creds", res.name())
	require.Equal(t, []byte("v"), res.secret.Data["k"])

	m := copyMeta(rd, res.secret.ObjectMeta, "team-a")
	require.Equal(t, "team-a", m.Namespace)
	require.Equal(t, "a", m.Labels["team"])
	require.Equal(t, "sample", m.Labels[wellknown.LabelResourceDistribution])
	require.Equal(t, "sample", m.Annotations[wellknown.AnnotationResourceDistributionFrom])
	require.Equal(t, HashCode(raw), m.Annotations[wellknown.AnnotationResourceDistributionHashCode])
	require.Len(t, HashCode(raw), 64, "hex SHA-256 of spec.resource, as OpenKruise's e2e computes it")
	require.Equal(t, "ResourceDistribution", metav1.GetControllerOf(&metav1.ObjectMeta{OwnerReferences: m.OwnerReferences}).Kind)

	long := strings.Repeat("a", 70)
	require.Len(t, labelValue(long), 42, "a name too long for a label value is hashed")
	require.Equal(t, "sample", labelValue("sample"))

	rd.Spec.Resource.Raw = []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}`)
	_, err = decode(rd)
	require.ErrorContains(t, err, "apps/v1 Deployment cannot be distributed; use a v1 Secret or ConfigMap")
}

func TestStatus(t *testing.T) {
	rd := &v1alpha1.ResourceDistribution{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	st := status(rd, []string{"a", "b", "c"}, 1, failures{
		v1alpha1.ResourceDistributionConflictOccurred:     {"b"},
		v1alpha1.ResourceDistributionCreateResourceFailed: {"c"},
		v1alpha1.ResourceDistributionNamespaceNotExists:   {"gone"},
	}, metav1.Now())
	require.EqualValues(t, 3, st.Desired)
	require.EqualValues(t, 1, st.Succeeded)
	require.EqualValues(t, 2, st.Failed, "a missing namespace is not a failed target")
	require.EqualValues(t, 4, st.ObservedGeneration)
	require.Len(t, st.Conditions, 6, "every condition type, always")
	require.Equal(t, v1alpha1.ResourceDistributionNamespaceNotExists, st.Conditions[5].Type)
	require.Equal(t, []string{"gone"}, st.Conditions[5].FailedNamespaces)
	require.Equal(t, v1alpha1.ResourceDistributionConditionTrue, st.Conditions[4].Status)
	require.Equal(t, v1alpha1.ResourceDistributionConditionFalse, st.Conditions[0].Status)
}
