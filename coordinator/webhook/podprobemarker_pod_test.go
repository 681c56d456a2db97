package webhook

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// ppmSeedPodProbe is the kruise.io/podprobe value for a game-server pod
// under seed 000's game-server-probe: OpenKruise's shape, the probe as in
// the PodProbeMarker without markerPolicy.
const ppmSeedPodProbe = `[{"name":"Idle","containerName":"game-server","probe":{"exec":{"command":["/home/game/idle.sh"]},` +
	`"initialDelaySeconds":10,"timeoutSeconds":3,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"podConditionType":"game.io/idle"}]`

// ppmGameServerPod is a pod that seed 000's PodProbeMarker selects.
func ppmGameServerPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "game-server-58cb9f5688-7sbd8",
			Labels: map[string]string{"app": "game-server"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game-server", Image: "game:1"}}},
	}
}

// ppmMarker is a PodProbeMarker in ns selecting app=<app>, with one probe
// per entry of probes (container/name/conditionType).
func ppmMarker(name, app string, probes ...[3]string) *v1alpha1.PodProbeMarker {
	m := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       v1alpha1.PodProbeMarkerSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
	for _, p := range probes {
		m.Spec.Probes = append(m.Spec.Probes, v1alpha1.PodContainerProbe{
			ContainerName: p[0], Name: p[1], PodConditionType: p[2],
			Probe:        v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/probe.sh"}}}}},
			MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"ok": "true"}}},
		})
	}
	return m
}

// ppmInject runs the injector on a CREATE of pod and returns the response
// and the pod as patched.
func ppmInject(t *testing.T, inj *PodProbeMarkerInjector, req *admissionv1.AdmissionRequest, pod *corev1.Pod) (*admissionv1.AdmissionResponse, *corev1.Pod) {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	if req == nil {
		req = &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: pod.Namespace,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}}
	}
	req.Object = runtime.RawExtension{Raw: raw}
	resp := inj.Mutate(t.Context(), req)
	require.True(t, resp.Allowed, "the pod webhook never denies")
	if resp.Patch == nil {
		return resp, pod
	}
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	p, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(t, err)
	patched, err := p.Apply(raw)
	require.NoError(t, err)
	out := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(patched, out))
	return resp, out
}

// ppmMarkers returns a lister over markers that records the namespaces it
// was asked for.
func ppmMarkers(asked *[]string, markers ...*v1alpha1.PodProbeMarker) func(string) ([]*v1alpha1.PodProbeMarker, error) {
	return func(ns string) ([]*v1alpha1.PodProbeMarker, error) {
		if asked != nil {
			*asked = append(*asked, ns)
		}
		return markers, nil
	}
}

func TestPodProbeMarkerInjectorSeed(t *testing.T) {
	inj := NewPodProbeMarkerInjector(ppmMarkers(nil, ppmSeedGameServerProbeFixed(t)))
	pod := ppmGameServerPod()
	pod.Annotations = map[string]string{"keep": "me"}
	resp, got := ppmInject(t, inj, nil, pod)
	require.NotNil(t, resp.Patch)
	require.Equal(t, map[string]string{
		"keep":                          "me",
		"kruise.io/podprobe":            ppmSeedPodProbe,
		"kruise.io/podprobemarker-list": "game-server-probe",
	}, got.Annotations)
	require.Equal(t, pod.Spec, got.Spec, "only annotations change")
	require.Equal(t, pod.Labels, got.Labels)

	var probes []v1alpha1.PodContainerProbe
	require.NoError(t, json.Unmarshal([]byte(got.Annotations["kruise.io/podprobe"]), &probes))
	want := ppmSeedGameServerProbeFixed(t).Spec.Probes[0]
	want.MarkerPolicy = nil
	require.Equal(t, []v1alpha1.PodContainerProbe{want}, probes)
}

func TestPodProbeMarkerInjector(t *testing.T) {
	for _, tc := range []struct {
		name    string
		markers []*v1alpha1.PodProbeMarker
		pod     func(*corev1.Pod)
		probes  []string // container/name of the recorded probes, in order; nil: no patch
		list    string
	}{
		{name: "a pod no PodProbeMarker selects", markers: []*v1alpha1.PodProbeMarker{ppmMarker("web", "web", [3]string{"game-server", "idle", "a.io/idle"})}},
		{name: "no PodProbeMarkers in the namespace"},
		{name: "probes without podConditionType are left out (markerPolicy only)",
			markers: []*v1alpha1.PodProbeMarker{ppmMarker("m", "game-server", [3]string{"game-server", "idle", ""})}},
		{name: "a probe of a container the pod lacks is left out",
			markers: []*v1alpha1.PodProbeMarker{ppmMarker("m", "game-server",
				[3]string{"sidecar", "log", "a.io/log"}, [3]string{"game-server", "idle", "a.io/idle"})},
			probes: []string{"game-server/idle"}, list: "m"},
		{name: "restartable init containers count, plain ones do not",
			markers: []*v1alpha1.PodProbeMarker{ppmMarker("m", "game-server",
				[3]string{"native", "a", "a.io/a"}, [3]string{"setup", "b", "a.io/b"})},
			pod: func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "setup"}, {Name: "native", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
			},
			probes: []string{"native/a"}, list: "m"},
		{name: "several PodProbeMarkers, in name order, first condition type wins",
			markers: []*v1alpha1.PodProbeMarker{
				ppmMarker("zeta", "game-server", [3]string{"game-server", "z", "a.io/z"}, [3]string{"game-server", "idle2", "a.io/idle"}),
				ppmMarker("alpha", "game-server", [3]string{"game-server", "idle", "a.io/idle"}),
				ppmMarker("zz-only-dupes", "game-server", [3]string{"game-server", "idle", "a.io/other"}, [3]string{"game-server", "x", "a.io/z"}),
				ppmMarker("unrelated", "web", [3]string{"game-server", "w", "a.io/w"}),
			},
			probes: []string{"game-server/idle", "game-server/z"}, list: "alpha,zeta"},
		{name: "a PodProbeMarker without selector, with an empty or a malformed one selects nothing",
			markers: func() []*v1alpha1.PodProbeMarker {
				none, empty, bad := ppmMarker("none", "", [3]string{"game-server", "a", "a.io/a"}),
					ppmMarker("empty", "", [3]string{"game-server", "b", "a.io/b"}),
					ppmMarker("bad", "", [3]string{"game-server", "c", "a.io/c"})
				none.Spec.Selector = nil
				empty.Spec.Selector = &metav1.LabelSelector{}
				bad.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
				return []*v1alpha1.PodProbeMarker{none, empty, bad, nil}
			}()},
		{name: "a PodProbeMarker being deleted is skipped",
			markers: func() []*v1alpha1.PodProbeMarker {
				m := ppmMarker("m", "game-server", [3]string{"game-server", "idle", "a.io/idle"})
				m.DeletionTimestamp = &metav1.Time{}
				return []*v1alpha1.PodProbeMarker{m}
			}()},
		{name: "a PodProbeMarker of another namespace is skipped",
			markers: func() []*v1alpha1.PodProbeMarker {
				m := ppmMarker("m", "game-server", [3]string{"game-server", "idle", "a.io/idle"})
				m.Namespace = "elsewhere"
				return []*v1alpha1.PodProbeMarker{m}
			}()},
		{name: "matchExpressions selector; a pod without annotations gets the map",
			markers: func() []*v1alpha1.PodProbeMarker {
				m := ppmMarker("m", "", [3]string{"game-server", "idle", "a.io/idle"})
				m.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"game-server", "lobby"}}}}
				return []*v1alpha1.PodProbeMarker{m}
			}(),
			pod:    func(p *corev1.Pod) { p.Annotations = nil },
			probes: []string{"game-server/idle"}, list: "m"},
		{name: "values already on the pod are replaced",
			markers: []*v1alpha1.PodProbeMarker{ppmMarker("m", "game-server", [3]string{"game-server", "idle", "a.io/idle"})},
			pod: func(p *corev1.Pod) {
				p.Annotations = map[string]string{"kruise.io/podprobe": "[]", "kruise.io/podprobemarker-list": "stale", "other": "x"}
			},
			probes: []string{"game-server/idle"}, list: "m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := ppmGameServerPod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			resp, got := ppmInject(t, NewPodProbeMarkerInjector(ppmMarkers(nil, tc.markers...)), nil, pod)
			if tc.probes == nil {
				require.Nil(t, resp.Patch, "the pod is created unchanged")
				return
			}
			var probes []v1alpha1.PodContainerProbe
			require.NoError(t, json.Unmarshal([]byte(got.Annotations["kruise.io/podprobe"]), &probes))
			var keys []string
			for _, p := range probes {
				keys = append(keys, p.ContainerName+"/"+p.Name)
				require.Nil(t, p.MarkerPolicy)
			}
			require.Equal(t, tc.probes, keys)
			require.NotContains(t, got.Annotations["kruise.io/podprobe"], "markerPolicy")
			require.Equal(t, tc.list, got.Annotations["kruise.io/podprobemarker-list"])
			for k, v := range pod.Annotations {
				if k != "kruise.io/podprobe" && k != "kruise.io/podprobemarker-list" {
					require.Equal(t, v, got.Annotations[k], "annotation %s kept", k)
				}
			}
		})
	}
}

func TestPodProbeMarkerInjectorRequests(t *testing.T) {
	seed := ppmSeedGameServerProbeFixed(t)

	t.Run("a pod without namespace is looked up in the request's", func(t *testing.T) {
		var asked []string
		pod := ppmGameServerPod()
		pod.Namespace = ""
		_, got := ppmInject(t, NewPodProbeMarkerInjector(ppmMarkers(&asked, seed)),
			&admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "ns"}, pod)
		require.Equal(t, []string{"ns"}, asked)
		require.Equal(t, ppmSeedPodProbe, got.Annotations["kruise.io/podprobe"])
	})

	t.Run("a pod with generateName only", func(t *testing.T) {
		pod := ppmGameServerPod()
		pod.Name, pod.GenerateName = "", "game-server-58cb9f5688-"
		_, got := ppmInject(t, NewPodProbeMarkerInjector(ppmMarkers(nil, seed)), nil, pod)
		require.Equal(t, "game-server-probe", got.Annotations["kruise.io/podprobemarker-list"])
	})

	t.Run("a listing error lets the pod through unchanged", func(t *testing.T) {
		inj := NewPodProbeMarkerInjector(func(string) ([]*v1alpha1.PodProbeMarker, error) { return nil, errors.New("cache not synced") })
		resp, _ := ppmInject(t, inj, nil, ppmGameServerPod())
		require.Nil(t, resp.Patch)
		require.Nil(t, resp.Result)
	})

	t.Run("only CREATE of the pod itself", func(t *testing.T) {
		var asked []string
		inj := NewPodProbeMarkerInjector(ppmMarkers(&asked, seed))
		for _, req := range []*admissionv1.AdmissionRequest{
			{Operation: admissionv1.Update, Namespace: "ns"},
			{Operation: admissionv1.Delete, Namespace: "ns"},
			{Operation: admissionv1.Create, Namespace: "ns", SubResource: "binding"},
		} {
			resp, _ := ppmInject(t, inj, req, ppmGameServerPod())
			require.Nil(t, resp.Patch, "%s %s", req.Operation, req.SubResource)
		}
		require.Empty(t, asked, "PodProbeMarkers are not even listed")
	})

	t.Run("an object that is not a pod is let through", func(t *testing.T) {
		inj := NewPodProbeMarkerInjector(ppmMarkers(nil, seed))
		resp := inj.Mutate(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{"spec":"x"}`)}})
		require.True(t, resp.Allowed)
		require.Nil(t, resp.Patch)
		resp = inj.Mutate(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create})
		require.True(t, resp.Allowed)
	})
}
