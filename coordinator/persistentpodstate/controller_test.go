package persistentpodstate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

func newHarness(t *testing.T) *harness {
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
	_, err := h.c.syncGenerated(context.Background(), "apps.kruise.io|ns/web")
	require.NoError(t, err)
	got, err := h.get(t, "web")
	require.NoError(t, err)
	require.Equal(t, []string{hostKey}, got.Spec.RequiredPersistentTopology.NodeTopologyKeys)
	require.True(t, metav1.IsControlledBy(got, set))
	require.Contains(t, h.events()[0], "Generated")

	// The annotation removed: the generated object goes.
	require.NoError(t, h.o.States.GetIndexer().Add(got))
	require.NoError(t, h.o.AdvancedStatefulSets.GetIndexer().Update(advancedSet(3, nil)))
	_, err = h.c.syncGenerated(context.Background(), "apps.kruise.io|ns/web")
	require.NoError(t, err)
	_, err = h.get(t, "web")
	require.True(t, apierrors.IsNotFound(err), "%v", err)

	t.Run("an upstream StatefulSet of the same name conflicts", func(t *testing.T) {
		h := newHarness(t)
		h.cache(t, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "up", Annotations: on}},
			pps(nil, func(p *v1alpha1.PersistentPodState) {
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "web", UID: "set-uid", Controller: ptr.To(true)}}
			}))
		_, err := h.c.syncGenerated(context.Background(), "apps|ns/web")
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
	require.Equal(t, "apps|ns/db", gkey)
	h.c.generate.Done(gkey)
}
