//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// cloneSetWebhooks are the validating webhooks a CloneSet create goes
// through, which refuse it while no coordinator runs (failurePolicy Fail).
var cloneSetWebhooks = []string{"clonesets.validate.shoal.io", "selectors.validate.shoal.io"}

// setWebhookFailurePolicy sets the failure policy of the named webhooks
// of the shoal-validating configuration.
func setWebhookFailurePolicy(ctx context.Context, f *framework.Framework, names []string, policy admissionv1.FailurePolicyType) error {
	configs := f.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg, err := configs.Get(ctx, "shoal-validating", metav1.GetOptions{})
	if err != nil {
		return err
	}
	var ops []string
	for _, name := range names {
		i := slices.IndexFunc(cfg.Webhooks, func(w admissionv1.ValidatingWebhook) bool { return w.Name == name })
		if i < 0 {
			return fmt.Errorf("webhook %s not in shoal-validating", name)
		}
		ops = append(ops, fmt.Sprintf(`{"op":"test","path":"/webhooks/%d/name","value":%q},{"op":"replace","path":"/webhooks/%d/failurePolicy","value":%q}`, i, name, i, policy))
	}
	_, err = configs.Patch(ctx, cfg.Name, types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]"), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("set failurePolicy %s on %v: %w", policy, names, err)
	}
	return nil
}

// kruiseRevision is a ControllerRevision as OpenKruise's CloneSet
// controller writes it: named by OpenKruise's own hash, the template stored
// as a replace patch under spec.template.
func kruiseRevision(t *testing.T, cs *v1beta1.CloneSet, hash string, number int64) *appsv1.ControllerRevision {
	t.Helper()
	tpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cs.Spec.Template)
	require.NoError(t, err)
	tpl["$patch"] = "replace"
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tpl}})
	require.NoError(t, err)
	labels := map[string]string{wellknown.LabelControllerRevisionHash: hash}
	for k, v := range cs.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: cs.Name + "-" + hash, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cs, v1beta1.SchemeGroupVersion.WithKind("CloneSet"))},
		},
		Data: runtime.RawExtension{Raw: raw}, Revision: number,
	}
}

// kruisePod is a pod of cs as OpenKruise's CloneSet controller creates it:
// named <cloneset>-<instance id>, labelled with its revision, instance id
// and lifecycle state, controlled by cs.
func kruisePod(cs *v1beta1.CloneSet, rev *appsv1.ControllerRevision, id string) *corev1.Pod {
	labels := map[string]string{
		wellknown.LabelControllerRevisionHash: rev.Name,
		wellknown.LabelPodTemplateHash:        rev.Labels[wellknown.LabelControllerRevisionHash],
		wellknown.LabelCloneSetInstanceID:     id,
		wellknown.LabelLifecycleState:         "Normal",
	}
	for k, v := range cs.Spec.Template.Labels {
		labels[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: cs.Name + "-" + id, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cs, v1beta1.SchemeGroupVersion.WithKind("CloneSet"))},
		},
		Spec: *cs.Spec.Template.Spec.DeepCopy(),
	}
}

// TestCloneSetAdoptsOpenKruisePods: a CloneSet left by OpenKruise (its
// ControllerRevision named by OpenKruise's hash, its pods labelled with
// it) is taken over by Shoal without recreating a pod. While no
// coordinator runs (as between uninstalling OpenKruise and installing
// Shoal), the test writes the CloneSet, its revision and its two running
// pods as OpenKruise's controller does; the CloneSet's update policy is
// ReCreate, so a pod Shoal took for out of date would be deleted. Once the
// coordinator is back, the CloneSet reports both pods updated and ready at
// OpenKruise's revision, the same pods stay for 10 s, and a scale-up adds
// a pod at that revision.
//
// Serial: it stops the coordinator and relaxes the CloneSet webhooks.
func TestCloneSetAdoptsOpenKruisePods(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)

	scale, err := f.Kube.AppsV1().Deployments(framework.ShoalNamespace).GetScale(ctx, coordinatorDeployment, metav1.GetOptions{})
	require.NoError(t, err)
	replicas := scale.Spec.Replicas
	// However the test ends: the webhook strict again, then the
	// coordinator back (the namespace's deletion needs it).
	restore := func(ctx context.Context) error {
		if err := setWebhookFailurePolicy(ctx, f, cloneSetWebhooks, admissionv1.Fail); err != nil {
			return err
		}
		return startCoordinator(ctx, f, replicas)
	}
	restored := false
	t.Cleanup(func() {
		if restored {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	// OpenKruise is gone and Shoal not yet there.
	stopCoordinator(ctx, t, f)
	require.NoError(t, setWebhookFailurePolicy(ctx, f, cloneSetWebhooks, admissionv1.Ignore))

	cs := &v1beta1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1beta1.CloneSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "app", Image: f.Image("busybox:latest"), Command: []string{"sleep", "10000000"}}},
				},
			},
			UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
				Type:          v1beta1.RollingUpdateCloneSetUpdateStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType},
			},
		},
	}
	cs, err = f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	rev, err := f.Kube.AppsV1().ControllerRevisions(f.Namespace).Create(ctx, kruiseRevision(t, cs, "5d8b7c9f4", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	uids := map[string]types.UID{}
	for _, id := range []string{"x7k2p", "q9m4d"} {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, kruisePod(cs, rev, id), metav1.CreateOptions{})
		require.NoError(t, err)
		uids[p.Name] = p.UID
	}
	_, err = f.WaitForPodsReady(ctx, f.Namespace, "app=web", 2, 2*time.Minute)
	require.NoError(t, err)
	t.Logf("OpenKruise's CloneSet written: revision %s, pods %v", rev.Name, uids)

	// Shoal arrives.
	require.NoError(t, restore(ctx))
	restored = true
	arrived := time.Now()

	var last string
	err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, cs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := got.Status
		last = fmt.Sprintf("observedGeneration %d/%d updateRevision %q replicas %d updated %d ready %d updatedReady %d",
			st.ObservedGeneration, got.Generation, st.UpdateRevision, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.UpdatedReadyReplicas)
		return st.ObservedGeneration == got.Generation && st.UpdateRevision == rev.Name &&
			st.Replicas == 2 && st.UpdatedReplicas == 2 && st.UpdatedReadyReplicas == 2, nil
	})
	require.NoError(t, err, "the CloneSet's status should show OpenKruise's pods updated at its revision; last: %s", last)
	t.Logf("Shoal took the CloneSet over in %v: %s", time.Since(arrived).Round(time.Millisecond), last)

	samePods := func(ctx context.Context) (bool, error) {
		pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		got := map[string]types.UID{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				got[p.Name] = p.UID
			}
		}
		if len(got) != len(uids) {
			return false, fmt.Errorf("pods %v, want OpenKruise's %v", got, uids)
		}
		for name, uid := range uids {
			if got[name] != uid {
				return false, fmt.Errorf("pod %s is %q, want OpenKruise's %q (recreated)", name, got[name], uid)
			}
		}
		return true, nil
	}
	pubHolds(ctx, t, 10*time.Second, "OpenKruise's pods stay", samePods)

	// Shoal manages it from here: one more pod, at the same revision.
	updateObject[*v1beta1.CloneSet](ctx, t, f.Shoal.AppsV1beta1().CloneSets(f.Namespace), cs.Name, func(c *v1beta1.CloneSet) {
		c.Spec.Replicas = ptr.To[int32](3)
	})
	pods, err := f.WaitForPodsReady(ctx, f.Namespace, "app=web", 3, 2*time.Minute)
	require.NoError(t, err)
	for _, p := range pods {
		require.Equal(t, rev.Name, p.Labels[wellknown.LabelControllerRevisionHash], "pod %s", p.Name)
		if uid, ok := uids[p.Name]; ok {
			require.Equal(t, uid, p.UID, "pod %s kept", p.Name)
		}
	}
}
