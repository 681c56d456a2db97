package launchpriority

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// barrierPod has containers with priorities prio (by name, in order) and
// the ready ones.
func barrierPod(names []string, prio []int, ready ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	for i, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Env: []corev1.EnvVar{{
			Name: wellknown.EnvContainerBarrier, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "p-barrier"}, Key: "p_" + itoa(prio[i]),
			}},
		}}})
		st := corev1.ContainerStatus{Name: n}
		for _, r := range ready {
			st.Ready = st.Ready || r == n
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, st)
	}
	return pod
}

func itoa(i int) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestNextKeys(t *testing.T) {
	names := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		written  map[string]string
		wantKey  string
		wantDone bool
	}{
		{"nothing ready: the highest first", barrierPod(names, []int{0, -1, -2}), nil, "p_0", false},
		{"the first ready: the next", barrierPod(names, []int{0, -1, -2}, "a"), map[string]string{"p_0": "true"}, "p_-1", false},
		{"env priorities, highest is 10", barrierPod([]string{"app", "c2"}, []int{0, 10}), nil, "p_10", false},
		{"all ready, lowest written: done", barrierPod(names, []int{0, -1, -2}, "a", "b", "c"),
			map[string]string{"p_0": "true", "p_-1": "true", "p_-2": "true"}, "", true},
		{"the last key just written", barrierPod(names, []int{0, -1, -2}, "a", "b"), map[string]string{"p_0": "true", "p_-1": "true", "p_-2": "true"}, "p_-2", true},
		{"a restarted high container asks again for its key (already there)", barrierPod(names, []int{0, -1, -2}, "b"), map[string]string{"p_0": "true", "p_-1": "true"}, "p_0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, done := nextKeys(tc.pod, tc.written)
			require.Equal(t, tc.wantKey, key)
			require.Equal(t, tc.wantDone, done)
		})
	}
}

func TestWaiting(t *testing.T) {
	pod := barrierPod([]string{"a", "b"}, []int{0, 1})
	require.True(t, waiting(pod))
	pod.Annotations = map[string]string{wellknown.AnnotationContainerLaunchPriorityCompleted: "true"}
	require.False(t, waiting(pod), "completed")
	require.False(t, waiting(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}), "no barrier")
}
