package webhook

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

func TestPodReadinessGate(t *testing.T) {
	gate := corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateKruisePodReady}
	other := corev1.PodReadinessGate{ConditionType: "example.com/ready"}
	for _, tc := range []struct {
		name    string
		enabled bool
		op      admissionv1.Operation
		gates   []corev1.PodReadinessGate
		want    []corev1.PodReadinessGate // nil: no patch
	}{
		{name: "disabled", enabled: false, op: admissionv1.Create},
		{name: "no gates", enabled: true, op: admissionv1.Create, want: []corev1.PodReadinessGate{gate}},
		{name: "another gate", enabled: true, op: admissionv1.Create, gates: []corev1.PodReadinessGate{other}, want: []corev1.PodReadinessGate{other, gate}},
		{name: "already there", enabled: true, op: admissionv1.Create, gates: []corev1.PodReadinessGate{gate}},
		{name: "update", enabled: true, op: admissionv1.Update},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
				Spec:       corev1.PodSpec{ReadinessGates: tc.gates, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			}
			raw, err := json.Marshal(pod)
			require.NoError(t, err)
			resp := PodReadinessGate(tc.enabled)(context.Background(), &admissionv1.AdmissionRequest{
				Operation: tc.op, Object: runtime.RawExtension{Raw: raw},
			})
			require.True(t, resp.Allowed)
			if tc.want == nil {
				require.Empty(t, resp.Patch)
				return
			}
			require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
			// The fake clientset applies the JSON patch as the apiserver would.
			client := kubefake.NewClientset(pod)
			got, err := client.CoreV1().Pods("ns").Patch(context.Background(), "p", types.JSONPatchType, resp.Patch, metav1.PatchOptions{})
			require.NoError(t, err, "patch %s", resp.Patch)
			require.Equal(t, tc.want, got.Spec.ReadinessGates)
		})
	}
}
