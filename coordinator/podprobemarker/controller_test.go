package podprobemarker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/coordinator/podprobemarker/probeview"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// patches counts the pod patches the fake clientset received.
func patches(kube *kubefake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

func TestControllerAppliesReportedStates(t *testing.T) {
	marker, pod := gameMarker(), gamePod()
	kube := kubefake.NewClientset(pod)
	shoal := shoalfake.NewSimpleClientset(marker)
	store := dispatch.NewStore()
	ki := kubeinformers.NewSharedInformerFactory(kube, 0)
	si := shoalinformers.NewSharedInformerFactory(shoal, 0)
	c, err := New(Options{
		Client: kube, Shoal: shoal, Markers: si.Apps().V1alpha1().PodProbeMarkers().Informer(), Pods: ki.Core().V1().Pods().Informer(),
		Store: store, IsLeader: func() bool { return true }, Recorder: events.NewFakeRecorder(100),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	ki.Start(ctx.Done())
	si.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.HasSynced))
	go func() { defer close(done); _ = c.Run(ctx) }()

	id := nodework.ProbeID("ns", "game-0")
	eventually := func(cond func() bool, msg string) {
		t.Helper()
		require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, msg)
	}
	eventually(func() bool { it, _ := store.Item("node-a", id); return len(it.GetProbe().GetProbes()) == 2 }, "the pod's probes are on its node")
	eventually(func() bool {
		m, err := shoal.AppsV1alpha1().PodProbeMarkers("ns").Get(ctx, marker.Name, metav1.GetOptions{})
		return err == nil && m.Status.MatchedPods == 1 && len(m.Finalizers) == 1 && m.Finalizers[0] == wellknown.FinalizerNodePodProbeCleanup
	}, "matchedPods and the finalizer")

	report := func(state nodeworkv1.ProbeState, msg string) {
		it, _ := store.Item("node-a", id)
		store.Report("node-a", &nodeworkv1.WorkReport{Id: id, ObservedGeneration: it.GetGeneration(), Kind: nodework.KindProbe,
			Phase: nodeworkv1.Phase_PHASE_RUNNING, Status: &nodeworkv1.WorkReport_Probe{Probe: &nodeworkv1.ProbeStatus{
				PodUid: "uid-0", Probes: []*nodeworkv1.ProbeResult{result(state, msg)["game-server-probe#Idle"]},
			}}})
	}
	report(nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED, "idle")
	eventually(func() bool {
		p, err := kube.CoreV1().Pods("ns").Get(ctx, "game-0", metav1.GetOptions{})
		c := podstatus.Condition(p, "game.io/idle")
		return err == nil && p.Labels["gameserver-idle"] == "true" && c != nil && c.Status == corev1.ConditionTrue && c.Message == "idle"
	}, "the pod shows Succeeded")

	// The same report again: the pod shows it, nothing more is written.
	eventually(func() bool {
		p, _ := ki.Core().V1().Pods().Lister().Pods("ns").Get("game-0")
		return p != nil && p.Labels["gameserver-idle"] == "true" && podstatus.Condition(p, "game.io/idle") != nil
	}, "the informer shows the writes")
	before := patches(kube)
	report(nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED, "idle")
	c.pods.Add("ns/game-0")
	require.Never(t, func() bool { return patches(kube) != before }, 300*time.Millisecond, 10*time.Millisecond, "no write in steady state")

	report(nodeworkv1.ProbeState_PROBE_STATE_FAILED, "players: 3")
	eventually(func() bool {
		p, _ := kube.CoreV1().Pods("ns").Get(ctx, "game-0", metav1.GetOptions{})
		c := podstatus.Condition(p, "game.io/idle")
		return p.Labels["gameserver-idle"] == "false" && p.Annotations["controller.kubernetes.io/pod-deletion-cost"] == "10" &&
			c != nil && c.Status == corev1.ConditionFalse && c.Message == "players: 3"
	}, "the pod shows Failed")
	view, ok := c.Pods("ns", marker.Name)
	require.True(t, ok)
	require.Len(t, view.Pods, 1)
	require.Equal(t, "game-0", view.Pods[0].Name)
	require.Equal(t, []string{"Idle", "Http"}, []string{view.Pods[0].Probes[0].Name, view.Pods[0].Probes[1].Name})
	require.Equal(t, probeview.StateFailed, view.Pods[0].Probes[0].State)
	require.Equal(t, "players: 3", view.Pods[0].Probes[0].Message)
	require.Equal(t, probeview.StateUnknown, view.Pods[0].Probes[1].State, "no result yet")
	_, ok = c.Pods("ns", "other")
	require.False(t, ok)

	for _, a := range kube.Actions() {
		_, isUpdate := a.(k8stesting.UpdateAction)
		require.False(t, isUpdate && a.GetResource().Resource == "pods", "pods are patched, never updated")
	}

	// The marker goes: its probes leave the node, then the finalizer.
	require.NoError(t, shoal.AppsV1alpha1().PodProbeMarkers("ns").Delete(ctx, marker.Name, metav1.DeleteOptions{}))
	eventually(func() bool { it, _ := store.Item("node-a", id); return it == nil }, "the probes leave the node")
}
