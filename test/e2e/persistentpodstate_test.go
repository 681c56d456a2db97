//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The PersistentPodState tests port OpenKruise's "PersistentPodState
// functionality" case "statefulset node topology"
// (test/e2e/apps/persistent_pod_state.go): pods of an Advanced
// StatefulSet (3 replicas) and of an upstream one (2) are recorded with
// their node's topology labels, and a pod deleted, recreated by a rolling
// update or scaled away comes back on its node with the injected node
// selector (or is forgotten); the auto-generate annotations create,
// update and delete the PersistentPodState. Bounds are 2 minutes per
// step, and every wait polls.

const (
	// ppsTimeout bounds one PersistentPodState step.
	ppsTimeout = 2 * time.Minute
	// ppsHostname and ppsZone are the node labels recorded (every node of
	// the local cluster has both).
	ppsHostname = corev1.LabelHostname
	ppsZone     = corev1.LabelTopologyZone
	// ppsAnnotation is the pod annotation a test persists.
	ppsAnnotation = "e2e.shoal.io/persisted"
)

// ppsTemplate is a pod template of testservers (HTTP readiness on
// /healthz) labelled app=<name>, with a one-second grace period.
func ppsTemplate(f *framework.Framework, name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}

// ppsAdvancedSet is an Advanced StatefulSet of replicas ppsTemplate pods.
func ppsAdvancedSet(f *framework.Framework, name string, replicas int32) *v1beta1.StatefulSet {
	return &v1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}},
		Spec: v1beta1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: ppsTemplate(f, name),
		},
	}
}

// newPPS is a PersistentPodState of the test namespace targeting the
// StatefulSet name at apiVersion.
func newPPS(name, apiVersion, target string) *v1alpha1.PersistentPodState {
	return &v1alpha1.PersistentPodState{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PersistentPodStateSpec{
			TargetReference: v1alpha1.TargetReference{APIVersion: apiVersion, Kind: "StatefulSet", Name: target},
		},
	}
}

// ppsPods lists the non-terminating pods labelled app=<name>, by name.
func ppsPods(ctx context.Context, f *framework.Framework, name string) ([]corev1.Pod, error) {
	list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ppsDescribePods summarises pods for failure messages.
func ppsDescribePods(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		parts = append(parts, fmt.Sprintf("%s(%s on %q, ready %v, uid %s)", p.Name, p.Status.Phase, p.Spec.NodeName, framework.IsPodReady(&p), p.UID))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// ppsWaitPods waits until the StatefulSet name has exactly the pods names,
// all Running and Ready, and done (nil: anything) accepts them.
func ppsWaitPods(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, names []string, done func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var last []corev1.Pod
	err := framework.WaitFor(ctx, ppsTimeout, func(ctx context.Context) (bool, error) {
		pods, err := ppsPods(ctx, f, name)
		if err != nil {
			return false, err
		}
		last = pods
		var have []string
		for i := range pods {
			if pods[i].Status.Phase != corev1.PodRunning || !framework.IsPodReady(&pods[i]) {
				return false, nil
			}
			have = append(have, pods[i].Name)
		}
		return slices.Equal(have, names) && (done == nil || done(pods)), nil
	})
	require.NoError(t, err, "StatefulSet %s: %s; pods: %s", name, what, ppsDescribePods(last))
	return last
}

// ppsGet polls the PersistentPodState name until done accepts it (a
// missing object is passed as nil).
func ppsGet(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, done func(*v1alpha1.PersistentPodState) bool) *v1alpha1.PersistentPodState {
	t.Helper()
	var last *v1alpha1.PersistentPodState
	err := framework.WaitFor(ctx, ppsTimeout, func(ctx context.Context) (bool, error) {
		pps, err := f.Shoal.AppsV1alpha1().PersistentPodStates(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			pps = nil
		case err != nil:
			return false, err
		}
		last = pps
		return done(pps), nil
	})
	var seen any = "not found"
	if last != nil {
		seen = fmt.Sprintf("spec %+v, owners %v, status %+v", last.Spec, last.OwnerReferences, last.Status)
	}
	require.NoError(t, err, "PersistentPodState %s: %s; last seen: %s", name, what, seen)
	return last
}

// ppsNodeLabels returns each node's labels by name.
func ppsNodeLabels(ctx context.Context, t *testing.T, f *framework.Framework) map[string]map[string]string {
	t.Helper()
	nodes, err := f.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels
	}
	return out
}

// ppsRecordsMatch reports whether pps records exactly the pods, each with
// its node and that node's values of keys (and, if set, the annotation
// values of annotations by pod name), and has observed its generation.
func ppsRecordsMatch(pps *v1alpha1.PersistentPodState, pods []corev1.Pod, nodeLabels map[string]map[string]string, keys []string, annotations map[string]map[string]string) bool {
	if pps == nil || pps.Status.ObservedGeneration != pps.Generation || len(pps.Status.PodStates) != len(pods) {
		return false
	}
	for _, p := range pods {
		st, ok := pps.Status.PodStates[p.Name]
		if !ok || st.NodeName != p.Spec.NodeName {
			return false
		}
		want := map[string]string{}
		for _, k := range keys {
			if v, ok := nodeLabels[p.Spec.NodeName][k]; ok {
				want[k] = v
			}
		}
		if !maps.Equal(st.NodeTopologyLabels, want) {
			return false
		}
		if a, ok := annotations[p.Name]; ok && !maps.Equal(st.Annotations, a) {
			return false
		}
	}
	return true
}

// ppsRecreate deletes the pod name and waits until the StatefulSet has
// created it again (another UID) and it is Ready; it returns the new pod.
func ppsRecreate(ctx context.Context, t *testing.T, f *framework.Framework, set, name string) *corev1.Pod {
	t.Helper()
	old, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, name, metav1.DeleteOptions{}))
	var last *corev1.Pod
	err = framework.WaitFor(ctx, ppsTimeout, func(ctx context.Context) (bool, error) {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = p
		return p.UID != old.UID && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && framework.IsPodReady(p), nil
	})
	seen := "none"
	if last != nil {
		seen = ppsDescribePods([]corev1.Pod{*last})
	}
	require.NoError(t, err, "StatefulSet %s: pod %s recreated and Ready; last seen %s", set, name, seen)
	return last
}

// requireInjected checks that pod carries what pps recorded for it: it
// runs on the recorded node, its nodeSelector has the recorded value of
// each required key, it has one preferred node affinity term per
// preferred term of pps (its weight, the recorded values), the persisted
// annotations, and the annotation naming pps.
func requireInjected(t *testing.T, pod *corev1.Pod, pps *v1alpha1.PersistentPodState, st v1alpha1.PodState) {
	t.Helper()
	require.Equal(t, st.NodeName, pod.Spec.NodeName, "pod %s runs where it was recorded", pod.Name)
	require.Equal(t, pps.Name, pod.Annotations[wellknown.AnnotationInjectedPersistentPodState], "pod %s names its PersistentPodState", pod.Name)
	if req := pps.Spec.RequiredPersistentTopology; req != nil {
		for _, k := range req.NodeTopologyKeys {
			require.Equal(t, st.NodeTopologyLabels[k], pod.Spec.NodeSelector[k], "pod %s: nodeSelector %s", pod.Name, k)
		}
	}
	for _, term := range pps.Spec.PreferredPersistentTopology {
		want := corev1.PreferredSchedulingTerm{Weight: term.Weight}
		for _, k := range term.Preference.NodeTopologyKeys {
			want.Preference.MatchExpressions = append(want.Preference.MatchExpressions,
				corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{st.NodeTopologyLabels[k]}})
		}
		require.NotNil(t, pod.Spec.Affinity, "pod %s: affinity", pod.Name)
		require.NotNil(t, pod.Spec.Affinity.NodeAffinity, "pod %s: node affinity", pod.Name)
		require.Contains(t, pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, want, "pod %s: preferred term", pod.Name)
	}
	for k, v := range st.Annotations {
		require.Equal(t, v, pod.Annotations[k], "pod %s: persisted annotation %s", pod.Name, k)
	}
}

// TestPersistentPodStateAdvancedStatefulSet: OpenKruise's "statefulset
// node topology" on an Advanced StatefulSet of 3 replicas with a
// PersistentPodState (required kubernetes.io/hostname, one persisted
// annotation) made by hand: the 3 pods are recorded on their nodes; an
// annotation put on a pod is recorded; that pod deleted comes back on its
// node with the nodeSelector, the annotation and
// kruise.io/injected-persistent-pod-state; a template change recreates
// every pod on its node and leaves the records as they were; scaled down
// to 1, only web-0's record stays; a second PersistentPodState for the
// same StatefulSet is refused; deleting the StatefulSet clears the
// records.
func TestPersistentPodStateAdvancedStatefulSet(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	requireSchedulableNodes(ctx, t, f, 2)
	nodeLabels := ppsNodeLabels(ctx, t, f)
	const name = "web"
	keys := []string{ppsHostname}

	pps := newPPS("web-state", "apps.kruise.io/v1beta1", name)
	pps.Spec.RequiredPersistentTopology = &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: keys}
	pps.Spec.PersistentPodAnnotations = []v1alpha1.PersistentPodAnnotation{{Key: ppsAnnotation}}
	_, err := f.Shoal.AppsV1alpha1().PersistentPodStates(f.Namespace).Create(ctx, pps, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Create(ctx, ppsAdvancedSet(f, name, 3), metav1.CreateOptions{})
	require.NoError(t, err)

	all := []string{"web-0", "web-1", "web-2"}
	pods := ppsWaitPods(ctx, t, f, name, "3 pods ready", all, nil)
	_ = ppsGet(ctx, t, f, pps.Name, "records the 3 pods on their nodes", func(p *v1alpha1.PersistentPodState) bool {
		return ppsRecordsMatch(p, pods, nodeLabels, keys, nil)
	})

	// An annotation put on web-2 is recorded.
	_, err = f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, "web-2", types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"10.1.2.3"}}}`, ppsAnnotation), metav1.PatchOptions{})
	require.NoError(t, err)
	recorded := ppsGet(ctx, t, f, pps.Name, "records web-2's annotation", func(p *v1alpha1.PersistentPodState) bool {
		return ppsRecordsMatch(p, pods, nodeLabels, keys, map[string]map[string]string{"web-2": {ppsAnnotation: "10.1.2.3"}})
	})

	// Deleted, web-2 comes back where it was, with the annotation.
	pod := ppsRecreate(ctx, t, f, name, "web-2")
	requireInjected(t, pod, recorded, recorded.Status.PodStates["web-2"])

	// A template change recreates every pod (podUpdatePolicy ReCreate):
	// each comes back on its node, and the records stay as they were.
	before := map[string]types.UID{}
	for _, p := range ppsWaitPods(ctx, t, f, name, "3 pods ready", all, nil) {
		before[p.Name] = p.UID
	}
	updateObject(ctx, t, f.Shoal.AppsV1beta1().StatefulSets(f.Namespace), name, func(s *v1beta1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Env = append(s.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "ROUND", Value: "2"})
	})
	pods = ppsWaitPods(ctx, t, f, name, "every pod recreated by the update", all, func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.UID == before[p.Name] {
				return false
			}
		}
		return true
	})
	after := ppsGet(ctx, t, f, pps.Name, "records the recreated pods", func(p *v1alpha1.PersistentPodState) bool {
		return ppsRecordsMatch(p, pods, nodeLabels, keys, nil)
	})
	require.Equal(t, recorded.Status.PodStates, after.Status.PodStates, "the records are as before the update")
	for i := range pods {
		requireInjected(t, &pods[i], after, after.Status.PodStates[pods[i].Name])
	}

	// Scaled down to 1: the records of web-1 and web-2 go, web-0's stays.
	updateObject(ctx, t, f.Shoal.AppsV1beta1().StatefulSets(f.Namespace), name, func(s *v1beta1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	pods = ppsWaitPods(ctx, t, f, name, "scaled down to web-0", []string{"web-0"}, nil)
	_ = ppsGet(ctx, t, f, pps.Name, "keeps web-0's record only", func(p *v1alpha1.PersistentPodState) bool {
		return ppsRecordsMatch(p, pods, nodeLabels, keys, nil) && p.Status.PodStates["web-0"].NodeName == after.Status.PodStates["web-0"].NodeName
	})

	// A second PersistentPodState for the same StatefulSet (another
	// version of its group) is refused by the webhook.
	other := newPPS("web-other", "apps.kruise.io/v1alpha1", name)
	other.Spec.RequiredPersistentTopology = &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsZone}}
	_, err = f.Shoal.AppsV1alpha1().PersistentPodStates(f.Namespace).Create(ctx, other, metav1.CreateOptions{})
	require.Error(t, err)
	require.Contains(t, err.Error(), "already the target of PersistentPodState web-state")

	// The StatefulSet deleted: the records are cleared (the object, made
	// by hand, stays).
	require.NoError(t, f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Delete(ctx, name, metav1.DeleteOptions{}))
	_ = ppsGet(ctx, t, f, pps.Name, "records cleared", func(p *v1alpha1.PersistentPodState) bool {
		return p != nil && len(p.Status.PodStates) == 0
	})
}

// TestPersistentPodStateUpstreamStatefulSet: the same with an apps/v1
// StatefulSet of 2 replicas and a PersistentPodState with required
// kubernetes.io/hostname and a preferred topology.kubernetes.io/zone term
// (weight 50): a deleted pod comes back on its node with the nodeSelector
// and the preferred node affinity term; deleting the StatefulSet clears
// the records.
func TestPersistentPodStateUpstreamStatefulSet(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	requireSchedulableNodes(ctx, t, f, 2)
	nodeLabels := ppsNodeLabels(ctx, t, f)
	const name = "db"
	keys := []string{ppsHostname, ppsZone}

	pps := newPPS("db-state", "apps/v1", name)
	pps.Spec.RequiredPersistentTopology = &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsHostname}}
	pps.Spec.PreferredPersistentTopology = []v1alpha1.PreferredTopologyTerm{{Weight: 50, Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsZone}}}}
	_, err := f.Shoal.AppsV1alpha1().PersistentPodStates(f.Namespace).Create(ctx, pps, metav1.CreateOptions{})
	require.NoError(t, err)
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: ppsTemplate(f, name),
		},
	}
	_, err = f.Kube.AppsV1().StatefulSets(f.Namespace).Create(ctx, set, metav1.CreateOptions{})
	require.NoError(t, err)

	all := []string{"db-0", "db-1"}
	pods := ppsWaitPods(ctx, t, f, name, "2 pods ready", all, nil)
	recorded := ppsGet(ctx, t, f, pps.Name, "records the 2 pods on their nodes", func(p *v1alpha1.PersistentPodState) bool {
		return ppsRecordsMatch(p, pods, nodeLabels, keys, nil)
	})

	pod := ppsRecreate(ctx, t, f, name, "db-0")
	requireInjected(t, pod, recorded, recorded.Status.PodStates["db-0"])
	require.Len(t, pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)

	require.NoError(t, f.Kube.AppsV1().StatefulSets(f.Namespace).Delete(ctx, name, metav1.DeleteOptions{}))
	_ = ppsGet(ctx, t, f, pps.Name, "records cleared", func(p *v1alpha1.PersistentPodState) bool {
		return p != nil && len(p.Status.PodStates) == 0
	})
}

// TestPersistentPodStateAutoGenerate: OpenKruise's auto-generate
// annotations on an Advanced StatefulSet of 2 replicas (required
// kubernetes.io/hostname, preferred topology.kubernetes.io/zone, one
// persisted annotation): a PersistentPodState of the StatefulSet's name,
// controlled by it, with the preferred term at weight 100, records both
// pods; a deleted pod comes back on its node; removing the auto-generate
// annotation deletes it and adding it back creates it again with the same
// records; removing the required annotation leaves the zone alone in the
// spec and the records; deleting the StatefulSet deletes it.
func TestPersistentPodStateAutoGenerate(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	requireSchedulableNodes(ctx, t, f, 2)
	nodeLabels := ppsNodeLabels(ctx, t, f)
	const name = "gen"
	sets := f.Shoal.AppsV1beta1().StatefulSets(f.Namespace)

	set := ppsAdvancedSet(f, name, 2)
	set.Annotations[wellknown.AnnotationAutoGeneratePersistentPodState] = "true"
	set.Annotations[wellknown.AnnotationRequiredPersistentTopology] = ppsHostname
	set.Annotations[wellknown.AnnotationPreferredPersistentTopology] = ppsZone
	set.Annotations[wellknown.AnnotationPersistentPodAnnotations] = ppsAnnotation
	created, err := sets.Create(ctx, set, metav1.CreateOptions{})
	require.NoError(t, err)

	all := []string{"gen-0", "gen-1"}
	pods := ppsWaitPods(ctx, t, f, name, "2 pods ready", all, nil)
	keys := []string{ppsHostname, ppsZone}
	pps := ppsGet(ctx, t, f, name, "generated, recording both pods", func(p *v1alpha1.PersistentPodState) bool {
		return ppsRecordsMatch(p, pods, nodeLabels, keys, nil)
	})
	require.True(t, metav1.IsControlledBy(pps, created), "controlled by the StatefulSet: %v", pps.OwnerReferences)
	require.Equal(t, v1alpha1.PersistentPodStateSpec{
		TargetReference:             v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: name},
		RequiredPersistentTopology:  &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsHostname}},
		PreferredPersistentTopology: []v1alpha1.PreferredTopologyTerm{{Weight: 100, Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsZone}}}},
		PersistentPodAnnotations:    []v1alpha1.PersistentPodAnnotation{{Key: ppsAnnotation}},
	}, pps.Spec)

	pod := ppsRecreate(ctx, t, f, name, "gen-1")
	requireInjected(t, pod, pps, pps.Status.PodStates["gen-1"])
	records := pps.Status.PodStates

	// The auto-generate annotation removed: the PersistentPodState goes.
	updateObject(ctx, t, sets, name, func(s *v1beta1.StatefulSet) {
		delete(s.Annotations, wellknown.AnnotationAutoGeneratePersistentPodState)
	})
	_ = ppsGet(ctx, t, f, name, "deleted", func(p *v1alpha1.PersistentPodState) bool { return p == nil })

	// Back: generated again, with the same records.
	updateObject(ctx, t, sets, name, func(s *v1beta1.StatefulSet) {
		s.Annotations[wellknown.AnnotationAutoGeneratePersistentPodState] = "true"
	})
	pods = ppsWaitPods(ctx, t, f, name, "2 pods ready", all, nil)
	pps = ppsGet(ctx, t, f, name, "generated again", func(p *v1alpha1.PersistentPodState) bool {
		return ppsRecordsMatch(p, pods, nodeLabels, keys, nil)
	})
	require.Equal(t, records, pps.Status.PodStates)

	// The required annotation removed: the spec keeps the preferred zone
	// only, and the records the zone only.
	updateObject(ctx, t, sets, name, func(s *v1beta1.StatefulSet) {
		delete(s.Annotations, wellknown.AnnotationRequiredPersistentTopology)
	})
	pps = ppsGet(ctx, t, f, name, "the zone alone", func(p *v1alpha1.PersistentPodState) bool {
		return p != nil && p.Spec.RequiredPersistentTopology == nil && ppsRecordsMatch(p, pods, nodeLabels, []string{ppsZone}, nil)
	})
	require.Len(t, pps.Spec.PreferredPersistentTopology, 1)

	// The StatefulSet deleted: the generated PersistentPodState goes.
	require.NoError(t, sets.Delete(ctx, name, metav1.DeleteOptions{}))
	_ = ppsGet(ctx, t, f, name, "deleted with the StatefulSet", func(p *v1alpha1.PersistentPodState) bool { return p == nil })
}

// ppsLegacyZone is the deprecated zone key seed 000's examples name; the
// local cluster's nodes carry it beside topology.kubernetes.io/zone.
const ppsLegacyZone = corev1.LabelFailureDomainBetaZone

// TestPersistentPodStateSeed applies seed 000's two PersistentPodState
// examples as the dry run does (../testdata/seed-examples/000-8.yaml and
// 000-9.yaml; INDEX.md lists the reconstruction: indentation, and the
// "[,other node labels]" placeholder dropped), in the test's namespace
// instead of "echoserver":
//   - 000-8, a PersistentPodState (required zone, preferred hostname at
//     weight 100) for an Advanced StatefulSet echoserver of 2 testserver
//     pods, which the seed does not show;
//   - 000-9, an Advanced StatefulSet at apps.kruise.io/v1alpha1 with the
//     auto-generate annotations, its cilium/echoserver image replaced by
//     the local registry's HTTP test server.
//
// Each records its pods' zone and node; a deleted pod comes back on its
// node, with the zone as nodeSelector and the node as a weight-100
// preferred term.
func TestPersistentPodStateSeed(t *testing.T) {
	t.Parallel()
	keys := []string{ppsLegacyZone, ppsHostname}

	t.Run("000-8 PersistentPodState for an Advanced StatefulSet", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		requireSchedulableNodes(ctx, t, f, 2)
		nodeLabels := ppsNodeLabels(ctx, t, f)

		var pps v1alpha1.PersistentPodState
		readSeedExample(t, f, "000-8.yaml", &pps)
		pps.Namespace = f.Namespace
		_, err := f.Shoal.AppsV1alpha1().PersistentPodStates(f.Namespace).Create(ctx, &pps, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Create(ctx, ppsAdvancedSet(f, pps.Spec.TargetReference.Name, 2), metav1.CreateOptions{})
		require.NoError(t, err)

		pods := ppsWaitPods(ctx, t, f, "echoserver", "2 pods ready", []string{"echoserver-0", "echoserver-1"}, nil)
		recorded := ppsGet(ctx, t, f, pps.Name, "records both pods' zone and node", func(p *v1alpha1.PersistentPodState) bool {
			return ppsRecordsMatch(p, pods, nodeLabels, keys, nil)
		})
		st := recorded.Status.PodStates["echoserver-1"]
		require.NotEmpty(t, st.NodeTopologyLabels[ppsLegacyZone], "the node of echoserver-1 has a %s label", ppsLegacyZone)

		pod := ppsRecreate(ctx, t, f, "echoserver", "echoserver-1")
		requireInjected(t, pod, recorded, st)
		require.Equal(t, map[string]string{ppsLegacyZone: st.NodeTopologyLabels[ppsLegacyZone]}, pod.Spec.NodeSelector, "required: the zone, as nodeSelector")
	})

	t.Run("000-9 auto-generated from the StatefulSet's annotations", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		requireSchedulableNodes(ctx, t, f, 2)
		nodeLabels := ppsNodeLabels(ctx, t, f)

		var set v1alpha1.StatefulSet
		readSeedExample(t, f, "000-9.yaml", &set)
		set.Namespace = f.Namespace
		require.Len(t, set.Spec.Template.Spec.Containers, 1)
		c := &set.Spec.Template.Spec.Containers[0]
		require.Equal(t, "cilium/echoserver:latest", c.Image, "the seed's image")
		app := ppsTemplate(f, set.Name).Spec.Containers[0]
		c.Image, c.Args, c.ReadinessProbe = app.Image, app.Args, app.ReadinessProbe
		set.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		created, err := f.Shoal.AppsV1alpha1().StatefulSets(f.Namespace).Create(ctx, &set, metav1.CreateOptions{})
		require.NoError(t, err)

		// replicas is not set: one pod, as upstream's default.
		pods := ppsWaitPods(ctx, t, f, "echoserver", "1 pod ready", []string{"echoserver-0"}, nil)
		pps := ppsGet(ctx, t, f, set.Name, "generated, recording the pod's zone and node", func(p *v1alpha1.PersistentPodState) bool {
			return ppsRecordsMatch(p, pods, nodeLabels, keys, nil)
		})
		require.True(t, metav1.IsControlledBy(pps, created), "controlled by the StatefulSet: %v", pps.OwnerReferences)
		require.Equal(t, v1alpha1.PersistentPodStateSpec{
			TargetReference:             v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: set.Name},
			RequiredPersistentTopology:  &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsLegacyZone}},
			PreferredPersistentTopology: []v1alpha1.PreferredTopologyTerm{{Weight: 100, Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsHostname}}}},
		}, pps.Spec)

		pod := ppsRecreate(ctx, t, f, "echoserver", "echoserver-0")
		requireInjected(t, pod, pps, pps.Status.PodStates["echoserver-0"])
	})
}

// TestPersistentPodStateV1beta1 ports OpenKruise's v1beta1
// PersistentPodState suite, read and written through
// apps.kruise.io/v1beta1 (whose NodeTopologyTerm says keys where v1alpha1
// says nodeTopologyKeys).
func TestPersistentPodStateV1beta1(t *testing.T) {
	t.Parallel()
	osKey := corev1.LabelOSStable

	// OpenKruise: "statefulset node topology with v1beta1 storage". A 5-pod
	// apps/v1 StatefulSet with the auto-generate annotations (required
	// kubernetes.io/os, preferred kubernetes.io/hostname): the generated
	// PersistentPodState, read at v1beta1, has those keys and records the
	// 5 pods with both labels; an image update keeps 5 records and the
	// recreated pods carry kruise.io/injected-persistent-pod-state; a
	// scale to 1 keeps 1; a second PersistentPodState for the set is
	// refused; the set's deletion takes the generated one with it.
	// OpenKruise also asks for the injected annotation on the pods of the
	// first rollout, which its webhook (like Shoal's) only puts on pods
	// created again with a record; it is checked on those here.
	t.Run("statefulset node topology with v1beta1 storage", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		requireSchedulableNodes(ctx, t, f, 2)
		const name = "statefulset"
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
				wellknown.AnnotationAutoGeneratePersistentPodState: "true",
				wellknown.AnnotationRequiredPersistentTopology:     osKey,
				wellknown.AnnotationPreferredPersistentTopology:    ppsHostname,
			}},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](5), ServiceName: name,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: ppsTemplate(f, name),
			},
		}
		_, err := f.Kube.AppsV1().StatefulSets(f.Namespace).Create(ctx, set, metav1.CreateOptions{})
		require.NoError(t, err)
		all := []string{name + "-0", name + "-1", name + "-2", name + "-3", name + "-4"}
		pods := ppsWaitPods(ctx, t, f, name, "5 pods ready", all, nil)

		betaPPS := f.Shoal.AppsV1beta1().PersistentPodStates(f.Namespace)
		recorded := func(what string, n int) *v1beta1.PersistentPodState {
			t.Helper()
			return waitObject(ctx, t, betaPPS, ppsTimeout, name, what, func(p *v1beta1.PersistentPodState) bool {
				if len(p.Status.PodStates) != n {
					return false
				}
				for _, st := range p.Status.PodStates {
					if len(st.NodeTopologyLabels) != 2 {
						return false
					}
				}
				return true
			}, func(p *v1beta1.PersistentPodState) any { return p.Status })
		}
		pps := recorded("the 5 pods recorded with 2 node labels each", len(pods))
		require.NotNil(t, pps.Spec.RequiredPersistentTopology)
		require.Contains(t, pps.Spec.RequiredPersistentTopology.Keys, osKey)
		require.Len(t, pps.Spec.PreferredPersistentTopology, 1)
		require.Contains(t, pps.Spec.PreferredPersistentTopology[0].Preference.Keys, ppsHostname)
		for _, p := range pods {
			require.Contains(t, pps.Status.PodStates, p.Name)
		}

		before := map[string]types.UID{}
		for _, p := range pods {
			before[p.Name] = p.UID
		}
		updateObject(ctx, t, f.Kube.AppsV1().StatefulSets(f.Namespace), name, func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2")
		})
		pods = ppsWaitPods(ctx, t, f, name, "every pod recreated at the new image", all, func(pods []corev1.Pod) bool {
			for _, p := range pods {
				if p.UID == before[p.Name] {
					return false
				}
			}
			return true
		})
		pps = recorded("still 5 records", 5)
		for _, p := range pods {
			require.Equal(t, pps.Name, p.Annotations[wellknown.AnnotationInjectedPersistentPodState], "pod %s", p.Name)
		}

		updateObject(ctx, t, f.Kube.AppsV1().StatefulSets(f.Namespace), name, func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
		ppsWaitPods(ctx, t, f, name, "scaled to 1", []string{name + "-0"}, nil)
		recorded("1 record after the scale to 1", 1)

		_, err = betaPPS.Create(ctx, &v1beta1.PersistentPodState{
			ObjectMeta: metav1.ObjectMeta{Name: "pps-test"},
			Spec: v1beta1.PersistentPodStateSpec{
				TargetReference:             v1beta1.TargetReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name},
				RequiredPersistentTopology:  &v1beta1.NodeTopologyTerm{Keys: []string{ppsHostname}},
				PreferredPersistentTopology: []v1beta1.PreferredTopologyTerm{{Weight: 100, Preference: v1beta1.NodeTopologyTerm{Keys: []string{osKey}}}},
			},
		}, metav1.CreateOptions{})
		require.Error(t, err, "a second PersistentPodState for the same StatefulSet is refused")

		require.NoError(t, f.Kube.AppsV1().StatefulSets(f.Namespace).Delete(ctx, name, metav1.DeleteOptions{}))
		err = framework.WaitFor(ctx, ppsTimeout, func(ctx context.Context) (bool, error) {
			_, err := betaPPS.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "the generated PersistentPodState goes with its StatefulSet")
	})

	// OpenKruise: "cross-version: v1alpha1 nodeTopologyKeys converts to
	// v1beta1 keys": made at v1alpha1 with nodeTopologyKeys, read at
	// v1beta1 as keys; keys written at v1beta1 read back at v1alpha1 in
	// the same order.
	t.Run("cross-version: v1alpha1 nodeTopologyKeys converts to v1beta1 keys", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		const set = "pps-cross-version-sts"
		_, err := f.Kube.AppsV1().StatefulSets(f.Namespace).Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: set},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](1), ServiceName: set,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": set}},
				Template: ppsTemplate(f, set),
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		ppsWaitPods(ctx, t, f, set, "1 pod ready", []string{set + "-0"}, nil)

		pps := newPPS("pps-cross-version", "apps/v1", set)
		pps.Spec.RequiredPersistentTopology = &v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{ppsHostname}}
		pps.Spec.PreferredPersistentTopology = []v1alpha1.PreferredTopologyTerm{{Weight: 100, Preference: v1alpha1.NodeTopologyTerm{NodeTopologyKeys: []string{osKey}}}}
		_, err = f.Shoal.AppsV1alpha1().PersistentPodStates(f.Namespace).Create(ctx, pps, metav1.CreateOptions{})
		require.NoError(t, err)

		betaPPS := f.Shoal.AppsV1beta1().PersistentPodStates(f.Namespace)
		beta, err := betaPPS.Get(ctx, pps.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, beta.Spec.RequiredPersistentTopology)
		require.Equal(t, []string{ppsHostname}, beta.Spec.RequiredPersistentTopology.Keys)
		require.Len(t, beta.Spec.PreferredPersistentTopology, 1)
		require.Equal(t, []string{osKey}, beta.Spec.PreferredPersistentTopology[0].Preference.Keys)

		updateObject(ctx, t, betaPPS, pps.Name, func(p *v1beta1.PersistentPodState) {
			p.Spec.RequiredPersistentTopology.Keys = []string{osKey, ppsHostname}
		})
		alpha, err := f.Shoal.AppsV1alpha1().PersistentPodStates(f.Namespace).Get(ctx, pps.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, []string{osKey, ppsHostname}, alpha.Spec.RequiredPersistentTopology.NodeTopologyKeys, "the v1beta1 keys, in order")
		require.NoError(t, betaPPS.Delete(ctx, pps.Name, metav1.DeleteOptions{}))
	})
}
