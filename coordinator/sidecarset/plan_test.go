package sidecarset

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

const emptyImage = "registry.local/empty:1"

var now = metav1.NewTime(time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC))

// coldSet is a SidecarSet with one cold sidecar "log" at image.
func coldSet(image string) *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "scs", ResourceVersion: "42"},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "log", Image: image}}},
		},
	}
}

// hotSet is a SidecarSet with one hot-upgrade sidecar "mesh" at image.
func hotSet(image string) *v1beta1.SidecarSet {
	s := coldSet(image)
	s.Spec.Containers = []v1beta1.SidecarContainer{{
		Container:       corev1.Container{Name: "mesh", Image: image},
		UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: emptyImage},
	}}
	return s
}

// injectedPod is a ready pod named name whose containers run at the given
// images, injected with set at hash and hash-without-image.
func injectedPod(t *testing.T, set *v1beta1.SidecarSet, name, hash, withoutImage string, images map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), Labels: map[string]string{"app": "web"}, Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "app:1"}}},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, ContainerID: "c://main", ImageID: "sha256:app1"}},
		},
	}
	for _, c := range []string{"log", "mesh-1", "mesh-2"} {
		img, ok := images[c]
		if !ok {
			continue
		}
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: img})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses,
			corev1.ContainerStatus{Name: c, Ready: true, ContainerID: "c://" + c + "-a", ImageID: "sha256:" + img,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	for annotation, h := range map[string]string{wellknown.AnnotationSidecarSetHash: hash, wellknown.AnnotationSidecarSetHashWithoutImage: withoutImage} {
		require.NoError(t, sidecarcontrol.SetPodUpgradeSpec(pod, annotation, sidecarcontrol.UpgradeSpec{Hash: h, SidecarSetName: set.Name}))
	}
	if _, ok := images["mesh-1"]; ok {
		pod.Annotations[wellknown.AnnotationSidecarSetWorkingHotUpgradeContainer] = `{"mesh":"mesh-1"}`
	}
	return pod
}

// restarted marks container name of pod as running a new instance at
// image, ready or not.
func restarted(pod *corev1.Pod, name, image string, ready bool) {
	for i := range pod.Status.ContainerStatuses {
		if cs := &pod.Status.ContainerStatuses[i]; cs.Name == name {
			cs.ContainerID, cs.ImageID, cs.Ready = "c://"+name+"-b", "sha256:"+image, ready
		}
	}
}

func names(pods []*corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPick(t *testing.T) {
	pct := intstr.FromString("50%")
	two := intstr.FromInt32(2)
	three := intstr.FromInt32(3)
	cases := []struct {
		name     string
		strategy v1beta1.SidecarSetUpdateStrategy
		// pods: one per entry, "old" (behind, image only), "new"
		// (updated, ready), "bad" (updated, not ready), "frozen"
		// (behind in more than images), "other" (old, label app=other).
		pods              []string
		want, notUpgraded []string
	}{
		{name: "maxUnavailable defaults to one", pods: []string{"old", "old", "old"}, want: []string{"p0"}},
		{name: "maxUnavailable three", strategy: v1beta1.SidecarSetUpdateStrategy{MaxUnavailable: &three},
			pods: []string{"old", "old", "old"}, want: []string{"p0", "p1", "p2"}},
		{name: "percentage rounds down", strategy: v1beta1.SidecarSetUpdateStrategy{MaxUnavailable: &pct, Partition: nil},
			pods: []string{"old", "old", "old"}, want: []string{"p0"}},
		{name: "partition keeps pods old", strategy: v1beta1.SidecarSetUpdateStrategy{Partition: &two, MaxUnavailable: &three},
			pods: []string{"old", "old", "old"}, want: []string{"p0"}},
		{name: "an updated pod not ready holds the budget", pods: []string{"bad", "old", "old"}, want: []string{}},
		{name: "updated ready pods do not count", pods: []string{"new", "old"}, want: []string{"p1"}},
		{name: "more than images changed", pods: []string{"frozen", "old"}, want: []string{"p1"}, notUpgraded: []string{"p0"}},
		{name: "selector limits the update",
			strategy: v1beta1.SidecarSetUpdateStrategy{MaxUnavailable: &three, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}},
			pods:     []string{"old", "canary", "old"}, want: []string{"p1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := coldSet("log:2")
			set.Spec.UpdateStrategy = tc.strategy
			tgt := &target{set: set, hash: "h2", hashWithoutImage: "w1", revision: "scs-2"}
			var states []podState
			for i, kind := range tc.pods {
				name := "p" + string(rune('0'+i))
				var pod *corev1.Pod
				switch kind {
				case "old", "canary":
					pod = injectedPod(t, set, name, "h1", "w1", map[string]string{"log": "log:1"})
					if kind == "canary" {
						pod.Labels["canary"] = "true"
					}
				case "new":
					pod = injectedPod(t, set, name, "h2", "w1", map[string]string{"log": "log:2"})
				case "bad":
					pod = injectedPod(t, set, name, "h2", "w1", map[string]string{"log": "log:bad"})
					pod.Status.Conditions[0].Status = corev1.ConditionFalse
				case "frozen":
					pod = injectedPod(t, set, name, "h0", "w0", map[string]string{"log": "log:0"})
				}
				states = append(states, classify(tgt, pod))
			}
			up, frozen, err := pick(tgt, states)
			require.NoError(t, err)
			require.Equal(t, tc.want, names(up))
			if tc.notUpgraded == nil {
				tc.notUpgraded = []string{}
			}
			require.Equal(t, tc.notUpgraded, names(frozen))
		})
	}
}

func TestColdUpgradeAndConsistency(t *testing.T) {
	set := coldSet("log:2")
	tgt := &target{set: set, hash: "h2", hashWithoutImage: "w1", revision: "scs-2"}
	pod := injectedPod(t, set, "p0", "h1", "w1", map[string]string{"log": "log:1"})

	p, err := upgraded(tgt, pod, now)
	require.NoError(t, err)
	require.Equal(t, "log:2", containerSpec(p, "log").Image)
	require.Equal(t, "app:1", containerSpec(p, "main").Image)
	spec := sidecarcontrol.PodUpgradeSpecs(p, wellknown.AnnotationSidecarSetHash)["scs"]
	require.Equal(t, "h2", spec.Hash)
	require.Equal(t, "scs-2", spec.ControllerRevision)
	require.Equal(t, []string{"log"}, spec.SidecarList)

	s := classify(tgt, p)
	require.True(t, s.updated)
	require.False(t, s.consistent, "the kubelet has not restarted the sidecar yet")
	require.True(t, s.busy)

	restarted(p, "log", "log:2", false)
	s = classify(tgt, p)
	require.True(t, s.consistent)
	require.False(t, s.busy)
	require.Equal(t, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 1, ReadyPods: 1, UpdatedReadyPods: 1, LatestRevision: "scs-2"},
		computeStatus(tgt, []podState{s}))
}

func TestHotUpgradeAndFlip(t *testing.T) {
	set := hotSet("mesh:2")
	tgt := &target{set: set, hash: "h2", hashWithoutImage: "w1", revision: "scs-2"}
	pod := injectedPod(t, set, "p0", "h1", "w1", map[string]string{"mesh-1": "mesh:1", "mesh-2": emptyImage})
	pod.Annotations[wellknown.AnnotationSidecarSetVersionPrefix+"mesh-1"] = "1"
	pod.Annotations[wellknown.AnnotationSidecarSetVersionAltPrefix+"mesh-1"] = "0"
	pod.Annotations[wellknown.AnnotationSidecarSetVersionPrefix+"mesh-2"] = "0"
	pod.Annotations[wellknown.AnnotationSidecarSetVersionAltPrefix+"mesh-2"] = "1"
	require.True(t, classify(tgt, pod).ready)
	require.False(t, needsFlip(set, pod))

	p, err := upgraded(tgt, pod, now)
	require.NoError(t, err)
	require.Equal(t, "mesh:1", containerSpec(p, "mesh-1").Image, "the working container keeps serving")
	require.Equal(t, "mesh:2", containerSpec(p, "mesh-2").Image, "the empty container takes the new image")
	require.Equal(t, map[string]string{"mesh": "mesh-2"}, sidecarcontrol.WorkingHotUpgradeContainers(p))
	require.Equal(t, "42", p.Annotations[wellknown.AnnotationSidecarSetVersionPrefix+"mesh-2"])
	require.Equal(t, "1", p.Annotations[wellknown.AnnotationSidecarSetVersionAltPrefix+"mesh-2"], "the version it takes over from")
	require.Equal(t, "42", p.Annotations[wellknown.AnnotationSidecarSetVersionAltPrefix+"mesh-1"])
	require.False(t, podReady(set, p), "the old container does not hold the empty image yet")
	require.False(t, needsFlip(set, p), "the new container has not started")

	restarted(p, "mesh-2", "mesh:2", true)
	require.True(t, needsFlip(set, p))
	f, reset, err := flipped(set, p, now)
	require.NoError(t, err)
	require.Equal(t, []string{"mesh-1"}, reset)
	require.Equal(t, emptyImage, containerSpec(f, "mesh-1").Image)
	require.Equal(t, "mesh:2", containerSpec(f, "mesh-2").Image)
	require.Equal(t, "0", f.Annotations[wellknown.AnnotationSidecarSetVersionPrefix+"mesh-1"])
	require.Equal(t, "0", f.Annotations[wellknown.AnnotationSidecarSetVersionAltPrefix+"mesh-2"])
	require.True(t, podReady(set, f))
	require.False(t, needsFlip(set, f))

	// The next upgrade goes back to mesh-1, the container now empty.
	restarted(f, "mesh-1", emptyImage, true)
	tgt3 := &target{set: hotSet("mesh:3"), hash: "h3", hashWithoutImage: "w1", revision: "scs-3"}
	n, err := upgraded(tgt3, f, now)
	require.NoError(t, err)
	require.Equal(t, "mesh:3", containerSpec(n, "mesh-1").Image)
	require.Equal(t, map[string]string{"mesh": "mesh-1"}, sidecarcontrol.WorkingHotUpgradeContainers(n))
}

func TestInjectedSkipsInconsistentPods(t *testing.T) {
	// A pod injected while "mesh" was a cold sidecar is not updated by a
	// set that now hot-upgrades it (kruise#855).
	set := hotSet("mesh:2")
	pod := injectedPod(t, set, "p0", "h1", "w1", map[string]string{})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "mesh", Image: "mesh:1"})
	require.False(t, injected(set, pod))
	require.True(t, injected(set, injectedPod(t, set, "p1", "h1", "w1", map[string]string{"mesh-1": "mesh:1", "mesh-2": emptyImage})))
	other := coldSet("log:1")
	other.Name = "other"
	require.False(t, injected(other, pod), "not injected with that set")
}

func TestUpgradableCondition(t *testing.T) {
	pod := &corev1.Pod{}
	cond, changed := upgradableCondition(pod, "a", false, now)
	require.True(t, changed)
	require.Equal(t, corev1.ConditionFalse, cond.Status)
	require.Equal(t, "UpdateImmutableField", cond.Reason)
	pod.Status.Conditions = []corev1.PodCondition{cond}

	cond, changed = upgradableCondition(pod, "b", true, now)
	require.True(t, changed)
	require.Equal(t, corev1.ConditionFalse, cond.Status, "set a still cannot update the pod")
	kv := map[string]bool{}
	require.NoError(t, json.Unmarshal([]byte(cond.Message), &kv))
	require.Equal(t, map[string]bool{"a": false, "b": true}, kv)
	pod.Status.Conditions = []corev1.PodCondition{cond}

	cond, changed = upgradableCondition(pod, "a", true, now)
	require.True(t, changed)
	require.Equal(t, corev1.ConditionTrue, cond.Status)
	pod.Status.Conditions = []corev1.PodCondition{cond}
	_, changed = upgradableCondition(pod, "a", true, now)
	require.False(t, changed)
}
