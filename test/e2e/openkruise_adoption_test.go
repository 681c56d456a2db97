//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// adoptionWebhooks are the validating webhooks the workloads' creates go
// through, which refuse them while no coordinator runs (failurePolicy
// Fail).
var adoptionWebhooks = []string{"clonesets.validate.shoal.io", "statefulsets.validate.shoal.io", "daemonsets.validate.shoal.io", "selectors.validate.shoal.io"}

// setWebhookFailurePolicy sets the failure policy of the named
// validating (shoal-validating) and mutating (shoal-mutating) webhooks.
func setWebhookFailurePolicy(ctx context.Context, f *framework.Framework, validating, mutating []string, policy admissionv1.FailurePolicyType) error {
	patch := func(config string, names, have []string, apply func([]byte) error) error {
		if len(names) == 0 {
			return nil
		}
		var ops []string
		for _, name := range names {
			i := slices.Index(have, name)
			if i < 0 {
				return fmt.Errorf("webhook %s not in %s", name, config)
			}
			ops = append(ops, fmt.Sprintf(`{"op":"test","path":"/webhooks/%d/name","value":%q},{"op":"replace","path":"/webhooks/%d/failurePolicy","value":%q}`, i, name, i, policy))
		}
		if err := apply([]byte("[" + strings.Join(ops, ",") + "]")); err != nil {
			return fmt.Errorf("set failurePolicy %s on %v: %w", policy, names, err)
		}
		return nil
	}
	reg := f.Kube.AdmissionregistrationV1()
	v, err := reg.ValidatingWebhookConfigurations().Get(ctx, "shoal-validating", metav1.GetOptions{})
	if err != nil {
		return err
	}
	m, err := reg.MutatingWebhookConfigurations().Get(ctx, "shoal-mutating", metav1.GetOptions{})
	if err != nil {
		return err
	}
	var vNames, mNames []string
	for _, w := range v.Webhooks {
		vNames = append(vNames, w.Name)
	}
	for _, w := range m.Webhooks {
		mNames = append(mNames, w.Name)
	}
	return errors.Join(
		patch(v.Name, validating, vNames, func(raw []byte) error {
			_, err := reg.ValidatingWebhookConfigurations().Patch(ctx, v.Name, types.JSONPatchType, raw, metav1.PatchOptions{})
			return err
		}),
		patch(m.Name, mutating, mNames, func(raw []byte) error {
			_, err := reg.MutatingWebhookConfigurations().Patch(ctx, m.Name, types.JSONPatchType, raw, metav1.PatchOptions{})
			return err
		}))
}

// withoutCoordinator stands for the time between uninstalling OpenKruise
// and installing Shoal: it scales the coordinator to 0 and relaxes the
// named webhooks, which would refuse creates while nobody answers. The
// apiserver applies a webhook configuration from an informer, a moment
// after the write, so it then repeats probe (a server-side dry run of a
// create through the relaxed webhooks) until no webhook call fails. The
// returned function brings both back (strict webhooks, then the
// coordinator); if the test ends first, its cleanup does (the namespace's
// deletion needs the coordinator).
func withoutCoordinator(ctx context.Context, t *testing.T, f *framework.Framework, validating, mutating []string,
	probe func(ctx context.Context, dryRun []string) error) (back func()) {
	t.Helper()
	scale, err := f.Kube.AppsV1().Deployments(framework.ShoalNamespace).GetScale(ctx, coordinatorDeployment, metav1.GetOptions{})
	require.NoError(t, err)
	restore := func(ctx context.Context) error {
		if err := setWebhookFailurePolicy(ctx, f, validating, mutating, admissionv1.Fail); err != nil {
			return err
		}
		return startCoordinator(ctx, f, scale.Spec.Replicas)
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
	stopCoordinator(ctx, t, f)
	require.NoError(t, setWebhookFailurePolicy(ctx, f, validating, mutating, admissionv1.Ignore))
	var last error
	err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		last = probe(ctx, []string{metav1.DryRunAll})
		return last == nil || !strings.Contains(last.Error(), "failed calling webhook"), nil
	})
	require.NoError(t, err, "the apiserver still calls the relaxed webhooks: %v", last)
	return func() {
		t.Helper()
		require.NoError(t, restore(ctx))
		restored = true
	}
}

// kruiseRevision is a ControllerRevision as OpenKruise's controllers
// (and upstream's StatefulSet and DaemonSet controllers) write it: named
// <owner>-<hash> by OpenKruise's own hash, the template stored as a replace
// patch under spec.template, labelled with the hash and the selector's
// labels, controlled by owner (of kind gvk).
func kruiseRevision(t *testing.T, owner metav1.Object, gvk schema.GroupVersionKind, tmpl *corev1.PodTemplateSpec, selector map[string]string, hash string, number int64) *appsv1.ControllerRevision {
	t.Helper()
	tpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	require.NoError(t, err)
	tpl["$patch"] = "replace"
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tpl}})
	require.NoError(t, err)
	labels := map[string]string{wellknown.LabelControllerRevisionHash: hash}
	for k, v := range selector {
		labels[k] = v
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: owner.GetName() + "-" + hash, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)},
		},
		Data: runtime.RawExtension{Raw: raw}, Revision: number,
	}
}

// kruiseOwnedPod is a pod of owner's template, controlled by owner, with
// extra labels on top of the template's.
func kruiseOwnedPod(owner metav1.Object, gvk schema.GroupVersionKind, tmpl *corev1.PodTemplateSpec, name string, extra map[string]string) *corev1.Pod {
	labels := map[string]string{}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
}

// kruisePod is a pod of cs as OpenKruise's CloneSet controller creates it:
// named <cloneset>-<instance id>, labelled with its revision, instance id
// and lifecycle state, controlled by cs.
func kruisePod(cs *v1beta1.CloneSet, rev *appsv1.ControllerRevision, id string) *corev1.Pod {
	return kruiseOwnedPod(cs, v1beta1.SchemeGroupVersion.WithKind("CloneSet"), &cs.Spec.Template, cs.Name+"-"+id, map[string]string{
		wellknown.LabelControllerRevisionHash: rev.Name,
		wellknown.LabelPodTemplateHash:        rev.Labels[wellknown.LabelControllerRevisionHash],
		wellknown.LabelCloneSetInstanceID:     id,
		wellknown.LabelLifecycleState:         "Normal",
	})
}

// kruiseStatefulSetPod is pod ordinal of set as OpenKruise's Advanced
// StatefulSet controller creates it (as upstream's does): named
// <set>-<ordinal>, labelled with the revision's name, its pod name and
// index, with the set's identity.
func kruiseStatefulSetPod(set *v1beta1.StatefulSet, rev *appsv1.ControllerRevision, ordinal int) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", set.Name, ordinal)
	p := kruiseOwnedPod(set, v1beta1.SchemeGroupVersion.WithKind("StatefulSet"), &set.Spec.Template, name, map[string]string{
		wellknown.LabelControllerRevisionHash: rev.Name,
		wellknown.LabelStatefulSetPodName:     name,
		wellknown.LabelPodIndex:               strconv.Itoa(ordinal),
	})
	p.Spec.Hostname, p.Spec.Subdomain = name, set.Spec.ServiceName
	return p
}

// kruiseDaemonPod is ds's pod for node as OpenKruise's Advanced DaemonSet
// controller creates it (as upstream's does): labelled with the revision's
// hash and the template generation, pinned to the node by node affinity.
func kruiseDaemonPod(ds *v1beta1.DaemonSet, hash, node string) *corev1.Pod {
	p := kruiseOwnedPod(ds, v1beta1.SchemeGroupVersion.WithKind("DaemonSet"), &ds.Spec.Template, ds.Name+"-"+hash[:5], map[string]string{
		wellknown.LabelControllerRevisionHash: hash,
		"pod-template-generation":             "1",
	})
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
	return p
}

// Kinds of the workloads the adoption test writes as OpenKruise left them.
var (
	cloneSetKind    = v1beta1.SchemeGroupVersion.WithKind("CloneSet")
	statefulSetKind = v1beta1.SchemeGroupVersion.WithKind("StatefulSet")
	daemonSetKind   = v1beta1.SchemeGroupVersion.WithKind("DaemonSet")
)

// TestWorkloadsAdoptOpenKruisePods: a CloneSet, an Advanced StatefulSet
// and an Advanced DaemonSet left by OpenKruise (each ControllerRevision
// named by OpenKruise's hash, their pods labelled with it) are taken over
// by Shoal without recreating a pod. While no coordinator runs (as between
// uninstalling OpenKruise and installing Shoal), the test writes each
// workload, its revision and its running pods as OpenKruise's controllers
// do. Every update policy recreates pods (CloneSet and StatefulSet
// ReCreate, DaemonSet Standard), so a pod Shoal took for out of date would
// be deleted. Once the coordinator is back, each workload reports its pods
// updated and ready at OpenKruise's revision, the same pods stay for 10 s,
// and scale-ups of the CloneSet and the StatefulSet add pods at that
// revision.
//
// Serial: it stops the coordinator and relaxes the workloads' webhooks.
func TestWorkloadsAdoptOpenKruisePods(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)
	node := requireSchedulableNodes(ctx, t, f, 1)[0].Name

	// OpenKruise is gone and Shoal not yet there.
	shoalArrives := withoutCoordinator(ctx, t, f, adoptionWebhooks, nil, func(ctx context.Context, dryRun []string) error {
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, testCloneSet(f, "probe", 1), metav1.CreateOptions{DryRun: dryRun})
		return err
	})

	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers:                    []corev1.Container{{Name: "app", Image: f.Image("busybox:latest"), Command: []string{"sleep", "10000000"}}},
			},
		}
	}
	selector := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	uids := map[string]types.UID{}
	createPod := func(p *corev1.Pod) {
		t.Helper()
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		uids[p.Name] = p.UID
	}
	createRevision := func(r *appsv1.ControllerRevision) *appsv1.ControllerRevision {
		t.Helper()
		r, err := f.Kube.AppsV1().ControllerRevisions(f.Namespace).Create(ctx, r, metav1.CreateOptions{})
		require.NoError(t, err)
		return r
	}

	cs, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, &v1beta1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1beta1.CloneSetSpec{
			Replicas: ptr.To[int32](2), Selector: selector("web"), Template: template("web"),
			UpdateStrategy: v1beta1.CloneSetUpdateStrategy{
				Type:          v1beta1.RollingUpdateCloneSetUpdateStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: v1beta1.RecreateCloneSetPodUpdateStrategyType},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	csRev := createRevision(kruiseRevision(t, cs, cloneSetKind, &cs.Spec.Template, cs.Spec.Selector.MatchLabels, "5d8b7c9f4", 1))
	for _, id := range []string{"x7k2p", "q9m4d"} {
		createPod(kruisePod(cs, csRev, id))
	}

	set, err := f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Create(ctx, &v1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: v1beta1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), Selector: selector("db"), Template: template("db"), ServiceName: "db",
			UpdateStrategy: v1beta1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{PodUpdatePolicy: v1beta1.RecreatePodUpdateStrategyType},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	setRev := createRevision(kruiseRevision(t, set, statefulSetKind, &set.Spec.Template, set.Spec.Selector.MatchLabels, "6b9f8d7c5", 1))
	for ordinal := range 2 {
		createPod(kruiseStatefulSetPod(set, setRev, ordinal))
	}

	// The DaemonSet runs on one node only: the pod OpenKruise left there.
	dsTemplate := template("agent")
	dsTemplate.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	ds, err := f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Create(ctx, &v1beta1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: v1beta1.DaemonSetSpec{
			Selector: selector("agent"), Template: dsTemplate,
			UpdateStrategy: v1beta1.DaemonSetUpdateStrategy{
				Type:          v1beta1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateDaemonSet{Type: v1beta1.StandardRollingUpdateType},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	const dsHash = "7c6d5b8f9"
	dsRev := createRevision(kruiseRevision(t, ds, daemonSetKind, &ds.Spec.Template, ds.Spec.Selector.MatchLabels, dsHash, 1))
	createPod(kruiseDaemonPod(ds, dsHash, node))

	_, err = f.WaitForPodsReady(ctx, f.Namespace, "app in (web,db,agent)", len(uids), 2*time.Minute)
	require.NoError(t, err)
	t.Logf("OpenKruise's workloads written: revisions %s, %s, %s; pods %v", csRev.Name, setRev.Name, dsRev.Name, uids)

	shoalArrives()
	arrived := time.Now()

	adopted := func(what string, done func(ctx context.Context) (bool, string, error)) {
		t.Helper()
		var last string
		err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			ok, state, err := done(ctx)
			last = state
			return ok, err
		})
		require.NoError(t, err, "the %s's status should show OpenKruise's pods updated at its revision; last: %s", what, last)
		t.Logf("Shoal took the %s over in %v: %s", what, time.Since(arrived).Round(time.Millisecond), last)
	}
	adopted("CloneSet", func(ctx context.Context) (bool, string, error) {
		got, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, cs.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := got.Status
		return st.ObservedGeneration == got.Generation && st.UpdateRevision == csRev.Name &&
				st.Replicas == 2 && st.UpdatedReplicas == 2 && st.UpdatedReadyReplicas == 2,
			fmt.Sprintf("observedGeneration %d/%d updateRevision %q replicas %d updated %d ready %d updatedReady %d",
				st.ObservedGeneration, got.Generation, st.UpdateRevision, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.UpdatedReadyReplicas), nil
	})
	adopted("StatefulSet", func(ctx context.Context) (bool, string, error) {
		got, err := f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := got.Status
		return st.ObservedGeneration == got.Generation && st.UpdateRevision == setRev.Name && st.CurrentRevision == setRev.Name &&
				st.Replicas == 2 && st.UpdatedReplicas == 2 && st.ReadyReplicas == 2,
			fmt.Sprintf("observedGeneration %d/%d currentRevision %q updateRevision %q replicas %d updated %d ready %d",
				st.ObservedGeneration, got.Generation, st.CurrentRevision, st.UpdateRevision, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas), nil
	})
	adopted("DaemonSet", func(ctx context.Context) (bool, string, error) {
		got, err := f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		st := got.Status
		return st.ObservedGeneration == got.Generation && st.DesiredNumberScheduled == 1 && st.UpdatedNumberScheduled == 1 && st.NumberReady == 1,
			fmt.Sprintf("observedGeneration %d/%d desired %d updated %d ready %d",
				st.ObservedGeneration, got.Generation, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady), nil
	})

	samePods := func(ctx context.Context) (bool, error) {
		pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app in (web,db,agent)"})
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

	// Shoal manages them from here: one more pod each, at the same
	// revision.
	updateObject[*v1beta1.CloneSet](ctx, t, f.Shoal.AppsV1beta1().CloneSets(f.Namespace), cs.Name, func(c *v1beta1.CloneSet) {
		c.Spec.Replicas = ptr.To[int32](3)
	})
	updateObject[*v1beta1.StatefulSet](ctx, t, f.Shoal.AppsV1beta1().StatefulSets(f.Namespace), set.Name, func(s *v1beta1.StatefulSet) {
		s.Spec.Replicas = ptr.To[int32](3)
	})
	for app, rev := range map[string]string{"web": csRev.Name, "db": setRev.Name} {
		pods, err := f.WaitForPodsReady(ctx, f.Namespace, "app="+app, 3, 2*time.Minute)
		require.NoError(t, err)
		for _, p := range pods {
			require.Equal(t, rev, p.Labels[wellknown.LabelControllerRevisionHash], "pod %s", p.Name)
			if uid, ok := uids[p.Name]; ok {
				require.Equal(t, uid, p.UID, "pod %s kept", p.Name)
			}
		}
	}
}
