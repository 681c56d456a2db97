package sidecarcontrol

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func TestPatchPodMetadata(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		patches     []appsv1beta1.SidecarSetPatchPodMetadata
		want        map[string]string
		changed     bool
		wantErr     string
	}{
		{name: "nothing to do", annotations: map[string]string{"a": "1"}, want: map[string]string{"a": "1"}},
		{name: "Retain keeps the pod's value", annotations: map[string]string{"a": "1"},
			patches: []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"a": "2"}}},
			want:    map[string]string{"a": "1"}},
		{name: "Retain adds what is missing", annotations: nil,
			patches: []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"a": "2"}, PatchPolicy: appsv1beta1.SidecarSetRetainPatchPolicy}},
			want:    map[string]string{"a": "2"}, changed: true},
		{name: "Overwrite", annotations: map[string]string{"a": "1"},
			patches: []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"a": "2"}, PatchPolicy: appsv1beta1.SidecarSetOverwritePatchPolicy}},
			want:    map[string]string{"a": "2"}, changed: true},
		{name: "MergePatchJson merges", annotations: map[string]string{"a": `{"x":{"y":1,"z":2}}`},
			patches: []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"a": `{"x":{"z":3}}`}, PatchPolicy: appsv1beta1.SidecarSetMergePatchJsonPatchPolicy}},
			want:    map[string]string{"a": `{"x":{"y":1,"z":3}}`}, changed: true},
		{name: "MergePatchJson with an unchanged result", annotations: map[string]string{"a": `{"x":1}`},
			patches: []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"a": `{"x":1}`}, PatchPolicy: appsv1beta1.SidecarSetMergePatchJsonPatchPolicy}},
			want:    map[string]string{"a": `{"x":1}`}},
		{name: "MergePatchJson into a value that is not JSON", annotations: map[string]string{"a": "plain"},
			patches: []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"a": `{"x":1}`}, PatchPolicy: appsv1beta1.SidecarSetMergePatchJsonPatchPolicy}},
			want:    map[string]string{"a": "plain"}, wantErr: "annotation a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := &metav1.ObjectMeta{Annotations: tc.annotations}
			changed, err := PatchPodMetadata(meta, tc.patches)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.changed, changed)
			if len(tc.want) == 0 {
				require.Empty(t, meta.Annotations)
				return
			}
			for k, v := range tc.want {
				if len(v) > 0 && v[0] == '{' {
					require.JSONEq(t, v, meta.Annotations[k])
				} else {
					require.Equal(t, v, meta.Annotations[k])
				}
			}
		})
	}
}

func TestContainerNameFromField(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"c": "from-label"}, Annotations: map[string]string{"example.com/c": "from-annotation"}}}
	for _, tc := range []struct {
		path, want string
		err        bool
	}{
		{path: "metadata.name", want: "p"},
		{path: "metadata.labels['c']", want: "from-label"},
		{path: "metadata.annotations['example.com/c']", want: "from-annotation"},
		{path: "metadata.labels['missing']", want: ""},
		{path: "metadata.labels['bad key!']", err: true},
		{path: "metadata.labels", err: true},
		{path: "spec.nodeName", err: true},
		{path: "metadata.uid['x']", err: true},
		{path: "metadata.labels[c]", err: true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := containerNameFromField(&corev1.ObjectFieldSelector{FieldPath: tc.path}, pod)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
