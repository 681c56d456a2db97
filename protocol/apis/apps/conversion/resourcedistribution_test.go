package conversion

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// The ResourceDistribution schemas restrict no enum (condition types and
// statuses are free strings), so no fill functions are needed.
func TestResourceDistributionRoundTrip(t *testing.T) {
	roundTrip(t, "ResourceDistribution", resourceDistributionToV1beta1, resourceDistributionToV1alpha1)
}

// TestResourceDistributionMapping checks the renamed fields, as JSON: a
// v1alpha1 manifest and the v1beta1 manifest it converts to, both ways.
func TestResourceDistributionMapping(t *testing.T) {
	tests := []struct {
		name        string
		alpha, beta string
	}{
		{
			name: "targets.namespaceLabelSelector is v1beta1 targets.namespaceSelector; the namespace lists keep their shape",
			alpha: `{"metadata":{"name":"registry-secret"},
				"spec":{"resource":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"registry-credentials"},"type":"Opaque"},
					"targets":{"allNamespaces":true,
						"excludedNamespaces":{"list":[{"name":"kube-system"},{"name":"legacy"}]},
						"includedNamespaces":{"list":[{"name":"shop"}]},
						"namespaceLabelSelector":{"matchLabels":{"team":"platform"}}}},
				"status":{}}`,
			beta: `{"metadata":{"name":"registry-secret"},
				"spec":{"resource":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"registry-credentials"},"type":"Opaque"},
					"targets":{"allNamespaces":true,
						"excludedNamespaces":{"list":[{"name":"kube-system"},{"name":"legacy"}]},
						"includedNamespaces":{"list":[{"name":"shop"}]},
						"namespaceSelector":{"matchLabels":{"team":"platform"}}}},
				"status":{}}`,
		},
		{
			name: "status counters carry over; conditions[].failedNamespace is v1beta1 failedNamespaces",
			alpha: `{"metadata":{"name":"app-config"},
				"spec":{"resource":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-config"},"data":{"level":"info"}},
					"targets":{"includedNamespaces":{"list":[{"name":"ns-1"},{"name":"ns-2"}]},"excludedNamespaces":{},"namespaceLabelSelector":{}}},
				"status":{"desired":2,"succeeded":1,"failed":1,"observedGeneration":4,
					"conditions":[{"type":"NamespaceNotExists","status":"True","lastTransitionTime":"2025-03-01T00:30:00Z","reason":"missing","failedNamespace":["ns-2"]},
						{"type":"ConflictOccurred","status":"False","lastTransitionTime":null}]}}`,
			beta: `{"metadata":{"name":"app-config"},
				"spec":{"resource":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-config"},"data":{"level":"info"}},
					"targets":{"includedNamespaces":{"list":[{"name":"ns-1"},{"name":"ns-2"}]},"excludedNamespaces":{},"namespaceSelector":{}}},
				"status":{"desired":2,"succeeded":1,"failed":1,"observedGeneration":4,
					"conditions":[{"type":"NamespaceNotExists","status":"True","lastTransitionTime":"2025-03-01T00:30:00Z","reason":"missing","failedNamespaces":["ns-2"]},
						{"type":"ConflictOccurred","status":"False","lastTransitionTime":null}]}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var alpha v1alpha1.ResourceDistribution
			require.NoError(t, json.Unmarshal([]byte(tc.alpha), &alpha))
			var beta v1beta1.ResourceDistribution
			require.NoError(t, resourceDistributionToV1beta1(&alpha, &beta))
			got, err := json.Marshal(&beta)
			require.NoError(t, err)
			require.JSONEq(t, tc.beta, string(got))

			beta = v1beta1.ResourceDistribution{}
			require.NoError(t, json.Unmarshal([]byte(tc.beta), &beta))
			alpha = v1alpha1.ResourceDistribution{}
			require.NoError(t, resourceDistributionToV1alpha1(&beta, &alpha))
			got, err = json.Marshal(&alpha)
			require.NoError(t, err)
			require.JSONEq(t, tc.alpha, string(got))
		})
	}

	t.Run("typed: the selector and failed namespaces move as they are", func(t *testing.T) {
		sel := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}}}}
		res := runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`)}
		alpha := v1alpha1.ResourceDistribution{
			ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec:       v1alpha1.ResourceDistributionSpec{Resource: res, Targets: v1alpha1.ResourceDistributionTargets{NamespaceLabelSelector: sel}},
			Status: v1alpha1.ResourceDistributionStatus{Conditions: []v1alpha1.ResourceDistributionCondition{{
				Type: v1alpha1.ResourceDistributionCreateResourceFailed, Status: v1alpha1.ResourceDistributionConditionTrue, FailedNamespaces: []string{"a", "b"},
			}}},
		}
		want := v1beta1.ResourceDistribution{
			ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec:       v1beta1.ResourceDistributionSpec{Resource: res, Targets: v1beta1.ResourceDistributionTargets{NamespaceSelector: sel}},
			Status: v1beta1.ResourceDistributionStatus{Conditions: []v1beta1.ResourceDistributionCondition{{
				Type: v1beta1.ResourceDistributionCreateResourceFailed, Status: v1beta1.ResourceDistributionConditionTrue, FailedNamespaces: []string{"a", "b"},
			}}},
		}
		var beta v1beta1.ResourceDistribution
		require.NoError(t, resourceDistributionToV1beta1(&alpha, &beta))
		require.Equal(t, want, beta)
		var back v1alpha1.ResourceDistribution
		require.NoError(t, resourceDistributionToV1alpha1(&want, &back))
		require.Equal(t, alpha, back)
	})
}
