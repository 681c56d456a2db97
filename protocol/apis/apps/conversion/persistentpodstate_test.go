package conversion

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/randfill"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// ppsFillFuncs fill the PersistentPodState enum.
func ppsFillFuncs() []any {
	return []any{
		func(s *v1alpha1.PersistentPodStateRetentionPolicyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.PersistentPodStateRetentionPolicyWhenScaled, v1alpha1.PersistentPodStateRetentionPolicyWhenDeleted)
		},
		func(s *v1beta1.PersistentPodStateRetentionPolicyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.PersistentPodStateRetentionPolicyWhenScaled, v1beta1.PersistentPodStateRetentionPolicyWhenDeleted)
		},
	}
}

func TestPersistentPodStateRoundTrip(t *testing.T) {
	roundTrip(t, "PersistentPodState", persistentPodStateToV1beta1, persistentPodStateToV1alpha1, ppsFillFuncs()...)
}

// TestPersistentPodStateMapping checks the mapping as JSON: a v1alpha1
// manifest and the v1beta1 manifest it converts to, both ways.
func TestPersistentPodStateMapping(t *testing.T) {
	tests := []struct {
		name        string
		alpha, beta string
	}{
		{
			name: "nodeTopologyKeys is v1beta1 keys, in the required and in each preferred term",
			alpha: `{"metadata":{"name":"echoserver","namespace":"default"},
				"spec":{"targetRef":{"apiVersion":"apps.kruise.io/v1beta1","kind":"StatefulSet","name":"echoserver"},
					"persistentPodAnnotations":[{"key":"cni.projectcalico.org/podIP"}],
					"requiredPersistentTopology":{"nodeTopologyKeys":["topology.kubernetes.io/zone"]},
					"preferredPersistentTopology":[{"weight":100,"preference":{"nodeTopologyKeys":["kubernetes.io/hostname"]}},
						{"weight":10,"preference":{"nodeTopologyKeys":["topology.kubernetes.io/region","rack"]}}]},
				"status":{"observedGeneration":0}}`,
			beta: `{"metadata":{"name":"echoserver","namespace":"default"},
				"spec":{"targetRef":{"apiVersion":"apps.kruise.io/v1beta1","kind":"StatefulSet","name":"echoserver"},
					"persistentPodAnnotations":[{"key":"cni.projectcalico.org/podIP"}],
					"requiredPersistentTopology":{"keys":["topology.kubernetes.io/zone"]},
					"preferredPersistentTopology":[{"weight":100,"preference":{"keys":["kubernetes.io/hostname"]}},
						{"weight":10,"preference":{"keys":["topology.kubernetes.io/region","rack"]}}]},
				"status":{"observedGeneration":0}}`,
		},
		{
			name: "retention policy WhenDeleted and the recorded pod states are the same in v1beta1",
			alpha: `{"metadata":{"name":"db","namespace":"data"},
				"spec":{"targetRef":{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db"},
					"preferredPersistentTopology":[{"weight":50,"preference":{"nodeTopologyKeys":["kubernetes.io/hostname"]}}],
					"persistentPodStateRetentionPolicy":"WhenDeleted"},
				"status":{"observedGeneration":3,"podStates":{
					"db-0":{"nodeName":"node-1","nodeTopologyLabels":{"kubernetes.io/hostname":"node-1"},"annotations":{"cni.projectcalico.org/podIP":"10.0.0.7/32"}},
					"db-1":{}}}}`,
			beta: `{"metadata":{"name":"db","namespace":"data"},
				"spec":{"targetRef":{"apiVersion":"apps/v1","kind":"StatefulSet","name":"db"},
					"preferredPersistentTopology":[{"weight":50,"preference":{"keys":["kubernetes.io/hostname"]}}],
					"persistentPodStateRetentionPolicy":"WhenDeleted"},
				"status":{"observedGeneration":3,"podStates":{
					"db-0":{"nodeName":"node-1","nodeTopologyLabels":{"kubernetes.io/hostname":"node-1"},"annotations":{"cni.projectcalico.org/podIP":"10.0.0.7/32"}},
					"db-1":{}}}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var alpha v1alpha1.PersistentPodState
			require.NoError(t, json.Unmarshal([]byte(tc.alpha), &alpha))
			var beta v1beta1.PersistentPodState
			require.NoError(t, persistentPodStateToV1beta1(&alpha, &beta))
			got, err := json.Marshal(&beta)
			require.NoError(t, err)
			require.JSONEq(t, tc.beta, string(got))

			beta = v1beta1.PersistentPodState{}
			require.NoError(t, json.Unmarshal([]byte(tc.beta), &beta))
			alpha = v1alpha1.PersistentPodState{}
			require.NoError(t, persistentPodStateToV1alpha1(&beta, &alpha))
			got, err = json.Marshal(&alpha)
			require.NoError(t, err)
			require.JSONEq(t, tc.alpha, string(got))
		})
	}
}
