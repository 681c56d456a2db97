package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// scsTestSet is a valid SidecarSet in the style of OpenKruise's docs, as
// the apiserver hands it over (CRD defaults applied): a cold sidecar with
// transferEnv and a volume, a hot-upgrade proxy, an init container, and
// patchPodMetadata within scsTestAllowList.
func scsTestSet() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset", Labels: map[string]string{"team": "mesh"}},
		Spec: v1beta1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			InitContainers: []v1beta1.SidecarContainer{{
				Container:         corev1.Container{Name: "init-config", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo ready"}},
				UpgradeStrategy:   v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerColdUpgrade},
				ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyDisabled},
			}},
			Containers: []v1beta1.SidecarContainer{
				{
					Container: corev1.Container{
						Name: "sidecar1", Image: "centos:6.7", Command: []string{"sleep", "999d"},
						VolumeMounts: []corev1.VolumeMount{{Name: "log-volume", MountPath: "/var/log"}},
						Env:          []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
					},
					PodInjectPolicy:   v1beta1.BeforeAppContainerType,
					ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyEnabled},
					UpgradeStrategy:   v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerColdUpgrade},
					TransferEnv: []v1beta1.TransferEnvVar{
						{SourceContainerName: "main", EnvName: "PROXY_IP"},
						{
							SourceContainerNameFrom: &v1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{
								APIVersion: "v1", FieldPath: "metadata.labels['app.example.com/main-container']",
							}},
							EnvNames: []string{"TZ", "REGION"},
						},
					},
				},
				{
					Container: corev1.Container{
						Name: "proxy", Image: "openkruise/hotupgrade-sample:sidecarv1",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 15001}},
						Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
							Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "/migrate.sh"}},
						}},
					},
					PodInjectPolicy:   v1beta1.AfterAppContainerType,
					ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyDisabled},
					UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{
						UpgradeType:          v1beta1.SidecarContainerHotUpgrade,
						HotUpgradeEmptyImage: "openkruise/hotupgrade-sample:empty",
					},
				},
			},
			Volumes: []corev1.Volume{{Name: "log-volume", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			UpdateStrategy: v1beta1.SidecarSetUpdateStrategy{
				Type:            v1beta1.RollingUpdateSidecarSetStrategyType,
				Partition:       ptr.To(intstr.FromInt32(0)),
				MaxUnavailable:  ptr.To(intstr.FromInt32(1)),
				ScatterStrategy: pub.UpdateScatterStrategy{{Key: "zone", Value: "a"}},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
			PatchPodMetadata: []v1beta1.SidecarSetPatchPodMetadata{
				{Annotations: map[string]string{"example.com/mesh-config": `{"log":"on"}`}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy},
				{Annotations: map[string]string{"example.com/injected": "true"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy},
			},
		},
	}
}

// scsTestAllowList allows the example.com/ annotations of scsTestSet.
func scsTestAllowList() ([]SidecarSetPatchPodMetadataRule, error) {
	return []SidecarSetPatchPodMetadataRule{{AllowedAnnotationKeyExprs: []string{`^example\.com/`}}}, nil
}

// scsOther is another SidecarSet on the pods of scsTestSet, with a
// container of its own, changed by change.
func scsOther(name string, change func(*v1beta1.SidecarSet)) *v1beta1.SidecarSet {
	o := &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "logger", Image: "fluent-bit:3"}}},
		},
	}
	if change != nil {
		change(o)
	}
	return o
}

// scsNamespace is a namespaceSelector for one namespace, as converted from
// v1alpha1's spec.namespace.
func scsNamespace(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: name}}
}

// scsRequest builds an admission request for set (CREATE) or for set over
// old (UPDATE).
func scsRequest(t *testing.T, set, old *v1beta1.SidecarSet) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(set)
	require.NoError(t, err)
	req := &admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "SidecarSet"},
		Resource:  metav1.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "sidecarsets"},
		Name:      set.Name,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	}
	if old != nil {
		req.Operation = admissionv1.Update
		req.OldObject.Raw, err = json.Marshal(old)
		require.NoError(t, err)
	}
	return req
}

// scsCase is one SidecarSet admission case: scsTestSet changed by change,
// as a CREATE, or as an UPDATE of scsTestSet changed by old when old is
// set; others are the other SidecarSets in the cluster; admission, when
// set, configures the webhook (which starts with scsTestAllowList).
type scsCase struct {
	name      string
	change    func(*v1beta1.SidecarSet)
	old       func(*v1beta1.SidecarSet)
	others    []*v1beta1.SidecarSet
	admission func(*SidecarSetAdmission)
	want      []string // parts of the denial message
}

func (tc scsCase) run(t *testing.T) *admissionv1.AdmissionResponse {
	t.Helper()
	set := scsTestSet()
	if tc.change != nil {
		tc.change(set)
	}
	var old *v1beta1.SidecarSet
	if tc.old != nil {
		old = scsTestSet()
		tc.old(old)
	}
	others := append([]*v1beta1.SidecarSet{scsTestSet()}, tc.others...) // the stored self is listed too
	a := NewSidecarSetAdmission(func() ([]*v1beta1.SidecarSet, error) { return others, nil }).
		WithPatchPodMetadataAllowed(scsTestAllowList)
	if tc.admission != nil {
		tc.admission(a)
	}
	return a.Validate(context.Background(), scsRequest(t, set, old))
}

func TestValidateSidecarSetBadInput(t *testing.T) {
	container := func(i int, f func(*v1beta1.SidecarContainer)) func(*v1beta1.SidecarSet) {
		return func(s *v1beta1.SidecarSet) { f(&s.Spec.Containers[i]) }
	}
	initContainer := func(f func(*v1beta1.SidecarContainer)) func(*v1beta1.SidecarSet) {
		return func(s *v1beta1.SidecarSet) { f(&s.Spec.InitContainers[0]) }
	}
	strategy := func(f func(*v1beta1.SidecarSetUpdateStrategy)) func(*v1beta1.SidecarSet) {
		return func(s *v1beta1.SidecarSet) { f(&s.Spec.UpdateStrategy) }
	}
	patch := func(p ...v1beta1.SidecarSetPatchPodMetadata) func(*v1beta1.SidecarSet) {
		return func(s *v1beta1.SidecarSet) { s.Spec.PatchPodMetadata = p }
	}
	resourcesPolicy := func(f func(*v1beta1.ResourcesPolicy)) func(*v1beta1.SidecarSet) {
		return container(0, func(c *v1beta1.SidecarContainer) {
			c.ResourcesPolicy = &v1beta1.ResourcesPolicy{
				TargetContainersMode: v1beta1.TargetContainersModeSum, TargetContainersNameRegex: "^app$",
				ResourcesExpr: v1beta1.ResourcesExpr{Limits: &v1beta1.ResourceExprLimits{CPU: "max(cpu*50%, 50m)"}},
			}
			f(c.ResourcesPolicy)
		})
	}
	weight := func(w int32, sel metav1.LabelSelector) func(*v1beta1.SidecarSet) {
		return strategy(func(s *v1beta1.SidecarSetUpdateStrategy) {
			s.PriorityStrategy = &pub.UpdatePriorityStrategy{WeightPriority: []pub.UpdatePriorityWeightTerm{{Weight: w, MatchSelector: sel}}}
		})
	}
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	tierA := metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a"}}

	for _, tc := range []scsCase{
		// metadata and selectors
		{name: "name with a dot", change: func(s *v1beta1.SidecarSet) { s.Name = "mesh.v1" },
			want: []string{`metadata.name: Invalid value: "mesh.v1"`, "without dots"}},
		{name: "selector missing", change: func(s *v1beta1.SidecarSet) { s.Spec.Selector = nil },
			want: []string{"spec.selector: Required value: a SidecarSet needs a selector", "set matchLabels"}},
		{name: "selector empty", change: func(s *v1beta1.SidecarSet) { s.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{"spec.selector: Invalid value", "would match every pod; add matchLabels"}},
		{name: "selector In without values", change: func(s *v1beta1.SidecarSet) {
			s.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}
		}, want: []string{"spec.selector.matchExpressions[0].values: Required value"}},
		{name: "namespaceSelector empty", change: func(s *v1beta1.SidecarSet) { s.Spec.NamespaceSelector = &metav1.LabelSelector{} },
			want: []string{"spec.namespaceSelector: Invalid value", "would match every namespace"}},
		{name: "namespaceSelector bad operator", change: func(s *v1beta1.SidecarSet) {
			s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Is"}}}
		}, want: []string{"spec.namespaceSelector.matchExpressions[0].operator"}},

		// containers
		{name: "no containers", change: func(s *v1beta1.SidecarSet) { s.Spec.Containers, s.Spec.InitContainers = nil, nil },
			want: []string{"spec.containers: Required value", "add an entry to containers or initContainers"}},
		{name: "container name missing", change: container(0, func(c *v1beta1.SidecarContainer) { c.Name = "" }),
			want: []string{"spec.containers[0].name: Required value"}},
		{name: "container name not a DNS label", change: container(0, func(c *v1beta1.SidecarContainer) { c.Name = "Side_car" }),
			want: []string{`spec.containers[0].name: Invalid value: "Side_car"`}},
		{name: "container names twice", change: container(1, func(c *v1beta1.SidecarContainer) {
			c.Name, c.UpgradeStrategy = "sidecar1", v1beta1.SidecarContainerUpgradeStrategy{}
		}), want: []string{`spec.containers[1].name: Duplicate value: "sidecar1"`, "give each container of the SidecarSet a distinct name"}},
		{name: "container named like the init container", change: container(0, func(c *v1beta1.SidecarContainer) { c.Name = "init-config" }),
			want: []string{`spec.containers[0].name: Duplicate value: "init-config"`, "spec.initContainers[0]"}},
		{name: "container named like a hot-upgrade copy", change: func(s *v1beta1.SidecarSet) {
			s.Spec.Containers = append(s.Spec.Containers, v1beta1.SidecarContainer{Container: corev1.Container{Name: "proxy-2", Image: "x"}})
		}, want: []string{`spec.containers[2].name: Duplicate value: "proxy-2"`, `two containers named "proxy-2" (the hot-upgrade copy of spec.containers[1]`}},
		{name: "image missing", change: container(0, func(c *v1beta1.SidecarContainer) { c.Image = "" }),
			want: []string{"spec.containers[0].image: Required value", "set the image"}},
		{name: "init image missing", change: initContainer(func(c *v1beta1.SidecarContainer) { c.Image = "" }),
			want: []string{"spec.initContainers[0].image: Required value"}},
		{name: "imagePullPolicy", change: container(0, func(c *v1beta1.SidecarContainer) { c.ImagePullPolicy = "Sometimes" }),
			want: []string{`spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`}},
		{name: "podInjectPolicy", change: container(0, func(c *v1beta1.SidecarContainer) { c.PodInjectPolicy = "Middle" }),
			want: []string{`spec.containers[0].podInjectPolicy: Unsupported value: "Middle": supported values: "BeforeAppContainer", "AfterAppContainer"`}},
		{name: "shareVolumePolicy", change: container(0, func(c *v1beta1.SidecarContainer) { c.ShareVolumePolicy.Type = "on" }),
			want: []string{`spec.containers[0].shareVolumePolicy.type: Unsupported value: "on"`}},
		{name: "shareVolumeDevicePolicy", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.ShareVolumeDevicePolicy = &v1beta1.ShareVolumePolicy{Type: "yes"}
		}), want: []string{`spec.containers[0].shareVolumeDevicePolicy.type: Unsupported value: "yes"`}},
		{name: "upgradeType", change: container(0, func(c *v1beta1.SidecarContainer) { c.UpgradeStrategy.UpgradeType = "WarmUpgrade" }),
			want: []string{`spec.containers[0].upgradeStrategy.upgradeType: Unsupported value: "WarmUpgrade"`}},
		{name: "HotUpgrade without empty image", change: container(1, func(c *v1beta1.SidecarContainer) { c.UpgradeStrategy.HotUpgradeEmptyImage = "" }),
			want: []string{"spec.containers[1].upgradeStrategy.hotUpgradeEmptyImage: Required value", "or use upgradeType ColdUpgrade"}},
		{name: "HotUpgrade with the image as empty image", change: container(1, func(c *v1beta1.SidecarContainer) { c.UpgradeStrategy.HotUpgradeEmptyImage = c.Image }),
			want: []string{"spec.containers[1].upgradeStrategy.hotUpgradeEmptyImage: Invalid value", "must differ from the container's image"}},
		{name: "HotUpgrade name too long for the copies", change: container(1, func(c *v1beta1.SidecarContainer) { c.Name = strings.Repeat("p", 62) }),
			want: []string{"spec.containers[1].name: Invalid value", "must fit in 63 characters; use a name of at most 61"}},
		{name: "HotUpgrade on an init container", change: initContainer(func(c *v1beta1.SidecarContainer) {
			c.UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}
		}), want: []string{"spec.initContainers[0].upgradeStrategy.upgradeType: Forbidden: hot upgrade is for containers only"}},
		{name: "restartPolicy on a container", change: container(0, func(c *v1beta1.SidecarContainer) { c.RestartPolicy = always }),
			want: []string{"spec.containers[0].restartPolicy: Forbidden", "move the container to spec.initContainers"}},
		{name: "init restartPolicy OnFailure", change: initContainer(func(c *v1beta1.SidecarContainer) {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
		}), want: []string{`spec.initContainers[0].restartPolicy: Unsupported value: "OnFailure"`}},
		{name: "probe on a plain init container", change: initContainer(func(c *v1beta1.SidecarContainer) { c.ReadinessProbe = &corev1.Probe{} }),
			want: []string{"spec.initContainers[0].readinessProbe: Forbidden", "set restartPolicy: Always to make it a native sidecar"}},
		{name: "native sidecar init container with RollingUpdate", change: initContainer(func(c *v1beta1.SidecarContainer) { c.RestartPolicy = always }),
			want: []string{`spec.updateStrategy.type: Invalid value: "RollingUpdate"`, `init container "init-config" is a native sidecar`, "set spec.updateStrategy.type to NotUpdate"}},
		{name: "container port out of range", change: container(1, func(c *v1beta1.SidecarContainer) { c.Ports[0].ContainerPort = 70000 }),
			want: []string{"spec.containers[1].ports[0].containerPort: Invalid value: 70000"}},
		{name: "port name twice", change: container(1, func(c *v1beta1.SidecarContainer) {
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: "http", ContainerPort: 8080})
		}), want: []string{`spec.containers[1].ports[1].name: Duplicate value: "http"`}},
		{name: "port protocol", change: container(1, func(c *v1beta1.SidecarContainer) { c.Ports[0].Protocol = "QUIC" }),
			want: []string{`spec.containers[1].ports[0].protocol: Unsupported value: "QUIC"`}},
		{name: "env with value and valueFrom", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.Env[0].ValueFrom = &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}
		}), want: []string{"spec.containers[0].env[0].valueFrom: Invalid value", "keep one of value and valueFrom"}},
		{name: "env name with =", change: container(0, func(c *v1beta1.SidecarContainer) { c.Env[0].Name = "A=B" }),
			want: []string{`spec.containers[0].env[0].name: Invalid value: "A=B"`}},
		{name: "volumeMount of no volume", change: container(0, func(c *v1beta1.SidecarContainer) { c.VolumeMounts[0].Name = "data" }),
			want: []string{`spec.containers[0].volumeMounts[0].name: Not found: "data"`, "add it to spec.volumes"}},
		{name: "two mounts at one path", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "log-volume", MountPath: "/var/log"})
		}), want: []string{`spec.containers[0].volumeMounts[1].mountPath: Duplicate value: "/var/log"`}},
		{name: "requests above limits", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}
		}), want: []string{"spec.containers[0].resources.requests[cpu]: Invalid value", "less than or equal to the cpu limit of 1"}},

		// transferEnv
		{name: "transferEnv without source", change: container(0, func(c *v1beta1.SidecarContainer) { c.TransferEnv[0].SourceContainerName = "" }),
			want: []string{"spec.containers[0].transferEnv[0].sourceContainerName: Required value", "sourceContainerNameFrom.fieldRef"}},
		{name: "transferEnv without variables", change: container(0, func(c *v1beta1.SidecarContainer) { c.TransferEnv[0].EnvName = "" }),
			want: []string{"spec.containers[0].transferEnv[0].envName: Required value", "envNames"}},
		{name: "transferEnv empty envNames entry", change: container(0, func(c *v1beta1.SidecarContainer) { c.TransferEnv[1].EnvNames[1] = "" }),
			want: []string{"spec.containers[0].transferEnv[1].envNames[1]: Required value"}},
		{name: "transferEnv sourceContainerNameFrom without fieldRef", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.TransferEnv[1].SourceContainerNameFrom.FieldRef = nil
		}), want: []string{"spec.containers[0].transferEnv[1].sourceContainerNameFrom.fieldRef: Required value"}},
		{name: "transferEnv fieldRef on status", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.TransferEnv[1].SourceContainerNameFrom.FieldRef.FieldPath = "status.podIP"
		}), want: []string{`spec.containers[0].transferEnv[1].sourceContainerNameFrom.fieldRef.fieldPath: Invalid value: "status.podIP"`,
			"use metadata.name, metadata.labels['<key>'] or metadata.annotations['<key>']"}},
		{name: "transferEnv fieldRef whole labels", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.TransferEnv[1].SourceContainerNameFrom.FieldRef.FieldPath = "metadata.labels"
		}), want: []string{"sourceContainerNameFrom.fieldRef.fieldPath: Invalid value"}},
		{name: "transferEnv fieldRef bad label key", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.TransferEnv[1].SourceContainerNameFrom.FieldRef.FieldPath = "metadata.labels['-bad-']"
		}), want: []string{"sourceContainerNameFrom.fieldRef.fieldPath: Invalid value", "the label key"}},
		{name: "transferEnv fieldRef apiVersion", change: container(0, func(c *v1beta1.SidecarContainer) {
			c.TransferEnv[1].SourceContainerNameFrom.FieldRef.APIVersion = "v2"
		}), want: []string{`sourceContainerNameFrom.fieldRef.apiVersion: Unsupported value: "v2"`}},

		// resourcesPolicy
		{name: "resourcesPolicy with resources", change: func(s *v1beta1.SidecarSet) {
			resourcesPolicy(func(*v1beta1.ResourcesPolicy) {})(s)
			s.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, want: []string{"spec.containers[0].resourcesPolicy: Forbidden", "cannot be combined with resources"}},
		{name: "resourcesPolicy bad regex", change: resourcesPolicy(func(p *v1beta1.ResourcesPolicy) { p.TargetContainersNameRegex = "[app" }),
			want: []string{`spec.containers[0].resourcesPolicy.targetContainersNameRegex: Invalid value: "[app"`}},
		{name: "resourcesPolicy empty regex", change: resourcesPolicy(func(p *v1beta1.ResourcesPolicy) { p.TargetContainersNameRegex = "" }),
			want: []string{"spec.containers[0].resourcesPolicy.targetContainersNameRegex: Required value"}},
		{name: "resourcesPolicy mode", change: resourcesPolicy(func(p *v1beta1.ResourcesPolicy) { p.TargetContainersMode = "avg" }),
			want: []string{`spec.containers[0].resourcesPolicy.targetContainersMode: Unsupported value: "avg"`}},
		{name: "resourcesPolicy without limits and requests", change: resourcesPolicy(func(p *v1beta1.ResourcesPolicy) { p.ResourcesExpr.Limits = nil }),
			want: []string{"spec.containers[0].resourcesPolicy.resourcesExpr: Required value"}},
		{name: "resourcesPolicy max with one argument", change: resourcesPolicy(func(p *v1beta1.ResourcesPolicy) { p.ResourcesExpr.Limits.CPU = "max(cpu*50%)" }),
			want: []string{`spec.containers[0].resourcesPolicy.resourcesExpr.limits.cpu: Invalid value: "max(cpu*50%)": invalid expression: max takes two arguments`}},
		{name: "resourcesPolicy wrong variable", change: resourcesPolicy(func(p *v1beta1.ResourcesPolicy) {
			p.ResourcesExpr.Requests = &v1beta1.ResourceExprRequests{Memory: "cpu*2"}
		}), want: []string{"spec.containers[0].resourcesPolicy.resourcesExpr.requests.memory: Invalid value", `unknown name "cpu" (the variable here is memory)`}},
		{name: "resourcesPolicy on an init container", change: initContainer(func(c *v1beta1.SidecarContainer) {
			c.ResourcesPolicy = &v1beta1.ResourcesPolicy{TargetContainersMode: v1beta1.TargetContainersModeMax, TargetContainersNameRegex: ".*"}
		}), want: []string{"spec.initContainers[0].resourcesPolicy: Forbidden"}},

		// volumes
		{name: "volume without name", change: func(s *v1beta1.SidecarSet) { s.Spec.Volumes[0].Name = "" },
			want: []string{"spec.volumes[0].name: Required value"}},
		{name: "volume name not a DNS label", change: func(s *v1beta1.SidecarSet) {
			s.Spec.Volumes[0].Name = "Logs"
			s.Spec.Containers[0].VolumeMounts[0].Name = "Logs"
		}, want: []string{`spec.volumes[0].name: Invalid value: "Logs"`}},
		{name: "volume name twice", change: func(s *v1beta1.SidecarSet) { s.Spec.Volumes = append(s.Spec.Volumes, s.Spec.Volumes[0]) },
			want: []string{`spec.volumes[1].name: Duplicate value: "log-volume"`}},
		{name: "volume without source", change: func(s *v1beta1.SidecarSet) { s.Spec.Volumes[0].EmptyDir = nil },
			want: []string{"spec.volumes[0]: Required value", "for example emptyDir: {}"}},
		{name: "volume with two sources", change: func(s *v1beta1.SidecarSet) {
			s.Spec.Volumes[0].HostPath = &corev1.HostPathVolumeSource{Path: "/var/log"}
		}, want: []string{"spec.volumes[0]: Forbidden", "hostPath, emptyDir"}},
		{name: "configMap volume without name", change: func(s *v1beta1.SidecarSet) {
			s.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}
		}, want: []string{"spec.volumes[0].configMap.name: Required value"}},

		// updateStrategy
		{name: "updateStrategy type", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) { s.Type = "OnDelete" }),
			want: []string{`spec.updateStrategy.type: Unsupported value: "OnDelete"`}},
		{name: "partition together with selector", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) {
			s.Partition, s.Selector = ptr.To(intstr.FromInt32(2)), &tierA
		}), want: []string{"spec.updateStrategy.partition: Forbidden: partition and selector cannot be used together", "set partition to 0 or remove it, or remove selector"}},
		{name: "partition percentage together with selector", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) {
			s.Partition, s.Selector = ptr.To(intstr.FromString("0%")), &tierA
		}), want: []string{"spec.updateStrategy.partition: Forbidden: partition and selector"}},
		{name: "partition negative", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) { s.Partition = ptr.To(intstr.FromInt32(-1)) }),
			want: []string{"spec.updateStrategy.partition: Invalid value: -1: must be 0 or more"}},
		{name: "partition over 100%", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) { s.Partition = ptr.To(intstr.FromString("150%")) }),
			want: []string{`spec.updateStrategy.partition: Invalid value: "150%"`, "percentage from 0% to 100%"}},
		{name: "maxUnavailable not a percentage", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) { s.MaxUnavailable = ptr.To(intstr.FromString("ten")) }),
			want: []string{`spec.updateStrategy.maxUnavailable: Invalid value: "ten"`}},
		{name: "maxUnavailable 0", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) { s.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }),
			want: []string{`spec.updateStrategy.maxUnavailable: Invalid value: "0"`, "never updates a pod", "paused: true"}},
		{name: "maxUnavailable 0%", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) { s.MaxUnavailable = ptr.To(intstr.FromString("0%")) }),
			want: []string{`spec.updateStrategy.maxUnavailable: Invalid value: "0%"`}},
		{name: "updateStrategy selector empty", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) { s.Selector = &metav1.LabelSelector{} }),
			want: []string{"spec.updateStrategy.selector: Invalid value"}},
		{name: "priorityStrategy with both kinds", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) {
			s.PriorityStrategy = &pub.UpdatePriorityStrategy{
				OrderPriority:  []pub.UpdatePriorityOrderTerm{{OrderedKey: "rank"}},
				WeightPriority: []pub.UpdatePriorityWeightTerm{{Weight: 10, MatchSelector: tierA}},
			}
		}), want: []string{"spec.updateStrategy.priorityStrategy: Forbidden: set only one of weightPriority and orderPriority"}},
		{name: "priority weight above 100", change: weight(101, tierA),
			want: []string{"spec.updateStrategy.priorityStrategy.weightPriority[0].weight: Invalid value: 101"}},
		{name: "priority weight with empty selector", change: weight(10, metav1.LabelSelector{}),
			want: []string{"spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector: Required value"}},
		{name: "priority orderedKey empty", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) {
			s.PriorityStrategy = &pub.UpdatePriorityStrategy{OrderPriority: []pub.UpdatePriorityOrderTerm{{}}}
		}), want: []string{"spec.updateStrategy.priorityStrategy.orderPriority[0].orderedKey: Required value"}},
		{name: "scatter term without key", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) { s.ScatterStrategy[0].Key = "" }),
			want: []string{"spec.updateStrategy.scatterStrategy[0].key: Required value"}},
		{name: "scatter term twice", change: strategy(func(s *v1beta1.SidecarSetUpdateStrategy) {
			s.ScatterStrategy = append(s.ScatterStrategy, s.ScatterStrategy[0])
		}), want: []string{`spec.updateStrategy.scatterStrategy[1]: Duplicate value: "zone=a"`}},

		// injectionStrategy
		{name: "revision without a name", change: func(s *v1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{Policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy}
		}, want: []string{"spec.injectionStrategy.revision: Required value", "set revisionName", "or customVersion"}},
		{name: "revision with an empty revisionName", change: func(s *v1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{RevisionName: ptr.To("")}
		}, want: []string{"spec.injectionStrategy.revision.revisionName: Invalid value"}},
		{name: "revision policy", change: func(s *v1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v1"), Policy: "Sometimes"}
		}, want: []string{`spec.injectionStrategy.revision.policy: Unsupported value: "Sometimes": supported values: "Always", "Partial"`}},

		// patchPodMetadata
		{name: "patchPodMetadata outside the allow-list",
			change: patch(v1beta1.SidecarSetPatchPodMetadata{Annotations: map[string]string{"other.io/x": "1"}, PatchPolicy: v1beta1.SidecarSetRetainPatchPolicy}),
			want: []string{`spec.patchPodMetadata[0].annotations[other.io/x]: Forbidden: annotation "other.io/x" matches none of the allowed expressions ["^example\\.com/"]`,
				"ask the cluster administrator to add an expression"}},
		{name: "patchPodMetadata without any allow-list (the default)",
			admission: func(a *SidecarSetAdmission) { a.WithPatchPodMetadataAllowed(nil) },
			want: []string{`spec.patchPodMetadata[0].annotations[example.com/mesh-config]: Forbidden: annotation "example.com/mesh-config" is not allowed`,
				"without one patchPodMetadata is denied", "SidecarSetPatchPodMetadataDefaultsAllowed", "SidecarSet_PatchPodMetadata_WhiteList"}},
		{name: "patchPodMetadata allow-list rule for other SidecarSets",
			admission: func(a *SidecarSetAdmission) {
				a.WithPatchPodMetadataAllowed(func() ([]SidecarSetPatchPodMetadataRule, error) {
					return []SidecarSetPatchPodMetadataRule{{
						Selector:                  &metav1.LabelSelector{MatchLabels: map[string]string{"team": "storage"}},
						AllowedAnnotationKeyExprs: []string{".*"},
					}}, nil
				})
			},
			want: []string{"spec.patchPodMetadata[0].annotations[example.com/mesh-config]: Forbidden", "no patchPodMetadata allow-list rule applies to this SidecarSet"}},
		{name: "patchPodMetadata allow-list unreadable",
			admission: func(a *SidecarSetAdmission) {
				a.WithPatchPodMetadataAllowed(func() ([]SidecarSetPatchPodMetadataRule, error) { return nil, errors.New("configmap missing") })
			},
			want: []string{"spec.patchPodMetadata: Internal error: could not read the patchPodMetadata allow-list: configmap missing"}},
		{name: "patchPodMetadata allow-list with a bad expression",
			admission: func(a *SidecarSetAdmission) {
				a.WithPatchPodMetadataAllowed(func() ([]SidecarSetPatchPodMetadataRule, error) {
					return []SidecarSetPatchPodMetadataRule{{AllowedAnnotationKeyExprs: []string{"(["}}}, nil
				})
			},
			want: []string{"spec.patchPodMetadata: Internal error: the patchPodMetadata allow-list has an invalid expression", "ask the cluster administrator to fix the allow-list"}},
		{name: "patchPodMetadata entry without annotations",
			change: patch(v1beta1.SidecarSetPatchPodMetadata{PatchPolicy: v1beta1.SidecarSetRetainPatchPolicy}),
			want:   []string{"spec.patchPodMetadata[0].annotations: Required value"}},
		{name: "patchPodMetadata bad key",
			change: patch(v1beta1.SidecarSetPatchPodMetadata{Annotations: map[string]string{"example.com/a b": "1"}}),
			want:   []string{`spec.patchPodMetadata[0].annotations: Invalid value: "example.com/a b"`}},
		{name: "patchPodMetadata key in two entries",
			change: patch(
				v1beta1.SidecarSetPatchPodMetadata{Annotations: map[string]string{"example.com/a": "1"}},
				v1beta1.SidecarSetPatchPodMetadata{Annotations: map[string]string{"example.com/a": "2"}, PatchPolicy: v1beta1.SidecarSetOverwritePatchPolicy},
			),
			want: []string{`spec.patchPodMetadata[1].annotations[example.com/a]: Duplicate value: "example.com/a": also set by spec.patchPodMetadata[0]`}},
		{name: "patchPodMetadata patchPolicy",
			change: patch(v1beta1.SidecarSetPatchPodMetadata{Annotations: map[string]string{"example.com/a": "1"}, PatchPolicy: "Merge"}),
			want:   []string{`spec.patchPodMetadata[0].patchPolicy: Unsupported value: "Merge"`}},
		{name: "patchPodMetadata MergePatchJson value not JSON",
			change: patch(v1beta1.SidecarSetPatchPodMetadata{Annotations: map[string]string{"example.com/a": "{log:on}"}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy}),
			want:   []string{`spec.patchPodMetadata[0].annotations[example.com/a]: Invalid value: "{log:on}"`, "must be a JSON object"}},
		{name: "patchPodMetadata MergePatchJson value a JSON array",
			change: patch(v1beta1.SidecarSetPatchPodMetadata{Annotations: map[string]string{"example.com/a": "[1]"}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy}),
			want:   []string{`spec.patchPodMetadata[0].annotations[example.com/a]: Invalid value: "[1]"`}},

		// UPDATE
		{name: "upgradeType changed",
			old: container(1, func(c *v1beta1.SidecarContainer) {
				c.UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerColdUpgrade}
			}),
			change: nil,
			want: []string{`spec.containers[1].upgradeStrategy.upgradeType: Forbidden: upgradeType of container "proxy" is immutable (kruise#855): it is ColdUpgrade`,
				"create a new SidecarSet instead"}},
		{name: "upgradeType changed from the default",
			old:    container(1, func(c *v1beta1.SidecarContainer) { c.UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{} }),
			change: nil,
			want:   []string{`upgradeType of container "proxy" is immutable (kruise#855)`}},
		{name: "container added on update",
			old:  func(s *v1beta1.SidecarSet) { s.Spec.Containers = s.Spec.Containers[:1] },
			want: []string{`spec.containers[1].name: Forbidden: container "proxy" is not in the stored SidecarSet`, "(kruise#937)", "create a new SidecarSet for this container"}},

		// canary SidecarSets
		{name: "canary without a base",
			change: func(s *v1beta1.SidecarSet) {
				s.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true"}
				s.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.NotUpdateSidecarSetStrategyType}
			},
			want: []string{"metadata.annotations[apps.kruise.io/sidecarset-base]: Required value"}},
		{name: "canary of a SidecarSet that does not exist",
			change: func(s *v1beta1.SidecarSet) {
				s.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true", wellknown.AnnotationSidecarSetBase: "nope"}
				s.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.NotUpdateSidecarSetStrategyType}
			},
			want: []string{`metadata.annotations[apps.kruise.io/sidecarset-base]: Not found: "nope"`}},
		{name: "canary of a canary, and rolling",
			change: func(s *v1beta1.SidecarSet) {
				s.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true", wellknown.AnnotationSidecarSetBase: "other"}
			},
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true", wellknown.AnnotationSidecarSetBase: "x"}
			})},
			want: []string{"the base is itself a canary", "spec.updateStrategy.type", "must not update pods: set NotUpdate"}},
		{name: "canary base changed",
			change: func(s *v1beta1.SidecarSet) {
				s.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true", wellknown.AnnotationSidecarSetBase: "other"}
				s.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.NotUpdateSidecarSetStrategyType}
			},
			old: func(s *v1beta1.SidecarSet) {
				s.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true", wellknown.AnnotationSidecarSetBase: "before"}
			},
			others: []*v1beta1.SidecarSet{scsOther("other", nil)},
			want:   []string{"metadata.annotations[apps.kruise.io/sidecarset-base]: Forbidden: the base of a canary SidecarSet is immutable"}},

		// conflicts with other SidecarSets
		{name: "container name used by another SidecarSet on the same pods",
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) { o.Spec.Containers[0].Name = "sidecar1" })},
			want:   []string{`spec.containers[0].name: Duplicate value: "sidecar1": container "sidecar1" is also injected by SidecarSet "other" which selects the same pods; rename one of them`}},
		{name: "init container name used by another SidecarSet",
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.InitContainers = []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "init-config", Image: "x"}}}
			})},
			want: []string{`spec.initContainers[0].name: Duplicate value: "init-config": container "init-config" is also injected by SidecarSet "other"`}},
		{name: "container named like another SidecarSet's hot-upgrade copy",
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "sidecar1-hot"
				o.Spec.Containers = append(o.Spec.Containers, v1beta1.SidecarContainer{
					Container:       corev1.Container{Name: "sidecar1", Image: "x"},
					UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "e"},
				})
			})},
			change: container(0, func(c *v1beta1.SidecarContainer) { c.Name = "sidecar1-1" }),
			want:   []string{`spec.containers[0].name: Duplicate value: "sidecar1-1": container "sidecar1-1" clashes with container "sidecar1-1" (hot-upgrade copy of "sidecar1") of SidecarSet "other"`}},
		{name: "hot-upgrade copy named like another SidecarSet's container",
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) { o.Spec.Containers[0].Name = "proxy-2" })},
			want:   []string{`spec.containers[1].name: Duplicate value: "proxy": container "proxy-2" (hot-upgrade copy of "proxy") clashes with container "proxy-2" of SidecarSet "other"`}},
		{name: "volume of the same name and other content in another SidecarSet",
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.Volumes = []corev1.Volume{{Name: "log-volume", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}}
			})},
			want: []string{`spec.volumes[0]: Invalid value: "log-volume": SidecarSet "other", which selects the same pods, also injects a volume "log-volume" with different content`, "make the two volumes identical, or rename one"}},
		{name: "annotation overwritten by another SidecarSet too",
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"example.com/injected": "no"}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy}}
			})},
			want: []string{`spec.patchPodMetadata[1].annotations[example.com/injected]: Invalid value: "example.com/injected": SidecarSet "other", which selects the same pods, also patches annotation "example.com/injected" (patchPolicy MergePatchJson)`}},
		{name: "conflict through a namespace selector covering ours",
			change: func(s *v1beta1.SidecarSet) { s.Spec.NamespaceSelector = scsNamespace("shop") },
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "sidecar1"
				o.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			})},
			admission: func(a *SidecarSetAdmission) {
				a.WithNamespaces(func(name string) (*corev1.Namespace, error) {
					return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": "prod"}}}, nil
				})
			},
			want: []string{`container "sidecar1" is also injected by SidecarSet "other"`}},
		{name: "conflict with a selector that only overlaps ours",
			change: func(s *v1beta1.SidecarSet) {
				s.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}}}}
			},
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "sidecar1"
				o.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api", "tier": "backend"}}
			})},
			want: []string{`container "sidecar1" is also injected by SidecarSet "other"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.run(t)
			require.False(t, resp.Allowed, "expected a denial")
			require.NotNil(t, resp.Result)
			require.Contains(t, resp.Result.Message, `" is invalid: `)
			for _, part := range tc.want {
				require.Contains(t, resp.Result.Message, part)
			}
		})
	}
}

func TestValidateSidecarSetAllowed(t *testing.T) {
	for _, tc := range []scsCase{
		{name: "full OpenKruise-doc-style SidecarSet with hot upgrade, transferEnv and allowed patchPodMetadata"},
		{name: "canary of a base with the same container names",
			change: func(s *v1beta1.SidecarSet) {
				s.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true", wellknown.AnnotationSidecarSetBase: "stable"}
				s.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.NotUpdateSidecarSetStrategyType}
			},
			others: []*v1beta1.SidecarSet{scsOther("stable", func(o *v1beta1.SidecarSet) { o.Spec.Containers[0].Name = "sidecar1" })}},
		{name: "minimal SidecarSet, schemaless fields left empty", change: func(s *v1beta1.SidecarSet) {
			*s = v1beta1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "test-sidecarset"},
				Spec: v1beta1.SidecarSetSpec{
					Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{Name: "sidecar1", Image: "centos:6.7"}}},
				},
			}
		}},
		{name: "init containers only", change: func(s *v1beta1.SidecarSet) { s.Spec.Containers = nil; s.Spec.PatchPodMetadata = nil }},
		{name: "native sidecar init container with NotUpdate", change: func(s *v1beta1.SidecarSet) {
			s.Spec.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			s.Spec.InitContainers[0].ReadinessProbe = &corev1.Probe{}
			s.Spec.UpdateStrategy.Type = v1beta1.NotUpdateSidecarSetStrategyType
		}},
		{name: "selector with partition 0", change: func(s *v1beta1.SidecarSet) {
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}},
		{name: "partition with selector under NotUpdate", change: func(s *v1beta1.SidecarSet) {
			s.Spec.UpdateStrategy.Type = v1beta1.NotUpdateSidecarSetStrategyType
			s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("50%"))
			s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}},
		{name: "percentages and priorities", change: func(s *v1beta1.SidecarSet) {
			s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("90%"))
			s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("10%"))
			s.Spec.UpdateStrategy.PriorityStrategy = &pub.UpdatePriorityStrategy{WeightPriority: []pub.UpdatePriorityWeightTerm{
				{Weight: 50, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a"}}},
			}}
		}},
		{name: "maxUnavailable 0 under NotUpdate", change: func(s *v1beta1.SidecarSet) {
			s.Spec.UpdateStrategy.Type = v1beta1.NotUpdateSidecarSetStrategyType
			s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		}},
		{name: "injection revision by custom version", change: func(s *v1beta1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: ptr.To("v1"), Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy}
		}},
		{name: "transferEnv with both sources and both name fields (documented precedence)", change: func(s *v1beta1.SidecarSet) {
			te := &s.Spec.Containers[0].TransferEnv[1]
			te.SourceContainerName, te.EnvName = "main", "HOME"
		}},
		{name: "transferEnv fieldRef on metadata.name without apiVersion", change: func(s *v1beta1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[1].SourceContainerNameFrom.FieldRef = &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}
		}},
		{name: "resourcesPolicy with OpenKruise's complex expression", change: func(s *v1beta1.SidecarSet) {
			s.Spec.Containers[0].ResourcesPolicy = &v1beta1.ResourcesPolicy{
				TargetContainersMode: v1beta1.TargetContainersModeSum, TargetContainersNameRegex: "^app.*$",
				ResourcesExpr: v1beta1.ResourcesExpr{
					Limits:   &v1beta1.ResourceExprLimits{CPU: "0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", Memory: "max(memory*50%, 100Mi)"},
					Requests: &v1beta1.ResourceExprRequests{CPU: "min(cpu/2, 2)", Memory: "100Mi"},
				},
			}
		}},
		{name: "defaults allowed without an allow-list", admission: func(a *SidecarSetAdmission) {
			a.WithPatchPodMetadataAllowed(nil).WithPatchPodMetadataDefaultsAllowed(true)
		}},
		{name: "allow-list rule selecting this SidecarSet", admission: func(a *SidecarSetAdmission) {
			a.WithPatchPodMetadataAllowed(func() ([]SidecarSetPatchPodMetadataRule, error) {
				return []SidecarSetPatchPodMetadataRule{
					{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "storage"}}, AllowedAnnotationKeyExprs: []string{"nothing"}},
					{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "mesh"}}, AllowedAnnotationKeyExprs: []string{"^example\\.com/(mesh-config|injected)$"}},
				}, nil
			})
		}},
		{name: "same container name on pods the selectors keep apart", others: []*v1beta1.SidecarSet{
			scsOther("db", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "sidecar1"
				o.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
			}),
			scsOther("not-web", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "proxy-1"
				o.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}}
			}),
			scsOther("unlabelled", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "init-config"
				o.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}}
			}),
		}},
		{name: "same container name in other namespaces", change: func(s *v1beta1.SidecarSet) { s.Spec.NamespaceSelector = scsNamespace("shop") },
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "sidecar1"
				o.Spec.NamespaceSelector = scsNamespace("billing")
			})}},
		{name: "same container name, the namespace does not have the other's labels", change: func(s *v1beta1.SidecarSet) { s.Spec.NamespaceSelector = scsNamespace("shop") },
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "sidecar1"
				o.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			})},
			admission: func(a *SidecarSetAdmission) {
				a.WithNamespaces(func(name string) (*corev1.Namespace, error) {
					return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": "dev"}}}, nil
				})
			}},
		{name: "same container name, the namespace does not exist", change: func(s *v1beta1.SidecarSet) { s.Spec.NamespaceSelector = scsNamespace("shop") },
			others: []*v1beta1.SidecarSet{scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.Containers[0].Name = "sidecar1"
				o.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			})},
			admission: func(a *SidecarSetAdmission) {
				a.WithNamespaces(func(name string) (*corev1.Namespace, error) {
					return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
				})
			}},
		{name: "identical volume, MergePatchJson on both sides and Retain against Overwrite", others: []*v1beta1.SidecarSet{
			scsOther("other", func(o *v1beta1.SidecarSet) {
				o.Spec.Volumes = []corev1.Volume{{Name: "log-volume", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				o.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{
					{Annotations: map[string]string{"example.com/mesh-config": `{"trace":"on"}`}, PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy},
					{Annotations: map[string]string{"example.com/injected": "false"}, PatchPolicy: v1beta1.SidecarSetRetainPatchPolicy},
				}
			}),
		}},
		{name: "update changing images and removing a container",
			old: func(*v1beta1.SidecarSet) {},
			change: func(s *v1beta1.SidecarSet) {
				s.Spec.Containers = s.Spec.Containers[1:]
				s.Spec.Containers[0].Image = "openkruise/hotupgrade-sample:sidecarv2"
			}},
		{name: "update with a conflict-free other SidecarSet", old: func(*v1beta1.SidecarSet) {},
			others: []*v1beta1.SidecarSet{nil, scsOther("other", nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.run(t)
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			require.True(t, resp.Allowed, msg)
		})
	}
}

func TestValidateSidecarSetRequests(t *testing.T) {
	a := NewSidecarSetAdmission(func() ([]*v1beta1.SidecarSet, error) { return nil, errors.New("cache not synced") }).
		WithPatchPodMetadataAllowed(scsTestAllowList)

	t.Run("list failure is an internal error", func(t *testing.T) {
		resp := a.Validate(context.Background(), scsRequest(t, scsTestSet(), nil))
		require.False(t, resp.Allowed)
		require.Equal(t, int32(http.StatusInternalServerError), resp.Result.Code)
		require.Contains(t, resp.Result.Message, "could not list the other SidecarSets")
		require.Contains(t, resp.Result.Message, "cache not synced; retry")
	})
	t.Run("undecodable object", func(t *testing.T) {
		req := scsRequest(t, scsTestSet(), nil)
		req.Object.Raw = []byte(`{"spec":{"containers":"x"}}`)
		resp := a.Validate(context.Background(), req)
		require.False(t, resp.Allowed)
		require.Equal(t, int32(http.StatusBadRequest), resp.Result.Code)
	})
	t.Run("status update and delete are not checked", func(t *testing.T) {
		bad := scsTestSet()
		bad.Spec.Selector = nil
		req := scsRequest(t, bad, bad)
		req.SubResource = "status"
		require.True(t, a.Validate(context.Background(), req).Allowed)
		req = scsRequest(t, bad, nil)
		req.Operation = admissionv1.Delete
		require.True(t, a.Validate(context.Background(), req).Allowed)
	})
	t.Run("name from the request, every problem reported", func(t *testing.T) {
		set := scsTestSet()
		set.Name = ""
		set.Spec.Selector = nil
		set.Spec.Containers[0].Image = ""
		req := scsRequest(t, set, nil)
		req.Name = "from-request"
		resp := a.Validate(context.Background(), req)
		require.False(t, resp.Allowed)
		require.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
		require.Contains(t, resp.Result.Message, `SidecarSet "from-request" is invalid: `)
		require.Contains(t, resp.Result.Message, "spec.selector: Required value")
		require.Contains(t, resp.Result.Message, "spec.containers[0].image: Required value")
	})
	t.Run("without a lister the conflict check is skipped", func(t *testing.T) {
		resp := NewSidecarSetAdmission(nil).WithPatchPodMetadataAllowed(scsTestAllowList).
			Validate(context.Background(), scsRequest(t, scsTestSet(), nil))
		require.True(t, resp.Allowed)
	})
}

func TestSidecarSetSelectorsOverlap(t *testing.T) {
	ml := func(kv ...string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kv[i+1]
		}
		return s
	}
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	for _, tc := range []struct {
		name string
		x, y *metav1.LabelSelector
		want bool
	}{
		// OpenKruise's TestSelectorConflict cases.
		{"same label", ml("a", "h"), ml("a", "h"), true},
		{"other value", ml("a", "h"), ml("a", "i"), false},
		{"other keys", ml("a", "h"), ml("b", "i"), true},
		{"one key differs", ml("a", "h", "b", "i", "c", "j"), ml("a", "h", "b", "x", "c", "j"), false},
		{"In with the value", ml("a", "h"), expr("a", metav1.LabelSelectorOpIn, "h", "i", "j"), true},
		{"In without the value", ml("a", "h"), expr("a", metav1.LabelSelectorOpIn, "i", "j"), false},
		{"NotIn the value", expr("a", metav1.LabelSelectorOpNotIn, "h", "i"), ml("a", "h"), false},
		{"Exists", ml("a", "h"), expr("a", metav1.LabelSelectorOpExists), true},
		{"DoesNotExist", expr("a", metav1.LabelSelectorOpDoesNotExist), ml("a", "h"), false},
		// Beyond OpenKruise's cases.
		{"Exists on a key the other does not mention", ml("a", "h"), expr("b", metav1.LabelSelectorOpExists), true},
		{"NotIn and DoesNotExist", expr("a", metav1.LabelSelectorOpNotIn, "h"), expr("a", metav1.LabelSelectorOpDoesNotExist), true},
		{"NotIn leaves another value of In", expr("a", metav1.LabelSelectorOpNotIn, "h"), expr("a", metav1.LabelSelectorOpIn, "h", "i"), true},
		{"empty selector matches no pod", &metav1.LabelSelector{}, ml("a", "h"), false},
		{"nil selector matches no pod", nil, ml("a", "h"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, scsPodSelectorsOverlap(tc.x, tc.y))
			require.Equal(t, tc.want, scsPodSelectorsOverlap(tc.y, tc.x), "symmetric")
		})
	}
}

func TestSidecarSetResourceExpr(t *testing.T) {
	for _, tc := range []struct {
		expr, variable, err string // err "" means valid
	}{
		{"max(cpu*50%, 50m)", "cpu", ""},
		{"max(memory*50%, 100Mi)", "memory", ""},
		{"0.5*cpu - 0.3*max(0, cpu-4) + 0.3*max(0, cpu-8)", "cpu", ""},
		{"-cpu + 2e3 - 1.5k", "cpu", ""},
		{"CPU / 2", "cpu", ""},
		{"100Mi", "memory", ""},
		{"max(cpu*50%, 50m", "cpu", "expected ')'"},
		{"max(cpu*50%)", "cpu", "max takes two arguments"},
		{"max(1, 2, 3)", "cpu", "max takes two arguments"},
		{"avg(1, 2)", "cpu", `unknown function "avg"`},
		{"invalidvar * 50%", "cpu", `unknown name "invalidvar"`},
		{"invalid expression @#$", "cpu", "unexpected character '@'"},
		{"cpu expression", "cpu", `unexpected "expression", expected an operator`},
		{"cpu @ 2", "cpu", "unexpected character '@'"},
		{"50m * 100m", "cpu", "cannot multiply two quantities"},
		{"cpu / 50m", "cpu", "cannot divide by a quantity"},
		{"cpu / (1-1)", "cpu", "division by zero"},
		{"10Xi", "memory", `"10Xi" is not a quantity`},
		{"cpu cpu", "cpu", `unexpected "cpu", expected an operator`},
		{"cpu *", "cpu", "ends early"},
		{" ", "cpu", "empty"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			err := scsCheckResourceExpr(tc.expr, tc.variable)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}
