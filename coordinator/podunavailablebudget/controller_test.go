package podunavailablebudget

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/syncloop"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
)

// fakeScales serves scales of kind Widget.example.com; other kinds have
// none.
type fakeScales map[string]*autoscalingv1.Scale

func (f fakeScales) Scale(_ context.Context, namespace string, gk schema.GroupKind, name string) (*autoscalingv1.Scale, error) {
	if gk != (schema.GroupKind{Group: "example.com", Kind: "Widget"}) {
		return nil, fmt.Errorf("%w: kind %s", ErrNoScale, gk)
	}
	if s, ok := f[namespace+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "widgets"}, name)
}

// harness is a controller over fake clientsets whose informers are never
// started: the test puts objects into their caches and calls sync itself.
type harness struct {
	c        *Controller
	shoal    *shoalfake.Clientset
	recorder *events.FakeRecorder
	clock    *clocktesting.FakeClock
	leader   bool
	o        Options
}

func newHarness(t *testing.T, scales Scales) *harness {
	t.Helper()
	h := &harness{shoal: shoalfake.NewSimpleClientset(), recorder: events.NewFakeRecorder(100), leader: true, clock: clocktesting.NewFakeClock(t0)}
	kf := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	sf := shoalinformers.NewSharedInformerFactory(h.shoal, 0)
	h.o = Options{
		Shoal: h.shoal, Budgets: sf.Policy().V1alpha1().PodUnavailableBudgets().Informer(),
		Pods: kf.Core().V1().Pods().Informer(), ReplicaSets: kf.Apps().V1().ReplicaSets().Informer(),
		Deployments: kf.Apps().V1().Deployments().Informer(), StatefulSets: kf.Apps().V1().StatefulSets().Informer(),
		CloneSets: sf.Apps().V1beta1().CloneSets().Informer(), AdvancedStatefulSets: sf.Apps().V1beta1().StatefulSets().Informer(),
		Scales: scales, IsLeader: func() bool { return h.leader }, Recorder: h.recorder, Clock: h.clock,
	}
	c, err := New(h.o)
	require.NoError(t, err)
	h.c = c
	return h
}

// cache adds objects to the informer caches (and budgets to the API too,
// so that writes find them).
func (h *harness) cache(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		var inf cache.SharedIndexInformer
		switch o.(type) {
		case *policyv1alpha1.PodUnavailableBudget:
			inf = h.o.Budgets
			require.NoError(t, h.shoal.Tracker().Add(o))
		case *corev1.Pod:
			inf = h.o.Pods
		case *appsv1.ReplicaSet:
			inf = h.o.ReplicaSets
		case *appsv1.Deployment:
			inf = h.o.Deployments
		case *appsv1.StatefulSet:
			inf = h.o.StatefulSets
		case *v1beta1.CloneSet:
			inf = h.o.CloneSets
		case *v1beta1.StatefulSet:
			inf = h.o.AdvancedStatefulSets
		}
		require.NoError(t, inf.GetIndexer().Add(o))
	}
}

// syncStatus syncs the budget pub and returns its status as written.
func (h *harness) syncStatus(t *testing.T) (policyv1alpha1.PodUnavailableBudgetStatus, time.Duration) {
	t.Helper()
	after, err := h.c.sync(context.Background(), "ns/pub")
	require.NoError(t, err)
	got, err := h.shoal.PolicyV1alpha1().PodUnavailableBudgets("ns").Get(context.Background(), "pub", metav1.GetOptions{})
	require.NoError(t, err)
	return got.Status, after
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func controlledBy(apiVersion, kind, name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: k8stypes.UID(name + "-uid"), Controller: ptr.To(true)}}
	}
}

func labelled(k, v string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Labels[k] = v } }

func deployment(name string, replicas int32) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID(name + "-uid")},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name + "-abc", Namespace: "ns", UID: k8stypes.UID(name + "-abc-uid"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}}
	return d, rs
}

func targeting(apiVersion, kind, name string) func(*policyv1alpha1.PodUnavailableBudget) {
	return func(p *policyv1alpha1.PodUnavailableBudget) {
		p.Spec.Selector = nil
		p.Spec.TargetReference = &policyv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: name}
	}
}

func status(allowed, current, desired, total int32) policyv1alpha1.PodUnavailableBudgetStatus {
	return policyv1alpha1.PodUnavailableBudgetStatus{ObservedGeneration: 2, UnavailableAllowed: allowed, CurrentAvailable: current, DesiredAvailable: desired, TotalReplicas: total}
}

func TestSyncTargets(t *testing.T) {
	web, webRS := deployment("web", 3)
	api, apiRS := deployment("api", 2)
	cs := &v1beta1.CloneSet{ObjectMeta: metav1.ObjectMeta{Name: "cs", Namespace: "ns", UID: "cs-uid"}, Spec: v1beta1.CloneSetSpec{Replicas: ptr.To[int32](5)}}
	asts := &v1beta1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "sts", Namespace: "ns", UID: "sts-uid"}, Spec: v1beta1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "sts", Namespace: "ns", UID: "up-sts-uid"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](4)}}
	webPods := []runtime.Object{
		pod("web-1", controlledBy("apps/v1", "ReplicaSet", "web-abc")),
		pod("web-2", controlledBy("apps/v1", "ReplicaSet", "web-abc")),
		pod("web-3", controlledBy("apps/v1", "ReplicaSet", "web-abc"), notReady),
	}
	tests := []struct {
		name string
		pub  *policyv1alpha1.PodUnavailableBudget
		objs []runtime.Object
		want policyv1alpha1.PodUnavailableBudgetStatus
		// events are parts of the events expected, in order.
		events []string
	}{
		{
			name: "a Deployment through its ReplicaSet",
			pub:  budget(targeting("apps/v1", "Deployment", "web")),
			objs: append([]runtime.Object{web, webRS, api, apiRS, pod("api-1", controlledBy("apps/v1", "ReplicaSet", "api-abc"))}, webPods...),
			want: status(0, 2, 2, 3),
		},
		{
			name: "a Deployment being deleted covers nothing",
			pub:  budget(targeting("apps/v1", "Deployment", "web")),
			objs: append([]runtime.Object{func() *appsv1.Deployment {
				d := web.DeepCopy()
				d.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				return d
			}(), webRS}, webPods...),
			want:   status(0, 0, 0, 0),
			events: []string{"NoPods"},
		},
		{
			name:   "a Deployment that does not exist covers nothing",
			pub:    budget(targeting("apps/v1", "Deployment", "web")),
			want:   status(0, 0, 0, 0),
			events: []string{"NoPods"},
		},
		{
			name: "a CloneSet at either version",
			pub:  budget(targeting("apps.kruise.io/v1alpha1", "CloneSet", "cs"), maxUnavailable(intstr.FromString("60%"))),
			objs: []runtime.Object{cs, pod("cs-1", controlledBy("apps.kruise.io/v1beta1", "CloneSet", "cs")), pod("cs-2", controlledBy("apps.kruise.io/v1alpha1", "CloneSet", "cs")),
				pod("cs-3", controlledBy("apps.kruise.io/v1beta1", "CloneSet", "cs")), pod("cs-4", controlledBy("apps.kruise.io/v1beta1", "CloneSet", "cs")),
				pod("cs-5", controlledBy("apps.kruise.io/v1beta1", "CloneSet", "cs"))},
			want: status(3, 5, 2, 5),
		},
		{
			name: "an Advanced StatefulSet, not the upstream one of the same name",
			pub:  budget(targeting("apps.kruise.io/v1beta1", "StatefulSet", "sts")),
			objs: []runtime.Object{asts, sts, pod("sts-0", controlledBy("apps.kruise.io/v1beta1", "StatefulSet", "sts")),
				pod("up-0", controlledBy("apps/v1", "StatefulSet", "sts"))},
			want: status(0, 1, 1, 2),
		},
		{
			name: "an upstream StatefulSet",
			pub:  budget(targeting("apps/v1", "StatefulSet", "sts")),
			objs: []runtime.Object{asts, sts, pod("sts-0", controlledBy("apps.kruise.io/v1beta1", "StatefulSet", "sts")),
				pod("up-0", controlledBy("apps/v1", "StatefulSet", "sts")), pod("up-1", controlledBy("apps/v1", "StatefulSet", "sts"))},
			want: status(0, 2, 3, 4),
		},
		{
			name: "a custom workload through its scale subresource",
			pub:  budget(targeting("example.com/v1", "Widget", "w")),
			objs: []runtime.Object{pod("w-1", controlledBy("example.com/v1", "Widget", "w")), pod("w-2", controlledBy("example.com/v1", "Widget", "w"))},
			want: status(1, 2, 1, 2),
		},
		{
			name:   "a kind without a scale subresource covers nothing, with a warning",
			pub:    budget(targeting("apps/v1", "DaemonSet", "ds")),
			objs:   []runtime.Object{pod("ds-1", controlledBy("apps/v1", "DaemonSet", "ds"))},
			want:   status(0, 0, 0, 0),
			events: []string{"InvalidTarget", "spec.targetRef DaemonSet apps/v1/ds", "subresources.scale", "NoPods"},
		},
		{
			name: "a selector over two Deployments, a bare pod and a DaemonSet pod",
			pub:  budget(maxUnavailable(intstr.FromString("25%"))),
			objs: []runtime.Object{web, webRS, api, apiRS,
				pod("web-1", controlledBy("apps/v1", "ReplicaSet", "web-abc")), pod("web-2", controlledBy("apps/v1", "ReplicaSet", "web-abc")),
				pod("api-1", controlledBy("apps/v1", "ReplicaSet", "api-abc")), pod("bare"),
				pod("ds-1", controlledBy("apps/v1", "DaemonSet", "ds")),
				pod("other", labelled("app", "db"))},
			// 3 + 2 + 1 + 1 = 7; 25% of 7 rounds up to 2.
			want: status(0, 5, 5, 7),
		},
		{
			name: "a selector over a Deployment being scaled down",
			pub:  budget(),
			objs: []runtime.Object{func() *appsv1.Deployment { d := web.DeepCopy(); d.Spec.Replicas = ptr.To[int32](0); return d }(), webRS,
				pod("web-1", controlledBy("apps/v1", "ReplicaSet", "web-abc")), pod("web-2", controlledBy("apps/v1", "ReplicaSet", "web-abc"))},
			want: status(2, 2, 0, 0),
		},
		{
			name: "pub.kruise.io/protect-total-replicas overrides the total",
			pub: budget(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectTotalReplicas: "10"}
			}),
			objs: []runtime.Object{pod("bare")},
			want: status(0, 1, 9, 10),
		},
		{
			name: "an invalid protect-total-replicas is ignored, with a warning",
			pub: budget(func(p *policyv1alpha1.PodUnavailableBudget) {
				p.Annotations = map[string]string{wellknown.AnnotationPubProtectTotalReplicas: "ten"}
			}),
			objs:   []runtime.Object{pod("bare"), pod("bare2")},
			want:   status(1, 2, 1, 2),
			events: []string{"InvalidTarget", "protect-total-replicas"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakeScales{"ns/w": {ObjectMeta: metav1.ObjectMeta{Name: "w", UID: "w-uid"}, Spec: autoscalingv1.ScaleSpec{Replicas: 2}}})
			h.cache(t, append([]runtime.Object{tt.pub}, tt.objs...)...)
			got, after := h.syncStatus(t)
			require.Equal(t, tt.want, got)
			require.Zero(t, after)
			ev := strings.Join(h.events(), "\n")
			pos := 0
			for _, part := range tt.events {
				i := strings.Index(ev[pos:], part)
				require.GreaterOrEqual(t, i, 0, "event %q after offset %d in:\n%s", part, pos, ev)
				pos += i
			}
		})
	}
}

func TestSyncRecords(t *testing.T) {
	h := newHarness(t, nil)
	var freed []string
	h.c.o.OnFreed = func(ns string) { freed = append(freed, ns) }
	pub := budget(func(p *policyv1alpha1.PodUnavailableBudget) {
		p.Status = status(0, 2, 2, 3)
		p.Status.DisruptedPods = map[string]metav1.Time{"a": metav1.NewTime(t0.Add(-30 * time.Second))}
	})
	h.cache(t, pub, pod("a"), pod("b"), pod("c"))
	got, after := h.syncStatus(t)
	want := status(0, 2, 2, 3)
	want.DisruptedPods = pub.Status.DisruptedPods
	require.Equal(t, want, got)
	require.Equal(t, DeletionTimeout-30*time.Second+100*time.Millisecond, after, "recheck when the record expires")
	require.Empty(t, freed)

	// The pod was not deleted in time: the record goes, with an event.
	h.clock.Step(DeletionTimeout)
	stored, err := h.shoal.PolicyV1alpha1().PodUnavailableBudgets("ns").Get(context.Background(), "pub", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, h.o.Budgets.GetIndexer().Update(stored))
	got, after = h.syncStatus(t)
	require.Equal(t, status(1, 3, 2, 3), got)
	require.Zero(t, after)
	ev := h.events()
	require.Contains(t, strings.Join(ev, "\n"), "NotDeleted Pod was expected by PUB ns/pub to be deleted but it wasn't")
	require.Equal(t, []string{"ns"}, freed, "room again: the namespace's workloads are queued")
}

func TestRequeue(t *testing.T) {
	kf := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	inf := kf.Apps().V1().Deployments().Informer()
	l := &workload.Loop{Queue: syncloop.NewQueue("test", nil), Workloads: inf.GetIndexer()}
	a, _ := deployment("a", 1)
	b, _ := deployment("b", 1)
	b.Namespace = "other"
	require.NoError(t, inf.GetIndexer().Add(a))
	require.NoError(t, inf.GetIndexer().Add(b))
	Requeue(l)("ns")
	require.Equal(t, 1, l.Queue.Len())
	k, _ := l.Queue.Get()
	require.Equal(t, "ns/a", k)
}

func TestSyncOnlyLeaderWrites(t *testing.T) {
	h := newHarness(t, nil)
	h.leader = false
	h.cache(t, budget(), pod("a"))
	got, _ := h.syncStatus(t)
	require.Equal(t, policyv1alpha1.PodUnavailableBudgetStatus{}, got)
	h.leader = true
	got, _ = h.syncStatus(t)
	require.Equal(t, status(1, 1, 0, 1), got)
	// Nothing changed: no second write.
	writes := 0
	for _, a := range h.shoal.Actions() {
		if a.GetVerb() == "update" {
			writes++
		}
	}
	stored, err := h.shoal.PolicyV1alpha1().PodUnavailableBudgets("ns").Get(context.Background(), "pub", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, h.o.Budgets.GetIndexer().Update(stored))
	_, _ = h.syncStatus(t)
	after := 0
	for _, a := range h.shoal.Actions() {
		if a.GetVerb() == "update" {
			after++
		}
	}
	require.Equal(t, writes, after)
}

func TestBudgetFor(t *testing.T) {
	web, webRS := deployment("web", 3)
	h := newHarness(t, nil)
	h.cache(t, web, webRS,
		budget(func(p *policyv1alpha1.PodUnavailableBudget) { p.Name = "b-selector" }),
		budget(func(p *policyv1alpha1.PodUnavailableBudget) { p.Name = "a-target" }, targeting("apps/v1", "Deployment", "web")),
		budget(func(p *policyv1alpha1.PodUnavailableBudget) {
			p.Name, p.DeletionTimestamp = "0-deleting", ptr.To(metav1.NewTime(t0))
			p.Finalizers = []string{"x"}
		}),
		budget(func(p *policyv1alpha1.PodUnavailableBudget) {
			p.Name, p.Spec.Selector = "c-empty", &metav1.LabelSelector{}
		}),
		budget(func(p *policyv1alpha1.PodUnavailableBudget) { p.Name, p.Namespace = "elsewhere", "other" }),
	)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"the target wins by name over a selector", pod("web-1", controlledBy("apps/v1", "ReplicaSet", "web-abc")), "a-target"},
		{"a selector", pod("bare"), "b-selector"},
		{"none", pod("db", labelled("app", "db")), ""},
		{"another ReplicaSet's pod", pod("x", labelled("app", "db"), controlledBy("apps/v1", "ReplicaSet", "other")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.c.BudgetFor(tt.pod)
			require.NoError(t, err)
			if tt.want == "" {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			require.Equal(t, tt.want, got.Name)
		})
	}
}

func TestEventHandlersQueue(t *testing.T) {
	web, webRS := deployment("web", 3)
	h := newHarness(t, nil)
	h.cache(t, web, webRS, budget(targeting("apps/v1", "Deployment", "web")),
		budget(func(p *policyv1alpha1.PodUnavailableBudget) { p.Name = "sel" }))
	drain := func() []string {
		var keys []string
		for h.c.Queue.Len() > 0 {
			k, _ := h.c.Queue.Get()
			keys = append(keys, k)
			h.c.Queue.Done(k)
		}
		return keys
	}
	p := pod("web-1", controlledBy("apps/v1", "ReplicaSet", "web-abc"), labelled("app", "other"))
	h.c.podEvent(nil, p)
	require.Equal(t, []string{"ns/pub"}, drain(), "the target's budget only")

	same := p.DeepCopy()
	same.Annotations = map[string]string{"x": "y"}
	h.c.podEvent(p, same)
	require.Empty(t, drain(), "an annotation changes no count")

	unready := p.DeepCopy()
	notReady(unready)
	h.c.podEvent(p, unready)
	require.Equal(t, []string{"ns/pub"}, drain())

	relabelled := p.DeepCopy()
	relabelled.Labels["app"] = "web"
	h.c.podEvent(p, relabelled)
	require.ElementsMatch(t, []string{"ns/pub", "ns/sel"}, drain(), "the selector now covers it too")

	handler := h.c.workloadHandler()
	scaled := web.DeepCopy()
	handler.OnUpdate(web, web.DeepCopy())
	require.Empty(t, drain(), "no change")
	scaled.Spec.Replicas = ptr.To[int32](1)
	handler.OnUpdate(web, scaled)
	require.ElementsMatch(t, []string{"ns/pub", "ns/sel"}, drain(), "a scale changes every total of the namespace")
}
