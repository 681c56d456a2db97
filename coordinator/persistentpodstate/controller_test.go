package persistentpodstate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
)

// harness is a controller over fake clientsets whose informers are never
// started: the test puts objects into their caches and calls the syncs
// itself.
type harness struct {
	c        *Controller
	shoal    *shoalfake.Clientset
	recorder *events.FakeRecorder
	leader   bool
	o        Options
}

func newHarness(t *testing.T, opts ...func(*Options)) *harness {
	t.Helper()
	h := &harness{shoal: shoalfake.NewSimpleClientset(), recorder: events.NewFakeRecorder(100), leader: true}
	kf := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
	sf := shoalinformers.NewSharedInformerFactory(h.shoal, 0)
	h.o = Options{
		Shoal: h.shoal, States: sf.Apps().V1alpha1().PersistentPodStates().Informer(),
		Pods: kf.Core().V1().Pods().Informer(), Nodes: kf.Core().V1().Nodes().Informer(),
		StatefulSets: kf.Apps().V1().StatefulSets().Informer(), AdvancedStatefulSets: sf.Apps().V1beta1().StatefulSets().Informer(),
		IsLeader: func() bool { return h.leader }, Recorder: h.recorder,
	}
	for _, o := range opts {
		o(&h.o)
	}
	c, err := New(h.o)
	require.NoError(t, err)
	h.c = c
	return h
}

// cache adds objects to the informer caches (and PersistentPodStates to
// the API too, so that writes find them).
func (h *harness) cache(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		var inf cache.SharedIndexInformer
		switch o.(type) {
		case *v1alpha1.PersistentPodState:
			inf = h.o.States
			require.NoError(t, h.shoal.Tracker().Add(o))
		case *corev1.Pod:
			inf = h.o.Pods
		case *corev1.Node:
			inf = h.o.Nodes
		case *appsv1.StatefulSet:
			inf = h.o.StatefulSets
		case *v1beta1.StatefulSet:
			inf = h.o.AdvancedStatefulSets
		}
		require.NoError(t, inf.GetIndexer().Add(o))
	}
}

func (h *harness) get(t *testing.T, name string) (*v1alpha1.PersistentPodState, error) {
	t.Helper()
	return h.shoal.AppsV1alpha1().PersistentPodStates("ns").Get(context.Background(), name, metav1.GetOptions{})
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

func advancedSet(replicas int32, annotations map[string]string) *v1beta1.StatefulSet {
	return &v1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "set-uid", Annotations: annotations},
		Spec:       v1beta1.StatefulSetSpec{Replicas: ptr.To(replicas)},
	}
}

func TestSyncRecordsAndDrops(t *testing.T) {
	h := newHarness(t)
	h.cache(t, node("n1", "a"), node("n2", "b"), advancedSet(2, nil),
		pps(map[string]v1alpha1.PodState{"web-5": state("n2", "b", nil)}),
		pod("web-0", "n1", true, func(p *corev1.Pod) { p.Annotations = map[string]string{ipKey: "10.0.0.1"} }),
		pod("web-1", "n2", true),
		// Another set's pod of the same name prefix is not the target's.
		pod("web-2", "n2", true, func(p *corev1.Pod) { p.OwnerReferences[0].UID = "other" }),
	)
	after, err := h.c.sync(context.Background(), "ns/web")
	require.NoError(t, err)
	require.Zero(t, after)
	got, err := h.get(t, "web")
	require.NoError(t, err)
	require.Equal(t, int64(3), got.Status.ObservedGeneration)
	require.Equal(t, map[string]v1alpha1.PodState{
		"web-0": state("n1", "a", map[string]string{ipKey: "10.0.0.1"}),
		"web-1": state("n2", "b", nil),
	}, got.Status.PodStates)
	ev := h.events()
	require.Len(t, ev, 3, "%v", ev)
	require.Contains(t, ev[0], "Recorded")
	require.Contains(t, ev[0], "pod web-0: node n1")
	require.Contains(t, ev[2], "Dropped")
	require.Contains(t, ev[2], "web-5")

	t.Run("a follower writes nothing", func(t *testing.T) {
		h := newHarness(t)
		h.leader = false
		h.cache(t, node("n1", "a"), advancedSet(1, nil), pps(nil), pod("web-0", "n1", true))
		_, err := h.c.sync(context.Background(), "ns/web")
		require.NoError(t, err)
		got, err := h.get(t, "web")
		require.NoError(t, err)
		require.Nil(t, got.Status.PodStates)
	})
}

func TestSyncTargetGone(t *testing.T) {
	owned := func(p *v1alpha1.PersistentPodState) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "web", UID: "set-uid", Controller: ptr.To(true)}}
	}
	t.Run("generated: deleted", func(t *testing.T) {
		h := newHarness(t)
		h.cache(t, pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)}, owned))
		_, err := h.c.sync(context.Background(), "ns/web")
		require.NoError(t, err)
		_, err = h.get(t, "web")
		require.True(t, apierrors.IsNotFound(err), "%v", err)
	})
	t.Run("the user's: records cleared", func(t *testing.T) {
		h := newHarness(t)
		h.cache(t, pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)}))
		_, err := h.c.sync(context.Background(), "ns/web")
		require.NoError(t, err)
		got, err := h.get(t, "web")
		require.NoError(t, err)
		require.Nil(t, got.Status.PodStates)
		require.Equal(t, int64(3), got.Status.ObservedGeneration)
	})
	t.Run("unsupported target: a warning, no write", func(t *testing.T) {
		h := newHarness(t)
		h.cache(t, pps(nil, func(p *v1alpha1.PersistentPodState) { p.Spec.TargetReference.Kind = "Deployment" }))
		_, err := h.c.sync(context.Background(), "ns/web")
		require.NoError(t, err)
		ev := h.events()
		require.Len(t, ev, 1)
		require.Contains(t, ev[0], "UnsupportedTarget")
	})
}

func TestSyncGenerated(t *testing.T) {
	on := map[string]string{wellknown.AnnotationAutoGeneratePersistentPodState: "true", wellknown.AnnotationRequiredPersistentTopology: hostKey}
	h := newHarness(t)
	set := advancedSet(3, on)
	h.cache(t, set)
	_, err := h.c.syncGenerated(context.Background(), "StatefulSet.apps.kruise.io|ns/web")
	require.NoError(t, err)
	got, err := h.get(t, "web")
	require.NoError(t, err)
	require.Equal(t, []string{hostKey}, got.Spec.RequiredPersistentTopology.NodeTopologyKeys)
	require.True(t, metav1.IsControlledBy(got, set))
	require.Contains(t, h.events()[0], "Generated")

	// The annotation removed: the generated object goes.
	require.NoError(t, h.o.States.GetIndexer().Add(got))
	require.NoError(t, h.o.AdvancedStatefulSets.GetIndexer().Update(advancedSet(3, nil)))
	_, err = h.c.syncGenerated(context.Background(), "StatefulSet.apps.kruise.io|ns/web")
	require.NoError(t, err)
	_, err = h.get(t, "web")
	require.True(t, apierrors.IsNotFound(err), "%v", err)

	t.Run("an upstream StatefulSet of the same name conflicts", func(t *testing.T) {
		h := newHarness(t)
		h.cache(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "up", Annotations: on}},
			pps(nil, func(p *v1alpha1.PersistentPodState) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "web", UID: "set-uid", Controller: ptr.To(true)}}
			}))
		_, err := h.c.syncGenerated(context.Background(), "StatefulSet.apps|ns/web")
		require.NoError(t, err)
		got, err := h.get(t, "web")
		require.NoError(t, err)
		require.Equal(t, "apps.kruise.io/v1beta1", got.Spec.TargetReference.APIVersion, "left alone")
		require.Contains(t, h.events()[0], "GenerateConflict")
	})
}

func TestEventsQueue(t *testing.T) {
	h := newHarness(t)
	h.cache(t, pps(nil), pps(nil, func(p *v1alpha1.PersistentPodState) {
		p.Name = "other"
		p.Spec.TargetReference.Name = "other"
	}))
	h.c.podEvent(pod("web-0", "n1", true))
	require.Equal(t, 1, h.c.Queue.Len())
	key, _ := h.c.Queue.Get()
	require.Equal(t, "ns/web", key)
	h.c.Queue.Done(key)

	// A status heartbeat of a pod queues nothing.
	p := pod("web-0", "n1", true)
	p2 := p.DeepCopy()
	p2.ResourceVersion = "2"
	h.c.podUpdate(p, p2)
	require.Equal(t, 0, h.c.Queue.Len())
	p2.Status.Conditions[0].Status = corev1.ConditionFalse
	h.c.podUpdate(p, p2)
	require.Equal(t, 1, h.c.Queue.Len())

	// A generated object's events queue its StatefulSet's generation.
	h.c.stateEvent(generated(upstream(map[string]string{
		wellknown.AnnotationAutoGeneratePersistentPodState: "true", wellknown.AnnotationRequiredPersistentTopology: hostKey,
	})))
	require.Equal(t, 1, h.c.generate.Len())
	gkey, _ := h.c.generate.Get()
	require.Equal(t, "StatefulSet.apps|ns/db", gkey)
	h.c.generate.Done(gkey)
}

// resettableMapper is a fixed RESTMapper that counts its resets.
type resettableMapper struct {
	meta.RESTMapper
	resets atomic.Int32
}

func (m *resettableMapper) Reset() { m.resets.Add(1) }

// TestCustomWorkload follows a white-listed StatefulSet-like kind (as
// OpenKruise's "statefulsetlike node topology" case does) through a fake
// dynamic client: its informer starts when the list names it, a
// generated PersistentPodState records its pods, and it stops when the
// list drops it.
func TestCustomWorkload(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "apps.kruise.io", Version: "v1beta1", Kind: "StatefulSetLikeTest"}
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: "statefulsetliketests"}
	like := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
		"metadata": map[string]any{"name": "web", "namespace": "ns", "uid": "like-uid", "annotations": map[string]any{
			wellknown.AnnotationAutoGeneratePersistentPodState: "true",
			wellknown.AnnotationRequiredPersistentTopology:     zoneKey,
			wellknown.AnnotationPreferredPersistentTopology:    hostKey,
			wellknown.AnnotationPersistentPodAnnotations:       "name",
		}},
		"spec": map[string]any{"replicas": int64(2)},
	}}
	restMapper := meta.NewDefaultRESTMapper(nil)
	restMapper.Add(gvk, meta.RESTScopeNamespace)
	mapper := &resettableMapper{RESTMapper: restMapper}

	h := newHarness(t, func(o *Options) {
		o.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{gvr: "StatefulSetLikeTestList"}, like)
		o.Mapper = mapper
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.c.custom.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	gk := gvk.GroupKind()
	key := generateKey(gk, "ns", "web")
	_, err := h.c.syncGenerated(ctx, key)
	require.NoError(t, err)
	_, err = h.get(t, "web")
	require.True(t, apierrors.IsNotFound(err), "not white-listed: nothing generated (%v)", err)

	h.c.setWhiteList(WhiteList{gvk})
	require.Eventually(t, func() bool {
		inf := h.c.custom.informer(gk)
		return inf != nil && inf.HasSynced()
	}, 10*time.Second, 10*time.Millisecond, "the kind's informer starts and syncs")

	_, err = h.c.syncGenerated(ctx, key)
	require.NoError(t, err)
	got, err := h.get(t, "web")
	require.NoError(t, err)
	require.Equal(t, v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSetLikeTest", Name: "web"}, got.Spec.TargetReference)
	require.Equal(t, []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSetLikeTest", Name: "web", UID: "like-uid", Controller: ptr.To(true)}},
		got.OwnerReferences)
	require.Equal(t, []v1alpha1.PersistentPodAnnotation{{Key: "name"}}, got.Spec.PersistentPodAnnotations)

	// Its pods are recorded, with their annotation.
	likePod := func(name, node string) *corev1.Pod {
		return pod(name, node, true, func(p *corev1.Pod) {
			p.OwnerReferences[0].Kind, p.OwnerReferences[0].UID = "StatefulSetLikeTest", "like-uid"
			p.Annotations = map[string]string{"name": name}
		})
	}
	h.cache(t, node("n1", "a"), node("n2", "b"), likePod("web-0", "n1"), likePod("web-1", "n2"))
	require.NoError(t, h.o.States.GetIndexer().Add(got))
	h.c.podEvent(likePod("web-0", "n1"))
	require.Equal(t, 1, h.c.Queue.Len(), "a pod of the white-listed kind queues its PersistentPodState")
	_, err = h.c.sync(ctx, "ns/web")
	require.NoError(t, err)
	got, err = h.get(t, "web")
	require.NoError(t, err)
	require.Equal(t, map[string]v1alpha1.PodState{
		"web-0": {NodeName: "n1", NodeTopologyLabels: map[string]string{hostKey: "n1", zoneKey: "a"}, Annotations: map[string]string{"name": "web-0"}},
		"web-1": {NodeName: "n2", NodeTopologyLabels: map[string]string{hostKey: "n2", zoneKey: "b"}, Annotations: map[string]string{"name": "web-1"}},
	}, got.Status.PodStates)

	// Off the list: no longer followed, and nothing is cleared.
	h.events()
	h.c.setWhiteList(nil)
	require.Eventually(t, func() bool { return h.c.custom.informer(gk) == nil }, 10*time.Second, 10*time.Millisecond, "the informer stops")
	require.NoError(t, h.o.States.GetIndexer().Update(got))
	_, err = h.c.sync(ctx, "ns/web")
	require.NoError(t, err)
	ev := h.events()
	require.Len(t, ev, 1)
	require.Contains(t, ev[0], "UnsupportedTarget")
	require.Contains(t, ev[0], "PPS_Watch_Custom_Workload_WhiteList")
	got, err = h.get(t, "web")
	require.NoError(t, err)
	require.Len(t, got.Status.PodStates, 2)

	t.Run("listed but not served: records kept, looked at again", func(t *testing.T) {
		h := newHarness(t, func(o *Options) {
			o.Dynamic = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
			o.Mapper = &resettableMapper{RESTMapper: meta.NewDefaultRESTMapper(nil)}
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.c.custom.run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		h.c.setWhiteList(WhiteList{gvk})
		recorded := pps(map[string]v1alpha1.PodState{"web-0": state("n1", "a", nil)}, func(p *v1alpha1.PersistentPodState) {
			p.Spec.TargetReference = v1alpha1.TargetReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSetLikeTest", Name: "web"}
		})
		h.cache(t, recorded)
		after, err := h.c.sync(ctx, "ns/web")
		require.NoError(t, err)
		require.Equal(t, customRetry, after)
		got, err := h.get(t, "web")
		require.NoError(t, err)
		require.Equal(t, recorded.Status, got.Status, "nothing is cleared while the kind cannot be read")
		require.Eventually(t, func() bool { return h.o.Mapper.(*resettableMapper).resets.Load() > 0 }, 10*time.Second, 10*time.Millisecond,
			"discovery is asked again for a kind it did not know")
	})
}
