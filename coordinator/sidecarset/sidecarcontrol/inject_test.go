package sidecarcontrol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

func TestInject(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1", Labels: map[string]string{"env": "prod"}}}
	for _, tc := range []struct {
		name      string
		pod       func(*corev1.Pod)
		sets      func() []*appsv1beta1.SidecarSet
		want      []string // SidecarSets injected
		unchanged bool
		wantErr   []string // substrings of the error
		check     func(t *testing.T, pod *corev1.Pod)
	}{
		{
			name: "no SidecarSet selects the pod",
			sets: func() []*appsv1beta1.SidecarSet {
				s := newSet("log", sidecar("logger", "logger:1"))
				s.Spec.Selector.MatchLabels["app"] = "db"
				return []*appsv1beta1.SidecarSet{s}
			},
			unchanged: true,
		},
		{
			name: "injection paused",
			sets: func() []*appsv1beta1.SidecarSet {
				s := newSet("log", sidecar("logger", "logger:1"))
				s.Spec.InjectionStrategy.Paused = true
				return []*appsv1beta1.SidecarSet{s}
			},
			unchanged: true,
		},
		{
			name: "pod being deleted",
			pod:  func(p *corev1.Pod) { p.DeletionTimestamp = &testNow },
			sets: func() []*appsv1beta1.SidecarSet {
				return []*appsv1beta1.SidecarSet{newSet("log", sidecar("logger", "logger:1"))}
			},
			unchanged: true,
		},
		{
			name: "namespaceSelector does not match",
			sets: func() []*appsv1beta1.SidecarSet {
				s := newSet("log", sidecar("logger", "logger:1"))
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
				return []*appsv1beta1.SidecarSet{s}
			},
			unchanged: true,
		},
		{
			name: "namespaceSelector matches",
			sets: func() []*appsv1beta1.SidecarSet {
				s := newSet("log", sidecar("logger", "logger:1"))
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
				return []*appsv1beta1.SidecarSet{s}
			},
			want: []string{"log"},
			check: func(t *testing.T, p *corev1.Pod) {
				require.Equal(t, []string{"logger", "app"}, names(p.Spec.Containers))
			},
		},
		{
			name: "before and after the app containers",
			sets: func() []*appsv1beta1.SidecarSet {
				after := sidecar("exporter", "exporter:1")
				after.PodInjectPolicy = appsv1beta1.AfterAppContainerType
				before := sidecar("proxy", "proxy:1")
				before.PodInjectPolicy = appsv1beta1.BeforeAppContainerType
				return []*appsv1beta1.SidecarSet{newSet("log", sidecar("logger", "logger:1"), after), newSet("mesh", before)}
			},
			want: []string{"log", "mesh"},
			check: func(t *testing.T, p *corev1.Pod) {
				require.Equal(t, []string{"logger", "proxy", "app", "exporter"}, names(p.Spec.Containers))
				for _, name := range []string{"logger", "proxy", "exporter"} {
					v, ok := envValue(container(p.Spec.Containers, name), wellknown.EnvIsInjected)
					require.True(t, ok, name)
					require.Equal(t, "true", v, name)
				}
				require.Equal(t, newPod().Spec.Containers[0], *container(p.Spec.Containers, "app"), "the app container is untouched")
				require.Equal(t, "log,mesh", p.Annotations[wellknown.AnnotationSidecarSetInjectedList])
			},
		},
		{
			name: "init containers after the pod's own, by name; native sidecars are listed",
			pod: func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "setup:1"}}
			},
			sets: func() []*appsv1beta1.SidecarSet {
				native := sidecar("a-proxy", "proxy:1")
				native.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				s := newSet("init")
				s.Spec.InitContainers = []appsv1beta1.SidecarContainer{sidecar("b-fetch", "fetch:1"), native}
				return []*appsv1beta1.SidecarSet{s}
			},
			want: []string{"init"},
			check: func(t *testing.T, p *corev1.Pod) {
				require.Equal(t, []string{"setup", "a-proxy", "b-fetch"}, names(p.Spec.InitContainers))
				require.Equal(t, []string{"app"}, names(p.Spec.Containers))
				v, _ := envValue(container(p.Spec.InitContainers, "b-fetch"), wellknown.EnvIsInjected)
				require.Equal(t, "true", v)
				require.Equal(t, []string{"a-proxy"}, PodUpgradeSpecs(p, wellknown.AnnotationSidecarSetHash)["init"].SidecarList)
			},
		},
		{
			name: "shared volume mounts, subPathExpr variables and volume devices",
			pod: func(p *corev1.Pod) {
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
					{Name: "data", MountPath: "/data", SubPathExpr: "$(POD_NAME)/$(MISSING)"},
					{Name: "app-logs", MountPath: "/var/log"},
				}
				p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "block", DevicePath: "/dev/xvda"}}
				p.Spec.InitContainers = []corev1.Container{{Name: "setup", VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}}}}
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
					Name: "old-sidecar", Env: []corev1.EnvVar{{Name: wellknown.EnvIsInjected, Value: "true"}},
					VolumeMounts: []corev1.VolumeMount{{Name: "secret", MountPath: "/secret"}},
				})
			},
			sets: func() []*appsv1beta1.SidecarSet {
				sc := sidecar("logger", "logger:1")
				sc.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log"}}
				sc.ShareVolumePolicy.Type = appsv1beta1.ShareVolumePolicyEnabled
				sc.ShareVolumeDevicePolicy = &appsv1beta1.ShareVolumePolicy{Type: appsv1beta1.ShareVolumePolicyEnabled}
				plain := sidecar("plain", "plain:1")
				s := newSet("log", sc, plain)
				s.Spec.Volumes = []corev1.Volume{{Name: "logs"}}
				return []*appsv1beta1.SidecarSet{s}
			},
			want: []string{"log"},
			check: func(t *testing.T, p *corev1.Pod) {
				c := container(p.Spec.Containers, "logger")
				require.Equal(t, []corev1.VolumeMount{
					{Name: "logs", MountPath: "/var/log"},
					{Name: "data", MountPath: "/data", SubPathExpr: "$(POD_NAME)/$(MISSING)"},
					{Name: "config", MountPath: "/config"},
				}, c.VolumeMounts, "own mount path wins; injected containers are not shared from")
				require.Equal(t, []corev1.VolumeDevice{{Name: "block", DevicePath: "/dev/xvda"}}, c.VolumeDevices)
				v, ok := envValue(c, "POD_NAME")
				require.True(t, ok)
				require.Equal(t, "web-0", v)
				require.Empty(t, container(p.Spec.Containers, "plain").VolumeMounts, "sharing is per container")
			},
		},
		{
			name: "transferEnv",
			pod: func(p *corev1.Pod) {
				p.Labels["main-container"] = "app"
				p.Annotations = map[string]string{"main": "app"}
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "other", Env: []corev1.EnvVar{{Name: "OTHER", Value: "o"}}})
			},
			sets: func() []*appsv1beta1.SidecarSet {
				sc := sidecar("logger", "logger:1")
				sc.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}}
				sc.TransferEnv = []appsv1beta1.TransferEnvVar{
					{SourceContainerName: "app", EnvName: "POD_NAME"},
					{SourceContainerName: "app", EnvName: "LOG_LEVEL"},
					{SourceContainerName: "app", EnvName: "NOPE"},
					{SourceContainerName: "nope", EnvName: "POD_NAME"},
					{SourceContainerName: "other", EnvNames: []string{"OTHER"}},
					{SourceContainerNameFrom: &appsv1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['main-container']"}}, EnvNames: []string{"REGION"}},
					{SourceContainerNameFrom: &appsv1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['main']"}}, EnvName: "POD_NAME"},
					{SourceContainerNameFrom: &appsv1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}, EnvName: "POD_NAME"},
				}
				return []*appsv1beta1.SidecarSet{newSet("log", sc)}
			},
			want: []string{"log"},
			check: func(t *testing.T, p *corev1.Pod) {
				require.Equal(t, []corev1.EnvVar{
					{Name: "LOG_LEVEL", Value: "info"},
					{Name: wellknown.EnvIsInjected, Value: "true"},
					{Name: "POD_NAME", Value: "web-0"},
					{Name: "OTHER", Value: "o"},
					{Name: "REGION", Value: "eu"},
				}, container(p.Spec.Containers, "logger").Env, "the sidecar's own LOG_LEVEL wins")
			},
		},
		{
			name: "volumes the sidecars use, unless the pod has them; image pull secrets once",
			pod: func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
			},
			sets: func() []*appsv1beta1.SidecarSet {
				sc := sidecar("logger", "logger:1")
				sc.VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}, {Name: "config", MountPath: "/config"}}
				s := newSet("log", sc)
				s.Spec.Volumes = []corev1.Volume{
					{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
					{Name: "unused", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}},
				}
				s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "sidecar-cred"}}
				s2 := newSet("metrics", sidecar("metrics", "metrics:1"))
				s2.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "sidecar-cred"}}
				return []*appsv1beta1.SidecarSet{s, s2}
			},
			want: []string{"log", "metrics"},
			check: func(t *testing.T, p *corev1.Pod) {
				require.Len(t, p.Spec.Volumes, 2)
				require.NotNil(t, p.Spec.Volumes[0].EmptyDir, "the pod's own volume wins")
				require.Equal(t, "logs", p.Spec.Volumes[1].Name)
				require.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "sidecar-cred"}}, p.Spec.ImagePullSecrets)
			},
		},
		{
			name: "hot upgrade pair",
			sets: func() []*appsv1beta1.SidecarSet {
				sc := sidecar("mesh", "mesh:1")
				sc.UpgradeStrategy = appsv1beta1.SidecarContainerUpgradeStrategy{UpgradeType: appsv1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
				return []*appsv1beta1.SidecarSet{newSet("mesh", sc)}
			},
			want: []string{"mesh"},
			check: func(t *testing.T, p *corev1.Pod) {
				require.Equal(t, []string{"mesh-1", "mesh-2", "app"}, names(p.Spec.Containers))
				require.Equal(t, "mesh:1", p.Spec.Containers[0].Image)
				require.Equal(t, "empty:1", p.Spec.Containers[1].Image)
				for _, c := range p.Spec.Containers[:2] {
					require.Equal(t, "metadata.annotations['version.sidecarset.kruise.io/"+c.Name+"']", findEnv(c.Env, wellknown.EnvSidecarSetVersion).ValueFrom.FieldRef.FieldPath)
					require.Equal(t, "metadata.annotations['versionalt.sidecarset.kruise.io/"+c.Name+"']", findEnv(c.Env, wellknown.EnvSidecarSetVersionAlt).ValueFrom.FieldRef.FieldPath)
					v, _ := envValue(&c, wellknown.EnvIsInjected)
					require.Equal(t, "true", v)
				}
				require.Equal(t, "1", p.Annotations["version.sidecarset.kruise.io/mesh-1"])
				require.Equal(t, "0", p.Annotations["versionalt.sidecarset.kruise.io/mesh-1"])
				require.Equal(t, "0", p.Annotations["version.sidecarset.kruise.io/mesh-2"])
				require.Equal(t, "1", p.Annotations["versionalt.sidecarset.kruise.io/mesh-2"])
				require.Equal(t, map[string]string{"mesh": "mesh-1"}, WorkingHotUpgradeContainers(p))
				require.Equal(t, []string{"mesh"}, PodUpgradeSpecs(p, wellknown.AnnotationSidecarSetHash)["mesh"].SidecarList)
			},
		},
		{
			name: "patchPodMetadata Retain, Overwrite and MergePatchJson",
			pod: func(p *corev1.Pod) {
				p.Annotations = map[string]string{"keep": "pod", "replace": "pod", "merge": `{"a":1,"b":2}`}
			},
			sets: func() []*appsv1beta1.SidecarSet {
				s := newSet("meta", sidecar("logger", "logger:1"))
				s.Spec.PatchPodMetadata = []appsv1beta1.SidecarSetPatchPodMetadata{
					{Annotations: map[string]string{"keep": "set", "new": "set"}, PatchPolicy: appsv1beta1.SidecarSetRetainPatchPolicy},
					{Annotations: map[string]string{"replace": "set"}, PatchPolicy: appsv1beta1.SidecarSetOverwritePatchPolicy},
					{Annotations: map[string]string{"merge": `{"b":null,"c":3}`, "fresh": `{"x":1}`}, PatchPolicy: appsv1beta1.SidecarSetMergePatchJsonPatchPolicy},
				}
				return []*appsv1beta1.SidecarSet{s}
			},
			want: []string{"meta"},
			check: func(t *testing.T, p *corev1.Pod) {
				require.Equal(t, "pod", p.Annotations["keep"])
				require.Equal(t, "set", p.Annotations["new"])
				require.Equal(t, "set", p.Annotations["replace"])
				require.JSONEq(t, `{"a":1,"c":3}`, p.Annotations["merge"])
				require.Equal(t, `{"x":1}`, p.Annotations["fresh"])
			},
		},
		{
			name: "patchPodMetadata is applied before transferEnv reads annotations",
			sets: func() []*appsv1beta1.SidecarSet {
				sc := sidecar("logger", "logger:1")
				sc.TransferEnv = []appsv1beta1.TransferEnvVar{{SourceContainerNameFrom: &appsv1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['main']"}}, EnvName: "REGION"}}
				s := newSet("log", sc)
				s.Spec.PatchPodMetadata = []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"main": "app"}}}
				return []*appsv1beta1.SidecarSet{s}
			},
			want: []string{"log"},
			check: func(t *testing.T, p *corev1.Pod) {
				v, _ := envValue(container(p.Spec.Containers, "logger"), "REGION")
				require.Equal(t, "eu", v)
			},
		},
		{
			name: "bad MergePatchJson value",
			pod:  func(p *corev1.Pod) { p.Annotations = map[string]string{"merge": `{"a":1}`} },
			sets: func() []*appsv1beta1.SidecarSet {
				s := newSet("meta", sidecar("logger", "logger:1"))
				s.Spec.PatchPodMetadata = []appsv1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"merge": `not json`}, PatchPolicy: appsv1beta1.SidecarSetMergePatchJsonPatchPolicy}}
				return []*appsv1beta1.SidecarSet{s}
			},
			wantErr: []string{"SidecarSet meta", "patchPodMetadata[0]", "merge"},
		},
		{
			name: "two SidecarSets inject the same container name",
			sets: func() []*appsv1beta1.SidecarSet {
				return []*appsv1beta1.SidecarSet{newSet("zeta", sidecar("proxy", "a:1")), newSet("alpha", sidecar("proxy", "b:1"))}
			},
			wantErr: []string{"SidecarSets alpha and zeta", `"proxy"`},
		},
		{
			name: "a hot-upgrade pair clashing with another SidecarSet's container",
			sets: func() []*appsv1beta1.SidecarSet {
				sc := sidecar("mesh", "mesh:1")
				sc.UpgradeStrategy = appsv1beta1.SidecarContainerUpgradeStrategy{UpgradeType: appsv1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
				return []*appsv1beta1.SidecarSet{newSet("a", sc), newSet("b", sidecar("mesh-2", "x:1"))}
			},
			wantErr: []string{"SidecarSets a and b", `"mesh-2"`},
		},
		{
			name: "a sidecar the pod already has from injection is replaced in place; the pod's own container of that name is kept",
			pod: func(p *corev1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers,
					corev1.Container{Name: "logger", Image: "logger:0", Env: []corev1.EnvVar{{Name: wellknown.EnvIsInjected, Value: "true"}}},
					corev1.Container{Name: "proxy", Image: "my-own-proxy"})
				p.Annotations = map[string]string{wellknown.AnnotationSidecarSetInjectedList: "older"}
			},
			sets: func() []*appsv1beta1.SidecarSet {
				return []*appsv1beta1.SidecarSet{newSet("log", sidecar("logger", "logger:1")), newSet("mesh", sidecar("proxy", "proxy:1"))}
			},
			want: []string{"log"},
			check: func(t *testing.T, p *corev1.Pod) {
				require.Equal(t, []string{"app", "logger", "proxy"}, names(p.Spec.Containers))
				require.Equal(t, "logger:1", p.Spec.Containers[1].Image)
				require.Equal(t, "my-own-proxy", p.Spec.Containers[2].Image)
				require.Equal(t, "log,older", p.Annotations[wellknown.AnnotationSidecarSetInjectedList])
				require.NotContains(t, PodUpgradeSpecs(p, wellknown.AnnotationSidecarSetHash), "mesh")
			},
		},
		{
			name: "hash annotations",
			pod: func(p *corev1.Pod) {
				p.Annotations = map[string]string{wellknown.AnnotationSidecarSetHash: `{"other":{"hash":"x","sidecarSetName":"other","sidecarList":["o"],"updateTimestamp":null}}`}
			},
			sets: func() []*appsv1beta1.SidecarSet {
				s := newSet("log", sidecar("b-logger", "logger:1"), sidecar("a-shipper", "shipper:1"))
				s.Status.LatestRevision = "log-abc"
				return []*appsv1beta1.SidecarSet{s}
			},
			want: []string{"log"},
			check: func(t *testing.T, p *corev1.Pod) {
				set := newSet("log", sidecar("b-logger", "logger:1"), sidecar("a-shipper", "shipper:1"))
				hash, hashWithoutImage, err := Hashes(set)
				require.NoError(t, err)
				specs := PodUpgradeSpecs(p, wellknown.AnnotationSidecarSetHash)
				require.Equal(t, "x", specs["other"].Hash, "other SidecarSets' entries are kept")
				got := specs["log"]
				require.Equal(t, hash, got.Hash)
				require.Equal(t, "log", got.SidecarSetName)
				require.Equal(t, []string{"a-shipper", "b-logger"}, got.SidecarList)
				require.Equal(t, "log-abc", got.ControllerRevision)
				require.True(t, got.UpdateTimestamp.Time.Equal(testNow.Time))
				noImage := PodUpgradeSpecs(p, wellknown.AnnotationSidecarSetHashWithoutImage)["log"]
				require.Equal(t, hashWithoutImage, noImage.Hash)
				require.Equal(t, []string{"a-shipper", "b-logger"}, noImage.SidecarList)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			orig := pod.DeepCopy()
			got, err := Inject(pod, ns, tc.sets(), nil, testNow)
			if len(tc.wantErr) > 0 {
				for _, s := range tc.wantErr {
					require.ErrorContains(t, err, s)
				}
				require.Equal(t, orig, pod, "the pod is unchanged on error")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			if tc.unchanged {
				require.Equal(t, orig, pod)
				return
			}
			tc.check(t, pod)
			// The annotations are valid JSON.
			for _, k := range []string{wellknown.AnnotationSidecarSetHash, wellknown.AnnotationSidecarSetHashWithoutImage} {
				require.True(t, json.Valid([]byte(pod.Annotations[k])), k)
			}
		})
	}
}

func TestInjectRevision(t *testing.T) {
	// The SidecarSet at revision 1 (logger:1), 2 (logger:2, custom version
	// v2) and now (logger:3, custom version v3).
	set := newSet("log", sidecar("logger", "logger:1"))
	set.Spec.Volumes = []corev1.Volume{{Name: "old-volume"}}
	set.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "old-volume", MountPath: "/old"}}
	rev1, err := NewRevision(set, "shoal-system", 1, nil)
	require.NoError(t, err)
	set.Spec.Volumes, set.Spec.Containers[0].VolumeMounts = nil, nil
	set.Spec.Containers[0].Image = "logger:2"
	set.Spec.CustomVersion = "v2"
	rev2, err := NewRevision(set, "shoal-system", 2, nil)
	require.NoError(t, err)
	set.Spec.Containers[0].Image = "logger:3"
	set.Spec.CustomVersion = "v3"
	set.Status.LatestRevision = "log-current"
	rev1Hash := rev1.Annotations[wellknown.AnnotationSidecarSetHash]
	revs := revisions{rev1, rev2}

	type want struct {
		image, revision, hash string
	}
	current := want{image: "logger:3", revision: "log-current"}
	for _, tc := range []struct {
		name    string
		change  func(*appsv1beta1.SidecarSet)
		pod     func(*corev1.Pod)
		random  float64
		revs    RevisionGetter
		want    want
		wantErr []string
	}{
		{name: "no revision named", change: func(*appsv1beta1.SidecarSet) {}, want: current},
		{name: "revisionName", change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{RevisionName: ptr.To(rev1.Name)}
		}, want: want{image: "logger:1", revision: rev1.Name, hash: rev1Hash}},
		{name: "customVersion", change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2")}
		}, want: want{image: "logger:2", revision: rev2.Name}},
		{name: "revisionName that does not exist", change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{RevisionName: ptr.To("log-gone")}
		}, wantErr: []string{"SidecarSet log", "revisionName", "log-gone"}},
		{name: "customVersion that does not exist", change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v9")}
		}, wantErr: []string{"SidecarSet log", "customVersion", `"v9"`}},
		{name: "no revision store", revs: RevisionGetter(nil), change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2")}
		}, wantErr: []string{"SidecarSet log", "revision"}},
		{name: "Always: a pod the update selector picks gets the current spec", pod: func(p *corev1.Pod) { p.Labels["canary"] = "true" }, change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2"), Policy: appsv1beta1.AlwaysSidecarSetInjectRevisionPolicy}
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}, want: current},
		{name: "Always: other pods get the revision", change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2")}
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}, want: want{image: "logger:2", revision: rev2.Name}},
		{name: "updates paused: the revision even for selected pods", pod: func(p *corev1.Pod) { p.Labels["canary"] = "true" }, change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2")}
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
			s.Spec.UpdateStrategy.Paused = true
		}, want: want{image: "logger:2", revision: rev2.Name}},
		{name: "Partial: within the partition share", random: 0.1, change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2"), Policy: appsv1beta1.PartialSidecarSetInjectRevisionPolicy}
			s.Spec.UpdateStrategy.Partition = ptr.To(intstrPercent("30%"))
		}, want: want{image: "logger:2", revision: rev2.Name}},
		{name: "Partial: beyond the partition share", random: 0.5, change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2"), Policy: appsv1beta1.PartialSidecarSetInjectRevisionPolicy}
			s.Spec.UpdateStrategy.Partition = ptr.To(intstrPercent("30%"))
		}, want: current},
		{name: "Partial: an integer partition gives the current spec", random: 0, change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2"), Policy: appsv1beta1.PartialSidecarSetInjectRevisionPolicy}
			s.Spec.UpdateStrategy.Partition = ptr.To(intstrInt(3))
		}, want: current},
		{name: "Partial: a pod the update selector does not pick gets the revision", random: 0.99, change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2"), Policy: appsv1beta1.PartialSidecarSetInjectRevisionPolicy}
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}, want: want{image: "logger:2", revision: rev2.Name}},
		{name: "Partial: a bad partition", change: func(s *appsv1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v2"), Policy: appsv1beta1.PartialSidecarSetInjectRevisionPolicy}
			s.Spec.UpdateStrategy.Partition = ptr.To(intstrPercent("lots"))
		}, wantErr: []string{"SidecarSet log", "partition"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := set.DeepCopy()
			tc.change(s)
			pod := newPod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			var getter RevisionGetter = revs
			if tc.revs != nil || tc.name == "no revision store" {
				getter = tc.revs
			}
			in := injector{random: func() float64 { return tc.random }}
			got, err := in.inject(pod, nil, []*appsv1beta1.SidecarSet{s}, getter, testNow)
			if len(tc.wantErr) > 0 {
				for _, e := range tc.wantErr {
					require.ErrorContains(t, err, e)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{"log"}, got)
			require.Equal(t, tc.want.image, container(pod.Spec.Containers, "logger").Image)
			spec := PodUpgradeSpecs(pod, wellknown.AnnotationSidecarSetHash)["log"]
			require.Equal(t, tc.want.revision, spec.ControllerRevision)
			if tc.want.hash != "" {
				require.Equal(t, tc.want.hash, spec.Hash)
			}
			if tc.want.image == "logger:1" {
				require.Equal(t, []corev1.Volume{{Name: "old-volume"}}, pod.Spec.Volumes, "the revision's volumes")
			} else {
				require.Empty(t, pod.Spec.Volumes)
			}
		})
	}
}

func TestInjectCanary(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1"}}
	base := newSet("mesh", sidecar("proxy", "proxy:1"))
	canary := newSet("mesh-canary", sidecar("proxy", "proxy:2"))
	canary.Spec.Selector.MatchLabels["canary"] = "true"
	canary.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true", wellknown.AnnotationSidecarSetBase: "mesh"}
	for _, tc := range []struct {
		name  string
		pod   func(*corev1.Pod)
		want  []string
		image string
	}{
		{"a pod the canary selects gets the canary's sidecar", func(p *corev1.Pod) { p.Labels["canary"] = "true" }, []string{"mesh-canary"}, "proxy:2"},
		{"any other pod gets the base's", func(*corev1.Pod) {}, []string{"mesh"}, "proxy:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod()
			tc.pod(pod)
			got, err := Inject(pod, ns, []*appsv1beta1.SidecarSet{base, canary}, nil, testNow)
			require.NoError(t, err, "a canary and its base may inject containers of the same name")
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.image, container(pod.Spec.Containers, "proxy").Image)
		})
	}
	notCanary := canary.DeepCopy()
	notCanary.Annotations[wellknown.AnnotationSidecarSetCanary] = "false"
	pod := newPod()
	pod.Labels["canary"] = "true"
	_, err := Inject(pod, ns, []*appsv1beta1.SidecarSet{base, notCanary}, nil, testNow)
	require.ErrorContains(t, err, `both inject a container named "proxy"`, "without the canary annotation the names conflict")
}
