package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// meshSet is SidecarSet "mesh": pods labelled app=web get a hot-upgrade
// sidecar "mesh" and a plain one "log"; its current hash is "h2", of
// revision mesh-v2.
func meshSet() *v1beta1.SidecarSet {
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "mesh", Generation: 2, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			Annotations: map[string]string{wellknown.AnnotationSidecarSetHash: "h2"},
		},
		Spec: v1beta1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []v1beta1.SidecarContainer{
				{Container: corev1.Container{Name: "mesh", Image: "img:v2"}, UpgradeStrategy: v1beta1.SidecarContainerUpgradeStrategy{
					UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1"}},
				{Container: corev1.Container{Name: "log", Image: "log:v1"}},
			},
		},
		Status: v1beta1.SidecarSetStatus{ObservedGeneration: 2, MatchedPods: 3, UpdatedPods: 1, ReadyPods: 2, UpdatedReadyPods: 1, LatestRevision: "mesh-v2"},
	}
}

// meshPod is pod ns/name labelled app, injected with SidecarSet set at
// hash and revision (no entry when set is ""), with the hot-upgrade pair
// mesh-1/mesh-2 of which working runs image meshImage, and "log".
func meshPod(t *testing.T, ns, name, app, set, hash, rev, working, meshImage string, ready bool) *corev1.Pod {
	t.Helper()
	images := map[string]string{"mesh-1": "empty:1", "mesh-2": "empty:1"}
	images[working] = meshImage
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "mesh-1", Image: images["mesh-1"]}, {Name: "mesh-2", Image: images["mesh-2"]},
			{Name: "log", Image: "log:v1"}, {Name: "app", Image: "web:1"},
		}},
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if set != "" {
		require.NoError(t, sidecarcontrol.SetPodUpgradeSpec(p, wellknown.AnnotationSidecarSetHash, sidecarcontrol.UpgradeSpec{
			Hash: hash, ControllerRevision: rev, SidecarSetName: set, SidecarList: []string{"log", "mesh"}, UpdateTimestamp: metav1.NewTime(now),
		}))
		require.NoError(t, sidecarcontrol.SetWorkingHotUpgradeContainer(p, "mesh", working))
	}
	return p
}

// meshCluster holds meshSet, SidecarSet "ingress", and pods of mesh at
// two revisions plus two it must not show: one of its selector that
// another set injected, and one it injected that its selector no longer
// matches.
func meshCluster(t *testing.T) *fakeCluster {
	t.Helper()
	ingress := &v1beta1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "ingress", CreationTimestamp: metav1.NewTime(now.Add(-26 * time.Hour))},
		Spec: v1beta1.SidecarSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gw"}}}}
	f := newFakeCluster(meshSet(), ingress)
	for _, p := range []*corev1.Pod{
		meshPod(t, "b", "web-0", "web", "mesh", "h1", "mesh-v1", "mesh-1", "img:v1", true),
		meshPod(t, "a", "web-1", "web", "mesh", "h1", "mesh-v1", "mesh-1", "img:v1", false),
		meshPod(t, "a", "web-0", "web", "mesh", "h2", "mesh-v2", "mesh-2", "img:v2", true),
		meshPod(t, "a", "web-2", "web", "ingress", "x", "ingress-v1", "mesh-1", "img:v1", true),
		meshPod(t, "c", "db-0", "db", "mesh", "h1", "mesh-v1", "mesh-1", "img:v1", true),
	} {
		require.NoError(t, f.kube.Tracker().Add(p))
	}
	return f
}

// The views of meshCluster, before and after the watch test's changes.
const (
	wantMeshView = "" +
		"SidecarSet mesh: 3 matched, 1 updated, 2 ready, 1 updated and ready; latest revision mesh-v2 (observed generation 2 of 2)\n" +
		"NAMESPACE   POD     REVISION   UPDATED   READY   SIDECARS\n" +
		"a           web-0   mesh-v2    true      true    log: log:v1, mesh: mesh-2 (img:v2)\n" +
		"a           web-1   mesh-v1    false     false   log: log:v1, mesh: mesh-1 (img:v1)\n" +
		"b           web-0   mesh-v1    false     true    log: log:v1, mesh: mesh-1 (img:v1)\n" +
		"revision mesh-v2 (latest): 1 pod, revision mesh-v1: 2 pods\n"
	wantMeshViewPodUpdated = "" +
		"SidecarSet mesh: 3 matched, 1 updated, 2 ready, 1 updated and ready; latest revision mesh-v2 (observed generation 2 of 2)\n" +
		"NAMESPACE   POD     REVISION   UPDATED   READY   SIDECARS\n" +
		"a           web-0   mesh-v2    true      true    log: log:v1, mesh: mesh-2 (img:v2)\n" +
		"a           web-1   mesh-v2    true      true    log: log:v1, mesh: mesh-2 (img:v2)\n" +
		"b           web-0   mesh-v1    false     true    log: log:v1, mesh: mesh-1 (img:v1)\n" +
		"revision mesh-v2 (latest): 2 pods, revision mesh-v1: 1 pod\n"
	wantMeshViewSetUpdated = "" +
		"SidecarSet mesh: 3 matched, 2 updated, 3 ready, 2 updated and ready; latest revision mesh-v2 (observed generation 2 of 2)\n" +
		"NAMESPACE   POD     REVISION   UPDATED   READY   SIDECARS\n" +
		"a           web-0   mesh-v2    true      true    log: log:v1, mesh: mesh-2 (img:v2)\n" +
		"a           web-1   mesh-v2    true      true    log: log:v1, mesh: mesh-2 (img:v2)\n" +
		"b           web-0   mesh-v1    false     true    log: log:v1, mesh: mesh-1 (img:v1)\n" +
		"revision mesh-v2 (latest): 2 pods, revision mesh-v1: 1 pod\n"
)

func TestGetSidecarSet(t *testing.T) {
	f := meshCluster(t)
	for _, tc := range []struct {
		name      string
		cluster   *fakeCluster
		args      []string
		code      int
		stdout    string
		stderrHas string
	}{
		{
			name: "list",
			args: []string{"get", "sidecarsets"},
			stdout: "" +
				"NAME      MATCHED   UPDATED   READY   LATEST-REVISION   AGE\n" +
				"ingress   0         0         0       <none>            26h\n" +
				"mesh      3         1         2       mesh-v2           60m\n",
		},
		{
			name:      "list of none",
			cluster:   newFakeCluster(),
			args:      []string{"get", "sidecarset"},
			stderrHas: "No SidecarSets found.\n",
		},
		{
			name:   "one set: its pods at two revisions, hot-upgrade sidecars by working container",
			args:   []string{"get", "sidecarset", "mesh"},
			stdout: wantMeshView,
		},
		{
			name: "one set without injected pods",
			args: []string{"get", "sidecarset", "ingress"},
			stdout: "" +
				"SidecarSet ingress: 0 matched, 0 updated, 0 ready, 0 updated and ready; latest revision <none> (observed generation 0 of 0)\n" +
				"No pods injected with SidecarSet ingress (selector app=gw).\n",
		},
		{
			name:      "missing set",
			args:      []string{"get", "sidecarset", "nope"},
			code:      exitError,
			stderrHas: `error: get sidecarset nope: sidecarsets.apps.kruise.io "nope" not found`,
		},
		{
			name:      "two names",
			args:      []string{"get", "sidecarset", "a", "b"},
			code:      exitUsage,
			stderrHas: "takes at most one name",
		},
		{
			name:      "watch needs a name",
			args:      []string{"get", "sidecarset", "-w"},
			code:      exitUsage,
			stderrHas: "-w needs a SidecarSet name",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cluster
			if c == nil {
				c = f
			}
			code, stdout, stderr := c.run(t, tc.args...)
			require.Equal(t, tc.code, code, "stderr: %s", stderr)
			require.Equal(t, tc.stdout, stdout)
			require.Contains(t, stderr, tc.stderrHas)
		})
	}
}

func TestPodSidecars(t *testing.T) {
	set := meshSet()
	always := corev1.ContainerRestartPolicyAlways
	set.Spec.InitContainers = []v1beta1.SidecarContainer{
		{Container: corev1.Container{Name: "init", Image: "init:1"}},
		{Container: corev1.Container{Name: "native", Image: "native:1", RestartPolicy: &always}},
	}
	withNative := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:1"}, {Name: "native", Image: "native:1", RestartPolicy: &always}}
		return p
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		sidecars []string
		want     string
	}{
		{
			name:     "listed sidecars, hot-upgrade by the working container",
			pod:      meshPod(t, "a", "p", "web", "mesh", "h2", "mesh-v2", "mesh-2", "img:v2", true),
			sidecars: []string{"log", "mesh"},
			want:     "log: log:v1, mesh: mesh-2 (img:v2)",
		},
		{
			name: "no list (older annotation): the set's containers and native sidecars",
			pod:  withNative(meshPod(t, "a", "p", "web", "mesh", "h2", "mesh-v2", "mesh-2", "img:v2", true)),
			want: "log: log:v1, mesh: mesh-2 (img:v2), native: native:1",
		},
		{
			name:     "no working container recorded: the first of the pair",
			pod:      meshPod(t, "a", "p", "web", "", "", "", "mesh-1", "img:v1", true),
			sidecars: []string{"mesh"},
			want:     "mesh: mesh-1 (img:v1)",
		},
		{
			name:     "a sidecar the pod lacks",
			pod:      meshPod(t, "a", "p", "web", "mesh", "h2", "mesh-v2", "mesh-2", "img:v2", true),
			sidecars: []string{"gone", "log"},
			want:     "gone: <missing>, log: log:v1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, podSidecars(set, tc.pod, tc.sidecars))
		})
	}
}

func TestSidecarSetUpdatedWithoutHashAnnotation(t *testing.T) {
	// Before the controller annotated the set, UPDATED compares with the
	// hash it will write.
	set := meshSet()
	set.Annotations = nil
	hash, _, err := sidecarcontrol.Hashes(set)
	require.NoError(t, err)
	sel, err := sidecarSetSelector(set)
	require.NoError(t, err)
	rows := sidecarSetRows(set, sel, []*corev1.Pod{
		meshPod(t, "a", "new", "web", "mesh", hash, "", "mesh-2", "img:v2", true),
		meshPod(t, "a", "old", "web", "mesh", "h1", "", "mesh-1", "img:v1", true),
	})
	require.Len(t, rows, 2)
	require.True(t, rows[0].updated)
	require.False(t, rows[1].updated)
	require.Equal(t, "revision <unknown>: 2 pods", revisionSummary(rows, "mesh-v2"))
}

// podWatches records the pod watches the command starts.
type podWatches struct {
	mu   sync.Mutex
	seen []clienttesting.WatchActionImpl
}

func (w *podWatches) get() []clienttesting.WatchActionImpl {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]clienttesting.WatchActionImpl(nil), w.seen...)
}

func TestGetSidecarSetWatch(t *testing.T) {
	f := meshCluster(t)
	var watches podWatches
	f.kube.PrependWatchReactor("pods", func(a clienttesting.Action) (bool, watch.Interface, error) {
		watches.mu.Lock()
		defer watches.mu.Unlock()
		watches.seen = append(watches.seen, a.(clienttesting.WatchActionImpl))
		return false, nil, nil // on to the tracker's watch
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytesBuffer
	done := make(chan int)
	go func() {
		done <- execute(ctx, newRootCommandEnv(&stdout, &stderr, f.env()), []string{"get", "sidecarset", "mesh", "--watch"}, &stderr)
	}()
	// waitForOutput polls (bounded) until the command printed want.
	waitForOutput := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return stdout.String() == want }, 10*time.Second, 5*time.Millisecond,
			"stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	bg := context.Background()

	waitForOutput(wantMeshView)
	// Once watching, a pod catching up with the latest revision prints
	// the view again.
	require.Eventually(t, func() bool { return len(watches.get()) > 0 }, 10*time.Second, 5*time.Millisecond)
	_, err := f.kube.CoreV1().Pods("a").Update(bg, meshPod(t, "a", "web-1", "web", "mesh", "h2", "mesh-v2", "mesh-2", "img:v2", true), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitForOutput(wantMeshView + "\n" + wantMeshViewPodUpdated)

	// So does the set's status.
	set := meshSet()
	set.Status.UpdatedPods, set.Status.ReadyPods, set.Status.UpdatedReadyPods = 2, 3, 2
	_, err = f.shoal.AppsV1beta1().SidecarSets().Update(bg, set, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitForOutput(wantMeshView + "\n" + wantMeshViewPodUpdated + "\n" + wantMeshViewSetUpdated)

	// A new selector: its pods are watched instead.
	set.Spec.Selector.MatchLabels["app"] = "db"
	_, err = f.shoal.AppsV1beta1().SidecarSets().Update(bg, set, metav1.UpdateOptions{})
	require.NoError(t, err)
	wantNewSelector := "" +
		"SidecarSet mesh: 3 matched, 2 updated, 3 ready, 2 updated and ready; latest revision mesh-v2 (observed generation 2 of 2)\n" +
		"NAMESPACE   POD    REVISION   UPDATED   READY   SIDECARS\n" +
		"c           db-0   mesh-v1    false     true    log: log:v1, mesh: mesh-1 (img:v1)\n" +
		"revision mesh-v1: 1 pod\n"
	waitForOutput(wantMeshView + "\n" + wantMeshViewPodUpdated + "\n" + wantMeshViewSetUpdated + "\n" + wantNewSelector)

	// And its deletion; the watch goes on until Ctrl-C.
	require.NoError(t, f.shoal.AppsV1beta1().SidecarSets().Delete(bg, "mesh", metav1.DeleteOptions{}))
	waitForOutput(wantMeshView + "\n" + wantMeshViewPodUpdated + "\n" + wantMeshViewSetUpdated + "\n" + wantNewSelector + "\nSidecarSet mesh is gone (deleted)\n")

	cancel() // Ctrl-C
	select {
	case code := <-done:
		require.Equal(t, exitOK, code, stderr.String())
		require.Empty(t, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not stop when its context ended")
	}
	w := watches.get()
	require.Len(t, w, 2, "a watch of the pods per selector")
	for i, sel := range []string{"app=web", "app=db"} {
		require.Equal(t, metav1.NamespaceAll, w[i].GetNamespace(), "pods of every namespace")
		require.Equal(t, sel, w[i].GetWatchRestrictions().Labels.String(), "the set's selector")
	}
}
