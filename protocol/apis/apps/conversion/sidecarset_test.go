package conversion

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// sidecarSetFillFuncs fill the SidecarSet enums with the values each
// version's schema admits.
func sidecarSetFillFuncs() []any {
	return []any{
		func(s *v1alpha1.SidecarSetPatchPolicyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.SidecarSetRetainPatchPolicy, v1alpha1.SidecarSetOverwritePatchPolicy, v1alpha1.SidecarSetMergePatchJsonPatchPolicy)
		},
		func(s *v1beta1.SidecarSetPatchPolicyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.SidecarSetRetainPatchPolicy, v1beta1.SidecarSetOverwritePatchPolicy, v1beta1.SidecarSetMergePatchJsonPatchPolicy)
		},
		func(s *v1alpha1.PodInjectPolicyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.BeforeAppContainerType, v1alpha1.AfterAppContainerType)
		},
		func(s *v1beta1.PodInjectPolicyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.BeforeAppContainerType, v1beta1.AfterAppContainerType)
		},
		func(s *v1alpha1.ShareVolumePolicyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.ShareVolumePolicyEnabled, v1alpha1.ShareVolumePolicyDisabled)
		},
		func(s *v1beta1.ShareVolumePolicyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.ShareVolumePolicyEnabled, v1beta1.ShareVolumePolicyDisabled)
		},
		func(s *v1alpha1.SidecarContainerUpgradeType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.SidecarContainerColdUpgrade, v1alpha1.SidecarContainerHotUpgrade)
		},
		func(s *v1beta1.SidecarContainerUpgradeType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.SidecarContainerColdUpgrade, v1beta1.SidecarContainerHotUpgrade)
		},
		func(s *v1alpha1.TargetContainersModeType, c randfill.Continue) {
			*s = pick(c, v1alpha1.TargetContainersModeSum, v1alpha1.TargetContainersModeMax)
		},
		func(s *v1beta1.TargetContainersModeType, c randfill.Continue) {
			*s = pick(c, v1beta1.TargetContainersModeSum, v1beta1.TargetContainersModeMax)
		},
		func(s *v1alpha1.SidecarSetInjectRevisionPolicy, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.AlwaysSidecarSetInjectRevisionPolicy, v1alpha1.PartialSidecarSetInjectRevisionPolicy)
		},
		func(s *v1beta1.SidecarSetInjectRevisionPolicy, c randfill.Continue) {
			*s = pick(c, "", v1beta1.AlwaysSidecarSetInjectRevisionPolicy, v1beta1.PartialSidecarSetInjectRevisionPolicy)
		},
		func(s *v1alpha1.SidecarSetUpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1alpha1.RollingUpdateSidecarSetStrategyType, v1alpha1.NotUpdateSidecarSetStrategyType)
		},
		func(s *v1beta1.SidecarSetUpdateStrategyType, c randfill.Continue) {
			*s = pick(c, "", v1beta1.RollingUpdateSidecarSetStrategyType, v1beta1.NotUpdateSidecarSetStrategyType)
		},
		// spec.namespace is left empty or set with equal chance, so that
		// the namespace-to-selector mapping (random strings are rarely
		// empty) is exercised alongside objects without one. Both with
		// and without a namespaceSelector, which the v1alpha1 schema
		// refuses but the conversion still keeps.
		func(s *v1alpha1.SidecarSetSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if c.Bool() {
				s.Namespace = ""
			}
			if c.Bool() {
				s.NamespaceSelector = nil
			}
		},
	}
}

func TestSidecarSetRoundTrip(t *testing.T) {
	roundTrip(t, "SidecarSet", sidecarSetToV1beta1, sidecarSetToV1alpha1, sidecarSetFillFuncs()...)
}

func TestSidecarSetMapping(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	agent := corev1.Container{Name: "log-agent", Image: "nginx:1.25"}
	quarter := intstr.FromString("25%")
	tests := []struct {
		name  string
		alpha v1alpha1.SidecarSet
		beta  v1beta1.SidecarSet
	}{
		{
			name: "spec.namespace is a namespaceSelector on kubernetes.io/metadata.name",
			alpha: v1alpha1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "log-agent"},
				Spec: v1alpha1.SidecarSetSpec{Selector: sel, Namespace: "shop",
					Containers: []v1alpha1.SidecarContainer{{Container: agent}}},
			},
			beta: v1beta1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "log-agent", Annotations: map[string]string{
					StashAnnotationPrefix + "v1alpha1": `{"namespaceAsSelector":"shop"}`}},
				Spec: v1beta1.SidecarSetSpec{Selector: sel,
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}},
					Containers:        []v1beta1.SidecarContainer{{Container: agent}}},
			},
		},
		{
			name: "namespaceSelector is the same in v1beta1",
			alpha: v1alpha1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "log-agent"},
				Spec: v1alpha1.SidecarSetSpec{Selector: sel,
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sidecar-injection": "enabled"}},
					Containers:        []v1alpha1.SidecarContainer{{Container: agent}}},
			},
			beta: v1beta1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "log-agent"},
				Spec: v1beta1.SidecarSetSpec{Selector: sel,
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sidecar-injection": "enabled"}},
					Containers:        []v1beta1.SidecarContainer{{Container: agent}}},
			},
		},
		{
			name: "label apps.kruise.io/sidecarset-custom-version is spec.customVersion",
			alpha: v1alpha1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "log-agent", Labels: map[string]string{
					"apps.kruise.io/sidecarset-custom-version": "v2", "team": "obs"}},
				Spec: v1alpha1.SidecarSetSpec{Selector: sel, Containers: []v1alpha1.SidecarContainer{{Container: agent}},
					InjectionStrategy: v1alpha1.SidecarSetInjectionStrategy{Revision: &v1alpha1.SidecarSetInjectRevision{
						CustomVersion: ptr.To("v1"), Policy: v1alpha1.PartialSidecarSetInjectRevisionPolicy}},
					UpdateStrategy: v1alpha1.SidecarSetUpdateStrategy{Partition: &quarter}},
			},
			beta: v1beta1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "log-agent", Labels: map[string]string{"team": "obs"}},
				Spec: v1beta1.SidecarSetSpec{Selector: sel, Containers: []v1beta1.SidecarContainer{{Container: agent}},
					CustomVersion: "v2",
					InjectionStrategy: v1beta1.SidecarSetInjectionStrategy{Revision: &v1beta1.SidecarSetInjectRevision{
						CustomVersion: ptr.To("v1"), Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy}},
					UpdateStrategy: v1beta1.SidecarSetUpdateStrategy{Partition: &quarter}},
			},
		},
		{
			name: "hot upgrade, resourcesPolicy and shareVolumeDevicePolicy are the same in v1beta1",
			alpha: v1alpha1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "mesh"},
				Spec: v1alpha1.SidecarSetSpec{Selector: sel, Containers: []v1alpha1.SidecarContainer{{
					Container:       corev1.Container{Name: "proxy", Image: "nginx:1.25"},
					PodInjectPolicy: v1alpha1.AfterAppContainerType,
					UpgradeStrategy: v1alpha1.SidecarContainerUpgradeStrategy{
						UpgradeType: v1alpha1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "busybox:1.36"},
					ShareVolumeDevicePolicy: &v1alpha1.ShareVolumePolicy{Type: v1alpha1.ShareVolumePolicyEnabled},
					ResourcesPolicy: &v1alpha1.ResourcesPolicy{
						TargetContainersMode: v1alpha1.TargetContainersModeSum, TargetContainersNameRegex: "^app$",
						ResourcesExpr: v1alpha1.ResourcesExpr{Limits: &v1alpha1.ResourceExprLimits{CPU: "max(cpu*50%, 50m)"}}},
				}}},
			},
			beta: v1beta1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "mesh"},
				Spec: v1beta1.SidecarSetSpec{Selector: sel, Containers: []v1beta1.SidecarContainer{{
					Container:       corev1.Container{Name: "proxy", Image: "nginx:1.25"},
					PodInjectPolicy: v1beta1.AfterAppContainerType,
					UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{
						UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "busybox:1.36"},
					ShareVolumeDevicePolicy: &v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyEnabled},
					ResourcesPolicy: &v1beta1.ResourcesPolicy{
						TargetContainersMode: v1beta1.TargetContainersModeSum, TargetContainersNameRegex: "^app$",
						ResourcesExpr: v1beta1.ResourcesExpr{Limits: &v1beta1.ResourceExprLimits{CPU: "max(cpu*50%, 50m)"}}},
				}}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var beta v1beta1.SidecarSet
			require.NoError(t, sidecarSetToV1beta1(&tc.alpha, &beta))
			require.Equal(t, tc.beta, beta)
			var alpha v1alpha1.SidecarSet
			require.NoError(t, sidecarSetToV1alpha1(&beta, &alpha))
			require.Equal(t, tc.alpha, alpha)
		})
	}

	t.Run("a namespace selector changed at v1beta1 stays a selector", func(t *testing.T) {
		var beta v1beta1.SidecarSet
		require.NoError(t, sidecarSetToV1beta1(&tests[0].alpha, &beta))
		beta.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "billing"}}
		var alpha v1alpha1.SidecarSet
		require.NoError(t, sidecarSetToV1alpha1(&beta, &alpha))
		require.Empty(t, alpha.Spec.Namespace)
		require.Equal(t, beta.Spec.NamespaceSelector, alpha.Spec.NamespaceSelector)
		require.Empty(t, alpha.Annotations)
	})

	t.Run("a v1beta1 object's own custom-version label survives next to customVersion", func(t *testing.T) {
		beta := v1beta1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: "log-agent", Labels: map[string]string{"apps.kruise.io/sidecarset-custom-version": "old"}},
			Spec:       v1beta1.SidecarSetSpec{Selector: sel, CustomVersion: "v3", Containers: []v1beta1.SidecarContainer{{Container: agent}}},
		}
		var alpha v1alpha1.SidecarSet
		require.NoError(t, sidecarSetToV1alpha1(&beta, &alpha))
		require.Equal(t, map[string]string{"apps.kruise.io/sidecarset-custom-version": "v3"}, alpha.Labels)
		require.Equal(t, map[string]string{StashAnnotationPrefix + "v1beta1": `{"customVersionLabel":"old"}`}, alpha.Annotations)
		var back v1beta1.SidecarSet
		require.NoError(t, sidecarSetToV1beta1(&alpha, &back))
		require.Equal(t, beta, back)
	})
}
