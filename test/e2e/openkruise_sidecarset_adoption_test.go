//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// TestSidecarSetAdoptsOpenKruiseInjectedPods: a pod OpenKruise's webhook
// injected counts as up to date under Shoal, also after the SidecarSet's
// manifest is applied again. While no coordinator runs, the test writes a
// SidecarSet as OpenKruise stores it (its webhook defaulted the sidecar's
// container fields) and a pod as OpenKruise's webhook injects it: the
// sidecar first, IS_INJECTED, and the hash annotations of the stored
// SidecarSet. Once the coordinator is back, the SidecarSet reports the pod
// matched and updated, and the pod's sidecar is never restarted; then the
// manifest as the user wrote it (no container defaults) is applied, and
// the pod still counts as updated: Shoal's webhook defaults it as
// OpenKruise's did, so it is stored as before and its hash does not move.
// (Before the webhook defaulted container fields, the applied manifest
// dropped them, the hash changed, and the pod counted as out of date, with
// more than the image changed, so not even updatable in place.)
//
// Serial: it stops the coordinator and relaxes the SidecarSet webhooks.
func TestSidecarSetAdoptsOpenKruiseInjectedPods(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)

	// The manifest as a user writes it.
	image := f.Image("busybox:latest")
	manifest := v1beta1.SidecarSetSpec{
		Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "side-adopt"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: f.Namespace}},
		Containers: []v1beta1.SidecarContainer{{Container: corev1.Container{
			Name: "log", Image: image, Command: []string{"sleep", "10000000"},
			Ports: []corev1.ContainerPort{{ContainerPort: 9901}},
		}}},
	}
	// As OpenKruise's webhook stores it: the sidecar defaulted as the
	// apiserver defaults a pod's container, and the policies.
	stored := manifest.DeepCopy()
	sc := &stored.Containers[0]
	sc.PodInjectPolicy = v1beta1.BeforeAppContainerType
	sc.UpgradeStrategy.UpgradeType = v1beta1.SidecarContainerColdUpgrade
	sc.ShareVolumePolicy.Type = v1beta1.ShareVolumePolicyDisabled
	sc.ImagePullPolicy = corev1.PullAlways
	sc.TerminationMessagePath = corev1.TerminationMessagePathDefault
	sc.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	sc.Ports[0].Protocol = corev1.ProtocolTCP

	name := f.Namespace + "-log"
	shoalArrives := withoutCoordinator(ctx, t, f,
		[]string{"sidecarsets.validate.shoal.io", "selectors.validate.shoal.io"}, []string{"sidecarsets.mutate.shoal.io"},
		func(ctx context.Context, dryRun []string) error {
			_, err := f.Shoal.AppsV1beta1().SidecarSets().Create(ctx, &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *stored},
				metav1.CreateOptions{DryRun: dryRun})
			return err
		})

	set, err := f.Shoal.AppsV1beta1().SidecarSets().Create(ctx, &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *stored}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = f.Shoal.AppsV1beta1().SidecarSets().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	hash, hashWithoutImage, err := sidecarcontrol.Hashes(set)
	require.NoError(t, err)

	// The pod as OpenKruise's webhook injected it.
	annotation := func(h string) string {
		raw, err := json.Marshal(map[string]sidecarcontrol.UpgradeSpec{name: {
			UpdateTimestamp: metav1.Now(), Hash: h, SidecarSetName: name, SidecarList: []string{"log"},
		}})
		require.NoError(t, err)
		return string(raw)
	}
	sidecar := sc.Container.DeepCopy()
	sidecar.Env = append(sidecar.Env, corev1.EnvVar{Name: wellknown.EnvIsInjected, Value: "true"})
	pod, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Labels: map[string]string{"app": "side-adopt"},
			Annotations: map[string]string{
				wellknown.AnnotationSidecarSetHash:             annotation(hash),
				wellknown.AnnotationSidecarSetHashWithoutImage: annotation(hashWithoutImage),
				wellknown.AnnotationSidecarSetInjectedList:     name,
			},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{*sidecar,
				{Name: "app", Image: image, Command: []string{"sleep", "10000000"}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.WaitForPodsReady(ctx, f.Namespace, "app=side-adopt", 1, 2*time.Minute)
	require.NoError(t, err)
	t.Logf("OpenKruise's SidecarSet %s (hash %s) and its injected pod written", name, hash)

	shoalArrives()

	updated := func(what string) {
		t.Helper()
		var last string
		err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			got, err := f.Shoal.AppsV1beta1().SidecarSets().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := got.Status
			last = fmt.Sprintf("observedGeneration %d/%d matched %d updated %d ready %d", st.ObservedGeneration, got.Generation, st.MatchedPods, st.UpdatedPods, st.ReadyPods)
			return st.ObservedGeneration == got.Generation && st.MatchedPods == 1 && st.UpdatedPods == 1 && st.ReadyPods == 1, nil
		})
		require.NoError(t, err, "%s: the SidecarSet should count OpenKruise's pod updated; last: %s", what, last)
		t.Logf("%s: %s", what, last)
	}
	samePod := func(ctx context.Context) (bool, error) {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.UID != pod.UID {
			return false, fmt.Errorf("pod web was recreated")
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount != 0 {
				return false, fmt.Errorf("container %s restarted %d times", c.Name, c.RestartCount)
			}
		}
		return p.Spec.Containers[0].Image == image, nil
	}
	updated("after the takeover")
	pubHolds(ctx, t, 5*time.Second, "OpenKruise's pod stays as injected", samePod)

	// The user applies the manifest again, as written.
	updateObject[*v1beta1.SidecarSet](ctx, t, f.Shoal.AppsV1beta1().SidecarSets(), name, func(s *v1beta1.SidecarSet) {
		s.Spec.Containers = manifest.DeepCopy().Containers
	})
	got, err := f.Shoal.AppsV1beta1().SidecarSets().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, stored.Containers, got.Spec.Containers, "the manifest's sidecar is stored as OpenKruise stored it")
	updated("after the manifest is applied again")
	pubHolds(ctx, t, 5*time.Second, "OpenKruise's pod stays as injected", samePod)
}
