package podprobemarker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// gameMarker is seed 000's game-server-probe: an exec probe whose state
// sets the gameserver-idle label and the deletion cost.
func gameMarker() *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Name: "game-server-probe", Namespace: "ns"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game-server"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: "Idle", ContainerName: "game-server", PodConditionType: "game.io/idle",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"/home/game/idle.sh"}},
				}}},
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
					{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"gameserver-idle": "true"},
						Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-10"}},
					{State: v1alpha1.ProbeFailed, Labels: map[string]string{"gameserver-idle": "false"},
						Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "10"}},
				},
			}, {
				Name: "Http", ContainerName: "game-server",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")},
				}}},
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"serving": "yes"}}},
			}},
		},
	}
}

func gamePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "game-0", Namespace: "ns", UID: "uid-0", Labels: map[string]string{"app": "game-server"}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{
			Name: "game-server", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
			Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}},
	}
}

func TestPodProbes(t *testing.T) {
	spec, skipped := podProbes([]*v1alpha1.PodProbeMarker{gameMarker()}, gamePod())
	require.Empty(t, skipped)
	require.Equal(t, "uid-0", spec.GetPodUid())
	require.Equal(t, "10.0.0.7", spec.GetPodIp())
	require.Len(t, spec.GetProbes(), 2)
	require.Equal(t, "game-server-probe#Idle", spec.GetProbes()[0].GetName())
	var http corev1.Probe
	require.NoError(t, json.Unmarshal(spec.GetProbes()[1].GetProbeJson(), &http))
	require.Equal(t, intstr.FromInt32(8080), http.HTTPGet.Port, "the named port is resolved")

	for name, change := range map[string]func(*corev1.Pod){
		"not initialized":   func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
		"not scheduled":     func(p *corev1.Pod) { p.Spec.NodeName = "" },
		"no IP":             func(p *corev1.Pod) { p.Status.PodIP = "" },
		"finished":          func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
		"not selected":      func(p *corev1.Pod) { p.Labels = nil },
		"being deleted now": func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} },
	} {
		t.Run(name, func(t *testing.T) {
			pod := gamePod()
			change(pod)
			spec, _ := podProbes([]*v1alpha1.PodProbeMarker{gameMarker()}, pod)
			require.Nil(t, spec)
		})
	}
	t.Run("unknown named port", func(t *testing.T) {
		pod := gamePod()
		pod.Spec.Containers[0].Ports = nil
		spec, skipped := podProbes([]*v1alpha1.PodProbeMarker{gameMarker()}, pod)
		require.Len(t, spec.GetProbes(), 1)
		require.Len(t, skipped, 1)
		require.Contains(t, skipped[0], `no port named "http"`)
	})
}

func result(state nodeworkv1.ProbeState, msg string) map[string]*nodeworkv1.ProbeResult {
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC).UnixNano()
	return map[string]*nodeworkv1.ProbeResult{"game-server-probe#Idle": {
		Name: "game-server-probe#Idle", State: state, Message: msg, LastProbeUnixNanos: at, LastTransitionUnixNanos: at,
	}}
}

func TestChanges(t *testing.T) {
	markers := []*v1alpha1.PodProbeMarker{gameMarker()}
	pod := gamePod()

	u := changes(markers, pod, result(nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED, "idle"))
	require.Len(t, u.conditions, 1)
	require.Equal(t, corev1.ConditionTrue, u.conditions[0].Status)
	require.Equal(t, "idle", u.conditions[0].Message)
	require.Equal(t, "true", *u.labels["gameserver-idle"])
	require.Equal(t, "-10", *u.annotations["controller.kubernetes.io/pod-deletion-cost"])
	require.Contains(t, u.describe(), "game-server-probe#Idle is Succeeded")

	// The pod shows it: nothing to write.
	pod.Labels["gameserver-idle"] = "true"
	pod.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-10"}
	pod.Status.Conditions = append(pod.Status.Conditions, u.conditions[0])
	require.True(t, changes(markers, pod, result(nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED, "idle")).empty())

	// Failed: the other policy's values, condition False with stderr.
	u = changes(markers, pod, result(nodeworkv1.ProbeState_PROBE_STATE_FAILED, "players: 3"))
	require.Equal(t, corev1.ConditionFalse, u.conditions[0].Status)
	require.Equal(t, "players: 3", u.conditions[0].Message)
	require.Equal(t, "false", *u.labels["gameserver-idle"])
	require.Equal(t, "10", *u.annotations["controller.kubernetes.io/pod-deletion-cost"])

	// Unknown: condition False, every policy's keys removed.
	u = changes(markers, pod, result(nodeworkv1.ProbeState_PROBE_STATE_UNSPECIFIED, ""))
	require.Equal(t, corev1.ConditionFalse, u.conditions[0].Status)
	require.Contains(t, u.labels, "gameserver-idle")
	require.Nil(t, u.labels["gameserver-idle"])
	require.Nil(t, u.annotations["controller.kubernetes.io/pod-deletion-cost"])

	// A Succeeded-only policy loses its keys when the probe fails.
	pod.Labels["serving"] = "yes"
	u = changes(markers, pod, map[string]*nodeworkv1.ProbeResult{"game-server-probe#Http": {Name: "game-server-probe#Http", State: nodeworkv1.ProbeState_PROBE_STATE_FAILED}})
	require.Contains(t, u.labels, "serving")
	require.Nil(t, u.labels["serving"])
	require.Empty(t, u.conditions, "the probe has no podConditionType")
}

func TestChangesFirstMarkerOwnsCondition(t *testing.T) {
	a, b := gameMarker(), gameMarker()
	a.Name, b.Name = "a", "b"
	b.Spec.Probes[0].MarkerPolicy = nil
	results := map[string]*nodeworkv1.ProbeResult{
		"a#Idle": {Name: "a#Idle", State: nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED},
		"b#Idle": {Name: "b#Idle", State: nodeworkv1.ProbeState_PROBE_STATE_FAILED},
	}
	u := changes([]*v1alpha1.PodProbeMarker{b, a}, gamePod(), results)
	require.Len(t, u.conditions, 1)
	require.Equal(t, corev1.ConditionTrue, u.conditions[0].Status, "marker a (first by name) owns game.io/idle")
}

func TestStatusPatchClearsTheMessage(t *testing.T) {
	u := &podUpdate{conditions: []corev1.PodCondition{{Type: "game.io/idle", Status: corev1.ConditionTrue}}}
	raw, err := u.patch("uid-0")
	require.NoError(t, err)
	var patch struct {
		Status struct {
			Conditions []map[string]any `json:"conditions"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal(raw, &patch))
	msg, ok := patch.Status.Conditions[0]["message"]
	require.True(t, ok, "the patch sets the message even when it is empty")
	require.Empty(t, msg)
}
