package webhook

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// launch runs LaunchPriority on pod and returns the pod as patched.
func launch(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	resp := LaunchPriority(context.Background(), &admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw},
	})
	require.True(t, resp.Allowed)
	if resp.Patch == nil {
		return pod
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(t, err)
	patched, err := p.Apply(raw)
	require.NoError(t, err)
	out := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(patched, out))
	return out
}

// barrierKeys lists each container's barrier (ConfigMap/key), "" without.
func barrierKeys(pod *corev1.Pod) []string {
	var out []string
	for _, c := range pod.Spec.Containers {
		key := ""
		for _, e := range c.Env {
			if e.Name == "KRUISE_CONTAINER_BARRIER" {
				key = e.ValueFrom.ConfigMapKeyRef.Name + "/" + e.ValueFrom.ConfigMapKeyRef.Key
			}
		}
		out = append(out, key)
	}
	return out
}

func TestLaunchPriority(t *testing.T) {
	env := func(v string) []corev1.EnvVar {
		return []corev1.EnvVar{{Name: "KRUISE_CONTAINER_PRIORITY", Value: v}, {Name: "test", Value: "foo"}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		// OpenKruise: "container priority created by CloneSet": env 10 on the second.
		{"env priority", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main", Env: []corev1.EnvVar{{Name: "a", Value: "b"}}}, {Name: "c2", Env: env("10")}}}},
			[]string{"web-1-barrier/p_0", "web-1-barrier/p_10"}},
		// OpenKruise: "run with priorityAnnotation set".
		{"Ordered", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}, {Name: "c"}}}},
			[]string{"p-barrier/p_0", "p-barrier/p_-1", "p-barrier/p_-2"}},
		// OpenKruise: "run with no container priority".
		{"no priority", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}},
			[]string{"", ""}},
		{"equal priorities", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Env: env("5")}, {Name: "b", Env: env("5")}}}},
			[]string{"", ""}},
		{"one container", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := launch(t, tc.pod)
			require.Equal(t, tc.want, barrierKeys(got))
			if tc.want[0] != "" {
				require.Equal(t, "KRUISE_CONTAINER_BARRIER", got.Spec.Containers[0].Env[len(got.Spec.Containers[0].Env)-1].Name, "appended after the container's own env")
			}
		})
	}
	t.Run("generateName gets a name", func(t *testing.T) {
		got := launch(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Annotations: map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}})
		require.Regexp(t, `^web-[a-z0-9]{5}$`, got.Name)
		require.Equal(t, got.Name+"-barrier/p_0", barrierKeys(got)[0])
	})
}
