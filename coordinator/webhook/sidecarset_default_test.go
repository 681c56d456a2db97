package webhook

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestDefaultSidecarSet(t *testing.T) {
	set := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{
		InitContainers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "init"}}},
		Containers: []v1beta1.SidecarContainer{
			{Container: corev1.Container{Name: "a"}},
			{Container: corev1.Container{Name: "b"}, PodInjectPolicy: v1beta1.AfterAppContainerType},
		},
	}}
	raw, err := json.Marshal(set)
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		op        admissionv1.Operation
		wantPatch bool
	}{
		{"create", admissionv1.Create, true},
		{"update", admissionv1.Update, true},
		{"delete", admissionv1.Delete, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := DefaultSidecarSet(t.Context(), &admissionv1.AdmissionRequest{Operation: tc.op, Object: runtime.RawExtension{Raw: raw}})
			require.True(t, resp.Allowed)
			if !tc.wantPatch {
				require.Empty(t, resp.Patch)
				return
			}
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			require.NoError(t, err)
			out, err := patch.Apply(raw)
			require.NoError(t, err)
			got := &v1beta1.SidecarSet{}
			require.NoError(t, json.Unmarshal(out, got))
			require.Equal(t, v1beta1.BeforeAppContainerType, got.Spec.Containers[0].PodInjectPolicy)
			require.Equal(t, v1beta1.AfterAppContainerType, got.Spec.Containers[1].PodInjectPolicy, "a set policy stays")
			require.Equal(t, v1beta1.AfterAppContainerType, got.Spec.InitContainers[0].PodInjectPolicy)
		})
	}
}
