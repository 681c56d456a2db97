package conversion

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type stashed struct {
	A *int32 `json:"a,omitempty"`
	B string `json:"b,omitempty"`
}

func TestStash(t *testing.T) {
	seven := int32(7)
	tests := []struct {
		name        string
		annotations map[string]string
		fields      stashed
		want        map[string]string
	}{
		{"nothing to keep writes nothing", nil, stashed{}, nil},
		{"fields as JSON", nil, stashed{A: &seven, B: "x"}, map[string]string{"conversion.shoal.io/v1beta1": `{"a":7,"b":"x"}`}},
		{"other annotations kept", map[string]string{"k": "v"}, stashed{B: "x"},
			map[string]string{"k": "v", "conversion.shoal.io/v1beta1": `{"b":"x"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Name: "o", Annotations: tc.annotations}
			require.NoError(t, Stash(obj, "v1beta1", &tc.fields))
			require.Equal(t, tc.want, obj.Annotations)

			var got stashed
			found, err := Unstash(obj, "v1beta1", &got)
			require.NoError(t, err)
			require.Equal(t, tc.want != nil && tc.want["conversion.shoal.io/v1beta1"] != "", found)
			require.Equal(t, tc.fields, got)
			require.Equal(t, tc.annotations, obj.Annotations, "the annotations the object had before")
		})
	}
}

func TestUnstashBadJSON(t *testing.T) {
	obj := &metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"conversion.shoal.io/v1alpha1": "{"}}
	var got stashed
	_, err := Unstash(obj, "v1alpha1", &got)
	require.ErrorContains(t, err, "annotation conversion.shoal.io/v1alpha1 of web")
}
