package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// applySidecarSetPatch applies resp's JSON Patch to the SidecarSet raw and
// returns the result, decoded and as JSON.
func applySidecarSetPatch(t *testing.T, raw []byte, resp *admissionv1.AdmissionResponse) (*v1beta1.SidecarSet, []byte) {
	t.Helper()
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(t, err)
	out, err := patch.Apply(raw)
	require.NoError(t, err)
	got := &v1beta1.SidecarSet{}
	require.NoError(t, json.Unmarshal(out, got))
	return got, out
}

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
			got, _ := applySidecarSetPatch(t, raw, resp)
			require.Equal(t, v1beta1.BeforeAppContainerType, got.Spec.Containers[0].PodInjectPolicy)
			require.Equal(t, v1beta1.AfterAppContainerType, got.Spec.Containers[1].PodInjectPolicy, "a set policy stays")
			require.Equal(t, v1beta1.AfterAppContainerType, got.Spec.InitContainers[0].PodInjectPolicy)
		})
	}
}

// TestDefaultSidecarSetContainers: the sidecars are stored with what the
// apiserver defaults in a pod's containers, as OpenKruise stores them (so
// the two hash one manifest alike); a second pass changes nothing, and a
// sidecar's own fields stay.
func TestDefaultSidecarSetContainers(t *testing.T) {
	set := &v1beta1.SidecarSet{Spec: v1beta1.SidecarSetSpec{
		Containers: []v1beta1.SidecarContainer{{
			Container: corev1.Container{
				Name: "proxy", Image: "registry.local:5000/envoy",
				Ports: []corev1.ContainerPort{{ContainerPort: 15001}},
				Env:   []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("0.0001"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(15021)}}},
				Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(15000), Path: "/drain"}}},
			},
			UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1.0"},
			TransferEnv: []v1beta1.TransferEnvVar{{EnvName: "NODE", SourceContainerNameFrom: &v1beta1.SourceContainerNameSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"},
			}}},
		}},
		InitContainers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "busybox:1.36@sha256:" + strings.Repeat("a", 64)}}},
	}}
	raw, err := json.Marshal(set)
	require.NoError(t, err)
	review := func(raw []byte) *admissionv1.AdmissionResponse {
		return DefaultSidecarSet(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}})
	}
	got, out := applySidecarSetPatch(t, raw, review(raw))

	c := got.Spec.Containers[0]
	require.Equal(t, corev1.PullAlways, c.ImagePullPolicy, "an untagged image is :latest")
	require.Equal(t, corev1.TerminationMessagePathDefault, c.TerminationMessagePath)
	require.Equal(t, corev1.TerminationMessageReadFile, c.TerminationMessagePolicy)
	require.Equal(t, corev1.ProtocolTCP, c.Ports[0].Protocol)
	require.Equal(t, "v1", c.Env[0].ValueFrom.FieldRef.APIVersion)
	require.Equal(t, "1m", ptr.To(c.Resources.Requests[corev1.ResourceCPU]).String(), "rounded up to milli units")
	require.Equal(t, "64Mi", ptr.To(c.Resources.Requests[corev1.ResourceMemory]).String())
	require.Equal(t, corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(15021), Path: "/", Scheme: corev1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}, *c.ReadinessProbe)
	require.Equal(t, &corev1.HTTPGetAction{Port: intstr.FromInt32(15000), Path: "/drain", Scheme: corev1.URISchemeHTTP}, c.Lifecycle.PreStop.HTTPGet)
	require.Equal(t, "v1", c.TransferEnv[0].SourceContainerNameFrom.FieldRef.APIVersion)
	require.Equal(t, set.Spec.Containers[0].UpgradeStrategy, c.UpgradeStrategy, "the sidecar's own fields stay")
	require.Equal(t, v1beta1.BeforeAppContainerType, c.PodInjectPolicy)
	require.Equal(t, corev1.PullIfNotPresent, got.Spec.InitContainers[0].ImagePullPolicy, "a tagged image")

	again := review(out)
	require.True(t, again.Allowed)
	require.Empty(t, again.Patch, "a defaulted SidecarSet needs nothing more")
}

// TestDefaultPullPolicy: the apiserver's rule, image by image.
func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"nginx":                        corev1.PullAlways,
		"nginx:latest":                 corev1.PullAlways,
		"nginx:1.27":                   corev1.PullIfNotPresent,
		"localhost:5000/nginx":         corev1.PullAlways,
		"localhost:5000/nginx:1.27":    corev1.PullIfNotPresent,
		"nginx@sha256:" + hex64:        corev1.PullIfNotPresent,
		"nginx:latest@sha256:" + hex64: corev1.PullAlways,
		"":                             corev1.PullIfNotPresent,
	} {
		require.Equal(t, want, defaultPullPolicy(image), image)
	}
}

var hex64 = strings.Repeat("0123456789abcdef", 4)
