package sidecarcontrol

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

func TestPodUpgradeSpecs(t *testing.T) {
	const key = wellknown.AnnotationSidecarSetHash
	withAnnotation := func(v string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{key: v}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want map[string]UpgradeSpec
	}{
		{"nil pod", nil, map[string]UpgradeSpec{}},
		{"absent", &corev1.Pod{}, map[string]UpgradeSpec{}},
		{"bad JSON", withAnnotation("{"), map[string]UpgradeSpec{}},
		{"null", withAnnotation("null"), map[string]UpgradeSpec{}},
		{"old format", withAnnotation(`{"log":"abc"}`), map[string]UpgradeSpec{"log": {Hash: "abc", SidecarSetName: "log"}}},
		{"current format", withAnnotation(`{"log":{"hash":"abc","sidecarSetName":"log","sidecarList":["logger"],"controllerRevision":"log-1","updateTimestamp":null}}`),
			map[string]UpgradeSpec{"log": {Hash: "abc", SidecarSetName: "log", SidecarList: []string{"logger"}, ControllerRevision: "log-1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PodUpgradeSpecs(tc.pod, key)
			require.NotNil(t, got)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestSetPodUpgradeSpec(t *testing.T) {
	const key = wellknown.AnnotationSidecarSetHashWithoutImage
	pod := &corev1.Pod{}
	require.NoError(t, SetPodUpgradeSpec(pod, key, UpgradeSpec{SidecarSetName: "a", Hash: "h1", SidecarList: []string{"x"}, UpdateTimestamp: testNow}))
	require.NoError(t, SetPodUpgradeSpec(pod, key, UpgradeSpec{SidecarSetName: "b", Hash: "h2"}))
	require.NoError(t, SetPodUpgradeSpec(pod, key, UpgradeSpec{SidecarSetName: "a", Hash: "h3", SidecarList: []string{"x"}, UpdateTimestamp: testNow}))
	got := PodUpgradeSpecs(pod, key)
	require.Len(t, got, 2)
	require.Equal(t, "h3", got["a"].Hash)
	require.True(t, got["a"].UpdateTimestamp.Time.Equal(testNow.Time))
	require.Equal(t, "h2", got["b"].Hash)
	require.Contains(t, pod.Annotations[key], `"sidecarList":["x"]`)
	require.NotContains(t, pod.Annotations[key], "controllerRevision", "omitted when empty")

	require.Error(t, SetPodUpgradeSpec(pod, key, UpgradeSpec{Hash: "h"}), "an entry needs its SidecarSet name")
	require.Error(t, SetPodUpgradeSpec(nil, key, UpgradeSpec{SidecarSetName: "a"}))

	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{key: "not json"}}}
	require.NoError(t, SetPodUpgradeSpec(bad, key, UpgradeSpec{SidecarSetName: "a", Hash: "h"}))
	require.Equal(t, "h", PodUpgradeSpecs(bad, key)["a"].Hash)
}

func TestHotUpgradeHelpers(t *testing.T) {
	a, b := HotUpgradeNames("mesh")
	require.Equal(t, "mesh-1", a)
	require.Equal(t, "mesh-2", b)
	require.Equal(t, "version.sidecarset.kruise.io/mesh-1", VersionAnnotation(a))
	require.Equal(t, "versionalt.sidecarset.kruise.io/mesh-2", VersionAltAnnotation(b))

	pod := &corev1.Pod{}
	require.Equal(t, map[string]string{}, WorkingHotUpgradeContainers(pod))
	require.NoError(t, SetWorkingHotUpgradeContainer(pod, "mesh", "mesh-2"))
	require.NoError(t, SetWorkingHotUpgradeContainer(pod, "dns", "dns-1"))
	require.Equal(t, map[string]string{"mesh": "mesh-2", "dns": "dns-1"}, WorkingHotUpgradeContainers(pod))
	pod.Annotations[wellknown.AnnotationSidecarSetWorkingHotUpgradeContainer] = "["
	require.Equal(t, map[string]string{}, WorkingHotUpgradeContainers(pod))

	require.Equal(t, []string{"a", "b"}, InjectedSidecarSets(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{wellknown.AnnotationSidecarSetInjectedList: "b,a,,b"},
	}}))
}
