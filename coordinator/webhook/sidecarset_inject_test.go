package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// scsInjectTestSet returns a SidecarSet selecting app=web.
func scsInjectTestSet(name string, containers ...appsv1beta1.SidecarContainer) *appsv1beta1.SidecarSet {
	return &appsv1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: containers,
		},
	}
}

// scsInjectTestPod is the raw pod sent for admission: generateName only,
// no annotations, an app container with a field this client library
// does not know (which must survive the patch).
const scsInjectTestPod = `{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"generateName": "web-", "namespace": "ns1", "labels": {"app": "web"}},
  "spec": {
    "containers": [{"name": "app", "image": "app:1", "futureField": {"x": 1},
      "resources": {"limits": {"cpu": "1"}},
      "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
    "volumes": [{"name": "data", "emptyDir": {}}]
  }
}`

// scsInjectAdmit sends raw to injector as a pod CREATE and returns the
// response and, when allowed, the patched pod as raw JSON.
func scsInjectAdmit(t *testing.T, injector *SidecarSetInjector, op admissionv1.Operation, raw string) (*admissionv1.AdmissionResponse, []byte) {
	t.Helper()
	resp := injector.Mutate(context.Background(), &admissionv1.AdmissionRequest{
		Operation: op, Namespace: "ns1",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: []byte(raw)},
	})
	if !resp.Allowed || resp.Patch == nil {
		return resp, []byte(raw)
	}
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	p, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(t, err)
	patched, err := p.Apply([]byte(raw))
	require.NoError(t, err)
	return resp, patched
}

func TestSidecarSetInjector(t *testing.T) {
	now := metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	logger := appsv1beta1.SidecarContainer{Container: corev1.Container{Name: "logger", Image: "logger:1",
		VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}}}}
	logger.ShareVolumePolicy.Type = appsv1beta1.ShareVolumePolicyEnabled
	exporter := appsv1beta1.SidecarContainer{Container: corev1.Container{Name: "exporter", Image: "exporter:1"}, PodInjectPolicy: appsv1beta1.AfterAppContainerType}
	mesh := appsv1beta1.SidecarContainer{Container: corev1.Container{Name: "mesh", Image: "mesh:1"}}
	mesh.UpgradeStrategy = appsv1beta1.SidecarContainerUpgradeStrategy{UpgradeType: appsv1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
	native := appsv1beta1.SidecarContainer{Container: corev1.Container{Name: "proxy", Image: "proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}

	logSet := scsInjectTestSet("log", logger, exporter)
	logSet.Spec.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	logSet.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "cred"}}
	logSet.Spec.PatchPodMetadata = []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"example.com/team": "infra"}}}
	meshSet := scsInjectTestSet("mesh", mesh)
	meshSet.Spec.InitContainers = []appsv1beta1.SidecarContainer{native}

	sets := func(s ...*appsv1beta1.SidecarSet) func() ([]*appsv1beta1.SidecarSet, error) {
		return func() ([]*appsv1beta1.SidecarSet, error) { return s, nil }
	}
	namespaces := func(name string) (*corev1.Namespace, error) {
		if name != "ns1" {
			return nil, errors.New("not found")
		}
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"mesh": "on"}}}, nil
	}
	newInjector := func(s func() ([]*appsv1beta1.SidecarSet, error), ns func(string) (*corev1.Namespace, error), revs sidecarcontrol.RevisionGetter) *SidecarSetInjector {
		i := NewSidecarSetInjector(s, ns, revs)
		i.now = func() metav1.Time { return now }
		return i
	}

	t.Run("injects and patches only what changes", func(t *testing.T) {
		resp, raw := scsInjectAdmit(t, newInjector(sets(meshSet, logSet), namespaces, nil), admissionv1.Create, scsInjectTestPod)
		require.True(t, resp.Allowed)
		require.NotNil(t, resp.Patch)
		pod := &corev1.Pod{}
		require.NoError(t, json.Unmarshal(raw, pod))

		names := func(cs []corev1.Container) []string {
			var out []string
			for _, c := range cs {
				out = append(out, c.Name)
			}
			return out
		}
		require.Equal(t, []string{"logger", "mesh-1", "mesh-2", "app", "exporter"}, names(pod.Spec.Containers))
		require.Equal(t, []string{"proxy"}, names(pod.Spec.InitContainers))
		require.Equal(t, "empty:1", pod.Spec.Containers[2].Image)
		require.Equal(t, []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}, {Name: "data", MountPath: "/data"}}, pod.Spec.Containers[0].VolumeMounts)
		require.Equal(t, resource.MustParse("1"), pod.Spec.Containers[3].Resources.Limits[corev1.ResourceCPU])
		require.Equal(t, []string{"data", "logs"}, func() []string {
			var out []string
			for _, v := range pod.Spec.Volumes {
				out = append(out, v.Name)
			}
			return out
		}())
		require.Equal(t, []corev1.LocalObjectReference{{Name: "cred"}}, pod.Spec.ImagePullSecrets)
		require.Equal(t, "infra", pod.Annotations["example.com/team"])
		require.Equal(t, "log,mesh", pod.Annotations[wellknown.AnnotationSidecarSetInjectedList])
		require.Equal(t, map[string]string{"mesh": "mesh-1"}, sidecarcontrol.WorkingHotUpgradeContainers(pod))
		require.Equal(t, "1", pod.Annotations[wellknown.AnnotationSidecarSetVersionPrefix+"mesh-1"])
		specs := sidecarcontrol.PodUpgradeSpecs(pod, wellknown.AnnotationSidecarSetHash)
		require.Equal(t, []string{"exporter", "logger"}, specs["log"].SidecarList)
		require.Equal(t, []string{"mesh", "proxy"}, specs["mesh"].SidecarList)
		require.True(t, specs["log"].UpdateTimestamp.Time.Equal(now.Time))
		require.Empty(t, pod.Name, "the pod keeps its generateName")

		// The app container is not rewritten: a field unknown to this
		// client library survives.
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out))
		app := out["spec"].(map[string]any)["containers"].([]any)[3].(map[string]any)
		require.Equal(t, "app", app["name"])
		require.Equal(t, map[string]any{"x": float64(1)}, app["futureField"])
	})

	t.Run("pod with annotations gets one op per key", func(t *testing.T) {
		raw := `{"metadata":{"name":"web-0","namespace":"ns1","labels":{"app":"web"},"annotations":{"a/b":"c"}},"spec":{"containers":[{"name":"app","image":"app:1"}]}}`
		resp, patched := scsInjectAdmit(t, newInjector(sets(logSet), nil, nil), admissionv1.Create, raw)
		require.True(t, resp.Allowed)
		var ops []jsonPatchOp
		require.NoError(t, json.Unmarshal(resp.Patch, &ops))
		for _, op := range ops {
			require.NotEqual(t, "/metadata/annotations", op.Path, "the pod's annotations are not replaced as a whole")
		}
		pod := &corev1.Pod{}
		require.NoError(t, json.Unmarshal(patched, pod))
		require.Equal(t, "c", pod.Annotations["a/b"])
		require.Equal(t, "log", pod.Annotations[wellknown.AnnotationSidecarSetInjectedList])
	})

	t.Run("namespace read only when a namespaceSelector needs it", func(t *testing.T) {
		sel := meshSet.DeepCopy()
		sel.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"mesh": "on"}}
		resp, raw := scsInjectAdmit(t, newInjector(sets(sel), namespaces, nil), admissionv1.Create, scsInjectTestPod)
		require.True(t, resp.Allowed)
		require.Contains(t, string(raw), "mesh-1")

		failing := func(string) (*corev1.Namespace, error) { return nil, errors.New("informer not synced") }
		resp, _ = scsInjectAdmit(t, newInjector(sets(sel), failing, nil), admissionv1.Create, scsInjectTestPod)
		require.False(t, resp.Allowed)
		require.Contains(t, resp.Result.Message, `namespace "ns1"`)
		require.Contains(t, resp.Result.Message, "informer not synced")

		resp, raw = scsInjectAdmit(t, newInjector(sets(logSet), failing, nil), admissionv1.Create, scsInjectTestPod)
		require.True(t, resp.Allowed, "no namespaceSelector, no lookup")
		require.Contains(t, string(raw), "logger")
	})

	t.Run("conflicting SidecarSets deny the pod", func(t *testing.T) {
		other := scsInjectTestSet("another-log", appsv1beta1.SidecarContainer{Container: corev1.Container{Name: "logger", Image: "x"}})
		resp, _ := scsInjectAdmit(t, newInjector(sets(logSet, other), nil, nil), admissionv1.Create, scsInjectTestPod)
		require.False(t, resp.Allowed)
		require.Equal(t, int32(403), resp.Result.Code)
		require.Contains(t, resp.Result.Message, "SidecarSets another-log and log")
		require.Contains(t, resp.Result.Message, `"logger"`)
	})

	t.Run("a missing revision denies the pod", func(t *testing.T) {
		pinned := logSet.DeepCopy()
		pinned.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{RevisionName: ptr.To("log-123")}
		revs := sidecarcontrol.RevisionGetterFunc(func(string) ([]*appsv1.ControllerRevision, error) { return nil, nil })
		resp, _ := scsInjectAdmit(t, newInjector(sets(pinned), nil, revs), admissionv1.Create, scsInjectTestPod)
		require.False(t, resp.Allowed)
		require.Contains(t, resp.Result.Message, "SidecarSet log")
		require.Contains(t, resp.Result.Message, "revisionName")
		require.Contains(t, resp.Result.Message, "log-123")
	})

	t.Run("listing SidecarSets fails", func(t *testing.T) {
		resp, _ := scsInjectAdmit(t, newInjector(func() ([]*appsv1beta1.SidecarSet, error) { return nil, errors.New("boom") }, nil, nil), admissionv1.Create, scsInjectTestPod)
		require.False(t, resp.Allowed)
		require.Contains(t, resp.Result.Message, "boom")
	})

	t.Run("allowed unchanged", func(t *testing.T) {
		for name, tc := range map[string]struct {
			op   admissionv1.Operation
			sets []*appsv1beta1.SidecarSet
			raw  string
		}{
			"update":                {op: admissionv1.Update, sets: []*appsv1beta1.SidecarSet{logSet}, raw: scsInjectTestPod},
			"no SidecarSets":        {op: admissionv1.Create, raw: scsInjectTestPod},
			"no SidecarSet selects": {op: admissionv1.Create, sets: []*appsv1beta1.SidecarSet{logSet}, raw: `{"metadata":{"name":"x","labels":{"app":"db"}},"spec":{"containers":[{"name":"app"}]}}`},
			"paused SidecarSet only": {op: admissionv1.Create, sets: []*appsv1beta1.SidecarSet{func() *appsv1beta1.SidecarSet {
				s := logSet.DeepCopy()
				s.Spec.InjectionStrategy.Paused = true
				return s
			}()}, raw: scsInjectTestPod},
		} {
			t.Run(name, func(t *testing.T) {
				resp, _ := scsInjectAdmit(t, newInjector(sets(tc.sets...), nil, nil), tc.op, tc.raw)
				require.True(t, resp.Allowed)
				require.Nil(t, resp.Patch)
			})
		}
	})

	t.Run("bad object", func(t *testing.T) {
		resp, _ := scsInjectAdmit(t, newInjector(sets(logSet), nil, nil), admissionv1.Create, `{"spec":`)
		require.False(t, resp.Allowed)
	})
}

func TestScsInjectListOps(t *testing.T) {
	key := func(s string) string { return s }
	for _, tc := range []struct {
		name       string
		orig, next []string
		want       []jsonPatchOp
	}{
		{"equal", []string{"a"}, []string{"a"}, nil},
		{"from empty", nil, []string{"a"}, []jsonPatchOp{{Op: "add", Path: "/l", Value: []string{"a"}}}},
		{"inserts around", []string{"a", "b"}, []string{"x", "a", "y", "b", "z"}, []jsonPatchOp{
			{Op: "add", Path: "/l/0", Value: "x"}, {Op: "add", Path: "/l/2", Value: "y"}, {Op: "add", Path: "/l/4", Value: "z"},
		}},
		{"reordered falls back to the whole list", []string{"a", "b"}, []string{"b", "a"}, []jsonPatchOp{{Op: "add", Path: "/l", Value: []string{"b", "a"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scsInjectListOps("/l", tc.orig, tc.next, key)
			require.Equal(t, tc.want, got)
			if len(tc.orig) > 0 {
				doc, err := json.Marshal(map[string]any{"l": tc.orig})
				require.NoError(t, err)
				raw, err := json.Marshal(got)
				require.NoError(t, err)
				p, err := jsonpatch.DecodePatch(raw)
				require.NoError(t, err)
				out, err := p.Apply(doc)
				require.NoError(t, err)
				require.JSONEq(t, scsInjectJSON(t, map[string]any{"l": tc.next}), string(out))
			}
		})
	}
}

// scsInjectJSON encodes v.
func scsInjectJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}
