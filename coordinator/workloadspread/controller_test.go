package workloadspread

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/webhook"
	"github.com/shoal-io/shoal/coordinator/workloadspread/spread"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
)

// The controller serves the pod webhook's lookups.
var _ webhook.WorkloadSpreadLookup = (*Controller)(nil)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func zone(z string) *corev1.NodeSelectorTerm {
	return &corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{z}}}}
}

func rsPod(name, subset, node string, created time.Time) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created),
			Labels:          map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-uid", Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if subset != "" {
		p.Annotations = map[string]string{wellknown.AnnotationMatchedWorkloadSpread: spread.Injection{Name: "ws", Subset: subset}.Annotation()}
	}
	return p
}

type harness struct {
	c     *Controller
	kube  *kubefake.Clientset
	shoal *shoalfake.Clientset
}

func start(t *testing.T, kubeObjs []any, ws *v1alpha1.WorkloadSpread) *harness {
	t.Helper()
	h := &harness{kube: kubefake.NewClientset(), shoal: shoalfake.NewSimpleClientset(ws)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, o := range kubeObjs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			_, err = h.kube.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Node:
			_, err = h.kube.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = h.kube.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.ReplicaSet:
			_, err = h.kube.AppsV1().ReplicaSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *batchv1.Job:
			_, err = h.kube.BatchV1().Jobs(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		require.NoError(t, err)
	}
	kf := kubeinformers.NewSharedInformerFactory(h.kube, 0)
	sf := shoalinformers.NewSharedInformerFactory(h.shoal, 0)
	c, err := New(Options{
		Shoal: h.shoal, Kube: h.kube,
		WorkloadSpreads: sf.Apps().V1alpha1().WorkloadSpreads().Informer(), Pods: kf.Core().V1().Pods().Informer(),
		Nodes: kf.Core().V1().Nodes().Informer(), ReplicaSets: kf.Apps().V1().ReplicaSets().Informer(),
		Deployments: kf.Apps().V1().Deployments().Informer(), StatefulSets: kf.Apps().V1().StatefulSets().Informer(),
		Jobs: kf.Batch().V1().Jobs().Informer(), CloneSets: sf.Apps().V1beta1().CloneSets().Informer(),
		AdvancedStatefulSets: sf.Apps().V1beta1().StatefulSets().Informer(),
		IsLeader:             func() bool { return true }, Recorder: events.NewFakeRecorder(100), Clock: clocktesting.NewFakeClock(t0),
	})
	require.NoError(t, err)
	h.c = c
	kf.Start(ctx.Done())
	sf.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.HasSynced))
	go func() { _ = c.Run(ctx) }()
	return h
}

func (h *harness) ws(t *testing.T) *v1alpha1.WorkloadSpread {
	ws, err := h.shoal.AppsV1alpha1().WorkloadSpreads("ns").Get(context.Background(), "ws", metav1.GetOptions{})
	require.NoError(t, err)
	return ws
}

func (h *harness) pod(t *testing.T, name string) *corev1.Pod {
	p, err := h.kube.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func TestControllerDeployment(t *testing.T) {
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "deploy-uid"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4)}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deploy-uid", Controller: ptr.To(true)}}}}
	nodes := []any{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "z1"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"zone": "z2"}}},
	}
	ws := &v1alpha1.WorkloadSpread{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "ns", Generation: 2},
		Spec: v1alpha1.WorkloadSpreadSpec{
			TargetReference: &v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Subsets: []v1alpha1.WorkloadSpreadSubset{
				{Name: "a", RequiredNodeSelectorTerm: zone("z1"), MaxReplicas: ptr.To(intstr.FromString("50%"))},
				{Name: "b", RequiredNodeSelectorTerm: zone("z2")},
			},
		},
		Status: v1alpha1.WorkloadSpreadStatus{SubsetStatuses: []v1alpha1.WorkloadSpreadSubsetStatus{{Name: "a", MissingReplicas: 0,
			CreatingPods: map[string]metav1.Time{"a-1": metav1.NewTime(t0), "ghost": metav1.NewTime(t0.Add(-time.Minute))}}}},
	}
	objs := append([]any{deploy, rs,
		rsPod("a-1", "a", "n1", t0.Add(-time.Hour)),
		rsPod("a-2", "a", "n1", t0.Add(-time.Minute)),
		rsPod("old", "", "n1", t0.Add(-2*time.Hour)), // created before the WorkloadSpread: zone z1, so a
		rsPod("b-1", "b", "n2", t0.Add(-time.Hour)),
	}, nodes...)
	h := start(t, objs, ws)

	require.Eventually(t, func() bool {
		st := h.ws(t).Status
		return st.ObservedGeneration == 2 && len(st.SubsetStatuses) == 2 && st.SubsetStatuses[0].Replicas == 3
	}, 10*time.Second, 10*time.Millisecond)
	st := h.ws(t).Status
	require.Equal(t, v1alpha1.WorkloadSpreadSubsetStatus{Name: "a", Replicas: 3, MissingReplicas: 0}, st.SubsetStatuses[0],
		"a-1 seen and ghost expired: no creatingPods left")
	require.Equal(t, v1alpha1.WorkloadSpreadSubsetStatus{Name: "b", Replicas: 1, MissingReplicas: -1}, st.SubsetStatuses[1])

	require.Equal(t, `{"name":"ws","subset":"a"}`, h.pod(t, "old").Annotations[wellknown.AnnotationMatchedWorkloadSpread])
	require.Eventually(t, func() bool {
		want := map[string]string{"old": "200", "a-1": "200", "a-2": "-100", "b-1": "100"}
		for name, cost := range want {
			if h.pod(t, name).Annotations[wellknown.AnnotationPodDeletionCost] != cost {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "a keeps its 2 oldest pods; the newest goes first")

	// The lookups the webhook uses.
	got, err := h.c.SpreadFor(context.Background(), rsPod("new", "", "", t0))
	require.NoError(t, err)
	require.Equal(t, "ws", got.Name)
	r, err := h.c.Replicas(context.Background(), got)
	require.NoError(t, err)
	require.Equal(t, int32(4), r)
	other := rsPod("other", "", "", t0)
	other.OwnerReferences[0].Name = "api-1"
	got, err = h.c.SpreadFor(context.Background(), other)
	require.NoError(t, err)
	require.Nil(t, got)

	// A rollout's first pod may come before its new ReplicaSet reaches
	// the cache: SpreadFor waits for it.
	next := rsPod("next", "", "", t0)
	next.OwnerReferences[0].Name, next.OwnerReferences[0].UID = "web-2", "rs2-uid"
	found := make(chan *v1alpha1.WorkloadSpread, 1)
	go func() {
		ws, err := h.c.SpreadFor(context.Background(), next)
		assert.NoError(t, err)
		found <- ws
	}()
	rs2 := rs.DeepCopy()
	rs2.Name, rs2.UID, rs2.ResourceVersion = "web-2", "rs2-uid", ""
	_, err = h.kube.AppsV1().ReplicaSets("ns").Create(context.Background(), rs2, metav1.CreateOptions{})
	require.NoError(t, err)
	got = <-found
	require.NotNil(t, got, "the pod of the new ReplicaSet finds the Deployment's WorkloadSpread")
	require.Equal(t, "ws", got.Name)

	// Scaling the Deployment changes a's limit: 50% of 6 is 3.
	deploy.Spec.Replicas = ptr.To[int32](6)
	deploy.Generation = 2
	_, err = h.kube.AppsV1().Deployments("ns").Update(context.Background(), deploy, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return h.pod(t, "a-2").Annotations[wellknown.AnnotationPodDeletionCost] == "200"
	}, 10*time.Second, 10*time.Millisecond)
}

func TestControllerJobTargetFilter(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "job-uid"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](4)}}
	worker := func(name, role string) *corev1.Pod {
		p := rsPod(name, "a", "", t0)
		p.Labels = map[string]string{"role": role}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}}
		return p
	}
	ws := &v1alpha1.WorkloadSpread{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "ns", Generation: 1},
		Spec: v1alpha1.WorkloadSpreadSpec{
			TargetReference: &v1alpha1.TargetReference{APIVersion: "batch/v1", Kind: "Job", Name: "train"},
			TargetFilter:    &v1alpha1.TargetFilter{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}}},
			Subsets:         []v1alpha1.WorkloadSpreadSubset{{Name: "a", MaxReplicas: ptr.To(intstr.FromInt32(3))}, {Name: "b"}},
		},
	}
	h := start(t, []any{job, worker("w-0", "worker"), worker("w-1", "worker"), worker("ps-0", "ps")}, ws)
	require.Eventually(t, func() bool {
		sts := h.ws(t).Status.SubsetStatuses
		return len(sts) == 2 && sts[0].Replicas == 2 && sts[0].MissingReplicas == 1
	}, 10*time.Second, 10*time.Millisecond, "the ps pod is filtered out")
	require.Empty(t, h.pod(t, "w-0").Annotations[wellknown.AnnotationPodDeletionCost], "Jobs do not use deletion costs")
	ws = h.ws(t)
	r, err := h.c.Replicas(context.Background(), ws)
	require.NoError(t, err)
	require.Equal(t, int32(4), r)
}

func TestNestedInt(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{"replicas": int64(3), "subsets": []any{map[string]any{"replicas": int64(2)}}, "s": "x"}}
	for _, tc := range []struct {
		path    string
		want    int64
		wantErr bool
	}{
		{path: "spec.replicas", want: 3}, {path: "spec.subsets.0.replicas", want: 2}, {path: "spec.subsets.5.replicas"},
		{path: "spec.missing"}, {path: "spec.s", wantErr: true},
	} {
		got, err := nestedInt(obj, tc.path)
		require.Equal(t, tc.wantErr, err != nil, tc.path)
		require.Equal(t, tc.want, got, tc.path)
	}
}

func TestControllerAdaptive(t *testing.T) {
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "deploy-uid"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deploy-uid", Controller: ptr.To(true)}}}}
	stuck := rsPod("stuck", "a", "", t0.Add(-time.Minute))
	stuck.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
	ws := &v1alpha1.WorkloadSpread{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "ns", Generation: 1},
		Spec: v1alpha1.WorkloadSpreadSpec{
			TargetReference: &v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Subsets:         []v1alpha1.WorkloadSpreadSubset{{Name: "a", MaxReplicas: ptr.To(intstr.FromInt32(2))}, {Name: "b"}},
			ScheduleStrategy: v1alpha1.WorkloadSpreadScheduleStrategy{Type: v1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType,
				Adaptive: &v1alpha1.AdaptiveWorkloadSpreadStrategy{RescheduleCriticalSeconds: ptr.To[int32](30)}},
		},
	}
	h := start(t, []any{deploy, rs, stuck, rsPod("fine", "a", "n1", t0)}, ws)
	require.Eventually(t, func() bool {
		_, err := h.kube.CoreV1().Pods("ns").Get(context.Background(), "stuck", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 10*time.Second, 10*time.Millisecond, "the unschedulable pod is deleted")
	// The status written, not the one stored: the fake clientset has no
	// resourceVersion conflicts, so a later sync from an informer copy
	// older than that write may overwrite it (the apiserver refuses it).
	require.Eventually(t, func() bool {
		for _, a := range h.shoal.Actions() {
			u, ok := a.(clienttesting.UpdateAction)
			if !ok || u.GetSubresource() != "status" {
				continue
			}
			sts := u.GetObject().(*v1alpha1.WorkloadSpread).Status.SubsetStatuses
			if len(sts) == 2 && spread.Unschedulable(&sts[0]) && !spread.Unschedulable(&sts[1]) {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "subset a is marked unschedulable")
}

// TestControllerVersioned: mid-rollout, a Deployment's pods of two
// revisions are counted per revision in versionedSubsetStatuses, and the
// old revision's pods are costed with the subsets in reverse order.
func TestControllerVersioned(t *testing.T) {
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "deploy-uid"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4)}}
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deploy-uid", Controller: ptr.To(true)}}
	rs := func(name, rev, hash string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), OwnerReferences: owner,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": rev},
			Labels:      map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}}}
	}
	pod := func(name, subset, hash string) *corev1.Pod {
		p := rsPod(name, subset, "n1", t0.Add(-time.Hour))
		p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "web-"+hash, types.UID("web-"+hash)
		return p
	}
	ws := &v1alpha1.WorkloadSpread{
		ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "ns", Generation: 1},
		Spec: v1alpha1.WorkloadSpreadSpec{
			TargetReference: &v1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Subsets:         []v1alpha1.WorkloadSpreadSubset{{Name: "a", MaxReplicas: ptr.To(intstr.FromInt32(2))}, {Name: "b"}},
		},
	}
	h := start(t, []any{deploy, rs("web-old", "1", "old"), rs("web-new", "2", "new"),
		pod("o1", "a", "old"), pod("o2", "a", "old"), pod("o3", "b", "old"), pod("n1", "a", "new"), pod("n2", "b", "new")}, ws)
	require.Eventually(t, func() bool {
		st := h.ws(t).Status
		old, cur := st.VersionedSubsetStatuses["old"], st.VersionedSubsetStatuses["new"]
		return len(st.SubsetStatuses) == 2 && st.SubsetStatuses[0].Replicas == 3 && st.SubsetStatuses[0].MissingReplicas == 0 &&
			len(old) == 2 && old[0].Replicas == 2 && old[0].MissingReplicas == 0 && old[1].Replicas == 1 &&
			len(cur) == 2 && cur[0].Replicas == 1 && cur[0].MissingReplicas == 1 && cur[1].Replicas == 1
	}, 10*time.Second, 10*time.Millisecond, "statuses per revision")
	want := map[string]string{"o1": "100", "o2": "100", "o3": "200", "n1": "200", "n2": "100"}
	require.Eventually(t, func() bool {
		for name, cost := range want {
			if h.pod(t, name).Annotations[wellknown.AnnotationPodDeletionCost] != cost {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "deletion costs %v", want)
}
