//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/podprobemarker/probeview"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The PodProbeMarker tests port OpenKruise's cases
// (test/e2e/apps/podprobemarker.go) with the same assertions. Where
// OpenKruise reads a node's NodePodProbe, these read the coordinator's
// per-pod view of the marker (framework.PodProbeMarkerPods): Shoal has no
// NodePodProbe objects, the coordinator puts each pod's probes on its node
// and shows them per pod. OpenKruise's nginx container is the testserver
// serving on OpenKruise's port (tcp and http cases) or busybox (the exec
// case, whose probes run /bin/sh, which the testserver image lacks);
// centos is busybox. OpenKruise's fixed sleeps (10 to 100 s) are bounded
// waits here.

const (
	// ppmTimeout bounds a wait for pods to show a probe's new state (the
	// probes run every second; OpenKruise sleeps up to 100 s).
	ppmTimeout = 2 * time.Minute
	// gameServerFlipTimeout bounds a wait for the seed's probe to flip: up
	// to 10 s to its next run, then three failures 10 s apart
	// (failureThreshold 3, periodSeconds 10), about 40 s; twice that for a
	// busy cluster.
	gameServerFlipTimeout = 90 * time.Second
	// coordinatorCatchUp is how soon after the coordinator is Ready again
	// a pod must show what its node's agent found while there was none.
	coordinatorCatchUp = 5 * time.Second
	// coordinatorDeployment is the coordinator's Deployment.
	coordinatorDeployment = "shoal-coordinator"
	// agentProbeStateChanges is the agent's count of reported probe state
	// changes by new state (probes.MetricStateChanges).
	agentProbeStateChanges = "shoal_agent_probe_state_changes_total"
)

// OpenKruise's condition types, label and annotation.
const (
	condHealthy  = "game.kruise.io/healthy"
	condCheck    = "game.kruise.io/check"
	labelNginx   = "nginx"
	deletionCost = wellknown.AnnotationPodDeletionCost
)

// ppmStatefulSet is the Advanced StatefulSet of OpenKruise's
// NewBaseStatefulSet and NewStatefulSetWithProbeImg: "stateful-test"
// (Parallel pod management) of replicas pods with containers, selecting
// app=stateful-test, spread over the nodes as the cases ask (maxSkew 1,
// ScheduleAnyway).
func ppmStatefulSet(replicas int32, containers ...corev1.Container) *v1beta1.StatefulSet {
	const name = "stateful-test"
	labels := map[string]string{"app": name}
	return &v1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.StatefulSetSpec{
			PodManagementPolicy: appsv1.ParallelPodManagement,
			ServiceName:         name,
			Replicas:            ptr.To(replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						LabelSelector:     &metav1.LabelSelector{MatchLabels: labels},
						MaxSkew:           1,
						TopologyKey:       corev1.LabelHostname,
						WhenUnsatisfiable: corev1.ScheduleAnyway,
					}},
					Containers: containers,
				},
			},
		},
	}
}

// nginxAndMain are NewBaseStatefulSet's containers: nginx, and main
// (centos sleeping there, busybox here).
func nginxAndMain(f *framework.Framework, nginx corev1.Container) []corev1.Container {
	nginx.Name = "nginx"
	return []corev1.Container{nginx, {Name: "main", Image: f.Image("busybox:latest"), Command: []string{"sleep", "10000000"}}}
}

// busyboxNginx is the nginx container of the exec case: busybox, whose
// /bin/sh runs OpenKruise's "ls /".
func busyboxNginx(f *framework.Framework) corev1.Container {
	return corev1.Container{Image: f.Image("busybox:latest"), Command: []string{"sleep", "10000000"}}
}

// testserverNginx is the nginx container of the tcp and http cases: the
// testserver answering HTTP on nginx's port 80 (GET / is 200).
func testserverNginx(f *framework.Framework) corev1.Container {
	return corev1.Container{
		Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "80"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
	}
}

// startPPMStatefulSet creates sts (and its headless Service) and waits
// until all its replicas are ready, as the tester's CreateStatefulSet
// does.
func startPPMStatefulSet(ctx context.Context, t *testing.T, f *framework.Framework, sts *v1beta1.StatefulSet) {
	t.Helper()
	createStatefulSet(ctx, t, f, sts)
	waitPPMStatefulSet(ctx, t, f, sts.Name, *sts.Spec.Replicas)
}

// waitPPMStatefulSet waits until the set has n replicas, all updated and
// ready (the tester's WaitForStatefulSetRunning).
func waitPPMStatefulSet(ctx context.Context, t *testing.T, f *framework.Framework, name string, n int32) {
	t.Helper()
	waitStatefulSet(ctx, t, f, name, fmt.Sprintf("%d replicas running", n), func(s *v1beta1.StatefulSet) bool {
		return *s.Spec.Replicas == n && s.Status.Replicas == n && s.Status.UpdatedReplicas == n && s.Status.ReadyReplicas == n
	})
}

// execProbe is an exec probe running command.
func execProbe(command ...string) v1alpha1.ContainerProbeSpec {
	return v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: command}},
	}}
}

// newPPM is a PodProbeMarker selecting app=app with one probe.
func newPPM(name, app string, probe v1alpha1.PodContainerProbe) *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Probes:   []v1alpha1.PodContainerProbe{probe},
		},
	}
}

// nginxPPM is OpenKruise's ppm-nginx: probe "healthy" of container nginx,
// condition game.kruise.io/healthy, label nginx=healthy while it succeeds.
func nginxPPM(app string, probe v1alpha1.ContainerProbeSpec) *v1alpha1.PodProbeMarker {
	return newPPM("ppm-nginx", app, v1alpha1.PodContainerProbe{
		Name: "healthy", ContainerName: "nginx", Probe: probe, PodConditionType: condHealthy,
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{labelNginx: "healthy"}}},
	})
}

// mainPPM is OpenKruise's ppm-main: probe "check" ("ps -ef") of container
// main, condition game.kruise.io/check, pod-deletion-cost 10 while it
// succeeds and -10 while it fails.
func mainPPM(app string) *v1alpha1.PodProbeMarker {
	return newPPM("ppm-main", app, v1alpha1.PodContainerProbe{
		Name: "check", ContainerName: "main", Probe: execProbe("/bin/sh", "-c", "ps -ef"), PodConditionType: condCheck,
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
			{State: v1alpha1.ProbeSucceeded, Annotations: map[string]string{deletionCost: "10"}},
			{State: v1alpha1.ProbeFailed, Annotations: map[string]string{deletionCost: "-10"}},
		},
	})
}

// createPPM creates the marker in the test's namespace.
func createPPM(ctx context.Context, t *testing.T, f *framework.Framework, ppm *v1alpha1.PodProbeMarker) {
	t.Helper()
	_, err := f.Shoal.AppsV1alpha1().PodProbeMarkers(f.Namespace).Create(ctx, ppm, metav1.CreateOptions{})
	require.NoError(t, err, "create PodProbeMarker %s", ppm.Name)
}

// setProbe replaces the handler of the marker's first probe, retrying on
// conflicts with the controller's status writes.
func setProbe(ctx context.Context, t *testing.T, f *framework.Framework, name string, handler corev1.ProbeHandler) {
	t.Helper()
	updateObject(ctx, t, f.Shoal.AppsV1alpha1().PodProbeMarkers(f.Namespace), name, func(m *v1alpha1.PodProbeMarker) {
		m.Spec.Probes[0].Probe.ProbeHandler = handler
	})
}

// waitFinalizer waits until the controller put its cleanup finalizer on
// the marker (OpenKruise checks it 10 s after the create).
func waitFinalizer(ctx context.Context, t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	waitObject(ctx, t, f.Shoal.AppsV1alpha1().PodProbeMarkers(f.Namespace), time.Minute, name,
		"finalizer "+wellknown.FinalizerNodePodProbeCleanup,
		func(m *v1alpha1.PodProbeMarker) bool {
			return slices.Contains(m.Finalizers, wellknown.FinalizerNodePodProbeCleanup)
		},
		func(m *v1alpha1.PodProbeMarker) any { return m.Finalizers })
}

// podWant is one thing a pod must show; it describes what differs, "" when
// nothing does.
type podWant func(*corev1.Pod) string

// labelIs: the pod's label k is v ("" also when the label is absent, as
// OpenKruise's pod.Labels[k] == "").
func labelIs(k, v string) podWant {
	return func(p *corev1.Pod) string {
		if got := p.Labels[k]; got != v {
			return fmt.Sprintf("label %s=%q (want %q)", k, got, v)
		}
		return ""
	}
}

// annotationIs: the pod's annotation k is v.
func annotationIs(k, v string) podWant {
	return func(p *corev1.Pod) string {
		if got := p.Annotations[k]; got != v {
			return fmt.Sprintf("annotation %s=%q (want %q)", k, got, v)
		}
		return ""
	}
}

// conditionIs: the pod has condition typ with status, and a message
// containing msg.
func conditionIs(typ string, status corev1.ConditionStatus, msg string) podWant {
	return func(p *corev1.Pod) string {
		c := podstatus.Condition(p, corev1.PodConditionType(typ))
		switch {
		case c == nil:
			return fmt.Sprintf("no condition %s (want %s)", typ, status)
		case c.Status != status || !strings.Contains(c.Message, msg):
			return fmt.Sprintf("condition %s=%s message %q (want %s with %q)", typ, c.Status, c.Message, status, msg)
		}
		return ""
	}
}

// noCondition: the pod has no condition typ.
func noCondition(typ string) podWant {
	return func(p *corev1.Pod) string {
		if c := podstatus.Condition(p, corev1.PodConditionType(typ)); c != nil {
			return fmt.Sprintf("condition %s=%s %q (want none)", typ, c.Status, c.Message)
		}
		return ""
	}
}

// activePods lists the pods labelled app=app that are active (not being
// deleted, not terminal) and scheduled, as the tester's ListActivePods.
func activePods(ctx context.Context, f *framework.Framework, app string) ([]corev1.Pod, error) {
	pods, err := listSetPods(ctx, f, app, false)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool {
		return p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	}), nil
}

// waitProbedPods waits until exactly n pods labelled app=app are active
// and each shows every want, and returns them.
func waitProbedPods(ctx context.Context, t *testing.T, f *framework.Framework, app string, n int, timeout time.Duration, what string, wants ...podWant) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	var last string
	err := framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = activePods(ctx, f, app); err != nil {
			return false, err
		}
		if len(pods) != n {
			last = fmt.Sprintf("%d active pods (want %d): %s", len(pods), n, podsString(pods))
			return false, nil
		}
		var diffs []string
		for i := range pods {
			for _, want := range wants {
				if d := want(&pods[i]); d != "" {
					diffs = append(diffs, pods[i].Name+": "+d)
				}
			}
		}
		last = strings.Join(diffs, "; ")
		return len(diffs) == 0, nil
	})
	require.NoError(t, err, "pods app=%s: %s; last seen: %s", app, what, last)
	return pods
}

// waitView polls the coordinator's per-pod view of the marker until ok
// finds nothing amiss, and returns it.
func waitView(ctx context.Context, t *testing.T, f *framework.Framework, marker, what string, ok func(*probeview.MarkerPods) string) *probeview.MarkerPods {
	t.Helper()
	var view *probeview.MarkerPods
	var last string
	err := framework.WaitFor(ctx, ppmTimeout, func(ctx context.Context) (bool, error) {
		var err error
		// Not found until the coordinator's informer has the marker; 503
		// while a leader change is under way: try again.
		if view, err = f.PodProbeMarkerPods(ctx, f.Namespace, marker); err != nil {
			last = err.Error()
			return false, nil
		}
		last = ok(view)
		return last == "", nil
	})
	require.NoError(t, err, "view of PodProbeMarker %s: %s; last: %s", marker, what, last)
	return view
}

// viewHolds: the view lists exactly pods, each on its node with the
// probes named, in order (OpenKruise: each pod's node's NodePodProbe has
// the pod, and no NodePodProbe has another pod of the namespace).
func viewHolds(pods []corev1.Pod, probes ...string) func(*probeview.MarkerPods) string {
	return func(v *probeview.MarkerPods) string {
		want := map[string]corev1.Pod{}
		for _, p := range pods {
			want[string(p.UID)] = p
		}
		var diffs []string
		for _, vp := range v.Pods {
			p, ok := want[vp.UID]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("lists pod %s (%s), not one of the active pods", vp.Name, vp.UID))
				continue
			}
			delete(want, vp.UID)
			var names []string
			for _, s := range vp.Probes {
				names = append(names, s.Name)
			}
			if vp.Node != p.Spec.NodeName || !slices.Equal(names, probes) {
				diffs = append(diffs, fmt.Sprintf("pod %s on %s with probes %v (want on %s with %v)", vp.Name, vp.Node, names, p.Spec.NodeName, probes))
			}
		}
		for _, p := range want {
			diffs = append(diffs, "lacks pod "+p.Name)
		}
		return strings.Join(diffs, "; ")
	}
}

// viewWithin: every pod of the view is one of pods (OpenKruise: no
// NodePodProbe has another pod of the namespace).
func viewWithin(pods []corev1.Pod) func(*probeview.MarkerPods) string {
	return func(v *probeview.MarkerPods) string {
		var extra []string
		for _, vp := range v.Pods {
			if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return string(p.UID) == vp.UID }) {
				extra = append(extra, vp.Name+" ("+vp.UID+")")
			}
		}
		if len(extra) > 0 {
			return "lists pods that are not active: " + strings.Join(extra, ", ")
		}
		return ""
	}
}

// deleteMarkersAndWait deletes the markers and waits until the
// coordinator's view has no pod of the namespace for any of them (OpenKruise:
// no NodePodProbe has a probe of the namespace) and each marker is gone:
// the controller drops its cleanup finalizer only once the marker's
// probes are off the nodes' work.
func deleteMarkersAndWait(ctx context.Context, t *testing.T, f *framework.Framework, names ...string) {
	t.Helper()
	markers := f.Shoal.AppsV1alpha1().PodProbeMarkers(f.Namespace)
	for _, name := range names {
		require.NoError(t, markers.Delete(ctx, name, metav1.DeleteOptions{}), "delete PodProbeMarker %s", name)
	}
	for _, name := range names {
		var last string
		err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			v, err := f.PodProbeMarkerPods(ctx, f.Namespace, name)
			switch {
			case apierrors.IsNotFound(err):
				return true, nil
			case err != nil:
				last = err.Error()
				return false, nil
			}
			last = fmt.Sprintf("%d pods: %+v", len(v.Pods), v.Pods)
			return len(v.Pods) == 0, nil
		})
		require.NoError(t, err, "PodProbeMarker %s deleted: its view should have no pod; last: %s", name, last)
		err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			_, err := markers.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		require.NoError(t, err, "PodProbeMarker %s should be gone (its finalizer released once its probes are off the nodes)", name)
	}
}

// uidsOf are the pods' UIDs, for the logs.
func uidsOf(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"="+string(p.UID))
	}
	return out
}

// TestPodProbeMarker ports OpenKruise's PodProbeMarker e2e cases.
func TestPodProbeMarker(t *testing.T) {
	t.Parallel()

	t.Run("pod probe marker exec test", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		// OpenKruise first checks that every node has its NodePodProbe;
		// here, that every node runs a ready agent.
		requireShoal(ctx, t, f)
		n := len(requireSchedulableNodes(ctx, t, f, 1))

		sts := ppmStatefulSet(int32(n), nginxAndMain(f, busyboxNginx(f))...)
		app := sts.Name
		startPPMStatefulSet(ctx, t, f, sts)

		nginx, main := nginxPPM(app, execProbe("/bin/sh", "-c", "ls /")), mainPPM(app)
		createPPM(ctx, t, f, nginx)
		waitFinalizer(ctx, t, f, nginx.Name)
		pods := waitProbedPods(ctx, t, f, app, n, ppmTimeout, "healthy after ppm-nginx",
			labelIs(labelNginx, "healthy"), conditionIs(condHealthy, corev1.ConditionTrue, ""))
		for i := range pods {
			require.Empty(t, noCondition(condCheck)(&pods[i]), "pod %s before ppm-main", pods[i].Name)
		}
		waitView(ctx, t, f, nginx.Name, "every active pod with probe healthy", viewHolds(pods, "healthy"))

		// The other marker.
		createPPM(ctx, t, f, main)
		waitProbedPods(ctx, t, f, app, n, ppmTimeout, "healthy and checked",
			labelIs(labelNginx, "healthy"), conditionIs(condHealthy, corev1.ConditionTrue, ""),
			annotationIs(deletionCost, "10"), conditionIs(condCheck, corev1.ConditionTrue, ""))

		// Both probes fail.
		setProbe(ctx, t, f, nginx.Name, corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "failed /"}}})
		setProbe(ctx, t, f, main.Name, corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "failed -ef"}}})
		waitProbedPods(ctx, t, f, app, n, ppmTimeout, "both probes failed",
			labelIs(labelNginx, ""), conditionIs(condHealthy, corev1.ConditionFalse, ""),
			annotationIs(deletionCost, "-10"), conditionIs(condCheck, corev1.ConditionFalse, ""))

		// healthy succeeds again; scale down to 1.
		setProbe(ctx, t, f, nginx.Name, corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "ls /"}}})
		scaleTo(ctx, t, f, app, 1)
		after := []podWant{labelIs(labelNginx, "healthy"), conditionIs(condHealthy, corev1.ConditionTrue, ""),
			annotationIs(deletionCost, "-10"), conditionIs(condCheck, corev1.ConditionFalse, "")}
		pods = waitProbedPods(ctx, t, f, app, 1, ppmTimeout, "scaled down to 1, healthy, check failed", after...)
		t.Logf("after the scale-down: %v", uidsOf(pods))
		waitView(ctx, t, f, nginx.Name, "only the remaining pod", viewWithin(pods))
		waitView(ctx, t, f, main.Name, "only the remaining pod", viewWithin(pods))

		// Scale up.
		scaleTo(ctx, t, f, app, int32(n))
		waitPPMStatefulSet(ctx, t, f, app, int32(n))
		pods = waitProbedPods(ctx, t, f, app, n, ppmTimeout, "scaled up, healthy, check failed", after...)
		waitView(ctx, t, f, nginx.Name, "only the active pods", viewWithin(pods))
		waitView(ctx, t, f, main.Name, "only the active pods", viewWithin(pods))

		deleteMarkersAndWait(ctx, t, f, nginx.Name, main.Name)
	})

	// OpenKruise's probe image (openkruise/minecraft-demo:probe-v0) has a
	// probe.sh that fails first, then succeeds printing "data", then
	// succeeds printing "gate", on its own clock. Here probe.sh (written by
	// the busybox container at start; busybox has sh, not bash) follows a
	// stage file that the test writes through exec.
	t.Run("pod probe marker test2", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		requireShoal(ctx, t, f)
		n := len(requireSchedulableNodes(ctx, t, f, 1))

		sts := ppmStatefulSet(int32(n), corev1.Container{
			Name: "minecraft", Image: f.Image("busybox:latest"), Command: []string{"sh", "-c", `cat >/probe.sh <<'EOF'
#!/bin/sh
case "$(cat /tmp/probe-stage 2>/dev/null)" in
data) echo data ;;
gate) echo gate ;;
*) echo "not started" >&2; exit 1 ;;
esac
EOF
exec sleep 10000000`},
		})
		app := sts.Name
		stage := func(pods []corev1.Pod, s string) {
			t.Helper()
			for _, p := range pods {
				_, stderr, err := f.ExecInPod(ctx, p.Name, "minecraft", []string{"sh", "-c", "echo " + s + " >/tmp/probe-stage"})
				require.NoError(t, err, "pod %s: stderr %q", p.Name, stderr)
			}
		}
		startPPMStatefulSet(ctx, t, f, sts)

		createPPM(ctx, t, f, newPPM("ppm-minecraft", app, v1alpha1.PodContainerProbe{
			Name: "healthy", ContainerName: "minecraft", Probe: execProbe("sh", "/probe.sh"), PodConditionType: condHealthy,
		}))

		// Firstly, probe.sh returns false (its stderr in the message shows
		// it ran: an Unknown state, no result yet, is False too).
		pods := waitProbedPods(ctx, t, f, app, n, ppmTimeout, "probe.sh false", conditionIs(condHealthy, corev1.ConditionFalse, "not started"))
		// Secondly, probe.sh returns true and says data.
		stage(pods, "data")
		waitProbedPods(ctx, t, f, app, n, ppmTimeout, "probe.sh true with data", conditionIs(condHealthy, corev1.ConditionTrue, "data"))
		// Thirdly, probe.sh returns true and says gate.
		stage(pods, "gate")
		waitProbedPods(ctx, t, f, app, n, ppmTimeout, "probe.sh true with gate", conditionIs(condHealthy, corev1.ConditionTrue, "gate"))
	})

	t.Run("pod probe marker tcpCheck test", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		requireShoal(ctx, t, f)
		n := len(requireSchedulableNodes(ctx, t, f, 1))

		sts := ppmStatefulSet(int32(n), nginxAndMain(f, testserverNginx(f))...)
		app := sts.Name
		startPPMStatefulSet(ctx, t, f, sts)

		tcp := func(port int32) corev1.ProbeHandler {
			return corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}
		}
		nginx := nginxPPM(app, v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: tcp(80)}})
		createPPM(ctx, t, f, nginx)
		waitFinalizer(ctx, t, f, nginx.Name)
		pods := waitProbedPods(ctx, t, f, app, n, ppmTimeout, "port 80 open",
			labelIs(labelNginx, "healthy"), conditionIs(condHealthy, corev1.ConditionTrue, ""))
		for i := range pods {
			require.Empty(t, noCondition(condCheck)(&pods[i]), "pod %s", pods[i].Name)
		}
		waitView(ctx, t, f, nginx.Name, "every active pod with probe healthy", viewHolds(pods, "healthy"))

		// Port 80 -> 8081, where nothing listens.
		setProbe(ctx, t, f, nginx.Name, tcp(8081))
		waitProbedPods(ctx, t, f, app, n, ppmTimeout, "port 8081 closed",
			labelIs(labelNginx, ""), conditionIs(condHealthy, corev1.ConditionFalse, ""))

		// Back to 80; scale down to 1.
		setProbe(ctx, t, f, nginx.Name, tcp(80))
		scaleTo(ctx, t, f, app, 1)
		healthy := []podWant{labelIs(labelNginx, "healthy"), conditionIs(condHealthy, corev1.ConditionTrue, "")}
		pods = waitProbedPods(ctx, t, f, app, 1, ppmTimeout, "scaled down to 1, port 80 open", healthy...)
		waitView(ctx, t, f, nginx.Name, "only the remaining pod", viewWithin(pods))

		// Scale up.
		scaleTo(ctx, t, f, app, int32(n))
		waitPPMStatefulSet(ctx, t, f, app, int32(n))
		pods = waitProbedPods(ctx, t, f, app, n, ppmTimeout, "scaled up, port 80 open", healthy...)
		waitView(ctx, t, f, nginx.Name, "only the active pods", viewWithin(pods))

		deleteMarkersAndWait(ctx, t, f, nginx.Name)
	})

	t.Run("pod probe marker httpCheck test", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		requireShoal(ctx, t, f)
		n := len(requireSchedulableNodes(ctx, t, f, 1))

		sts := ppmStatefulSet(int32(n), nginxAndMain(f, testserverNginx(f))...)
		app := sts.Name
		startPPMStatefulSet(ctx, t, f, sts)

		nginx := nginxPPM(app, v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/", Scheme: corev1.URISchemeHTTP, Port: intstr.FromInt32(80)},
		}}})
		createPPM(ctx, t, f, nginx)
		waitFinalizer(ctx, t, f, nginx.Name)
		pods := waitProbedPods(ctx, t, f, app, n, ppmTimeout, "GET / answered",
			labelIs(labelNginx, "healthy"), conditionIs(condHealthy, corev1.ConditionTrue, ""))
		for i := range pods {
			require.Empty(t, noCondition(condCheck)(&pods[i]), "pod %s", pods[i].Name)
		}
		waitView(ctx, t, f, nginx.Name, "every active pod with probe healthy", viewHolds(pods, "healthy"))
	})
}

// gameServerScript is the seed's /home/game/idle.sh: it exits 0 while
// /tmp/match says idle, and otherwise exits 1 saying the match on stderr.
const gameServerScript = `#!/bin/sh
m=$(cat /tmp/match 2>/dev/null)
[ "$m" = idle ] && exit 0
echo "in match: $m" >&2
exit 1
`

// TestPodProbeMarkerSeedGameServer applies seed 000's game-server-probe
// (testdata/seeds/podprobemarker-game-server.yaml) to a game server whose
// idle.sh follows a file the test writes, and checks that the pod's
// gameserver-idle label, its pod-deletion-cost and its game.io/idle
// condition follow idle.sh's exit code, the condition's message carrying
// idle.sh's stderr when it fails, as the seed says.
func TestPodProbeMarkerSeedGameServer(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)

	var ppm v1alpha1.PodProbeMarker
	readSeed(t, f, "podprobemarker-game-server.yaml", &ppm)
	createPPM(ctx, t, f, &ppm)

	const app = "game-server"
	labels := map[string]string{"app": app}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "game-server", Image: f.Image("busybox:latest"),
						Command: []string{"sh", "-c", "mkdir -p /home/game && cat >/home/game/idle.sh <<'EOF'\n" + gameServerScript +
							"EOF\nchmod +x /home/game/idle.sh && echo busy >/tmp/match && exec sleep 10000000"},
					}},
				},
			},
		},
	}
	_, err := f.Kube.AppsV1().Deployments(f.Namespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.WaitForDeploymentAvailable(ctx, f.Namespace, app, podStartTimeout)
	require.NoError(t, err)

	busy := func(match string) []podWant {
		return []podWant{labelIs("gameserver-idle", "false"), annotationIs(deletionCost, "10"),
			conditionIs("game.io/idle", corev1.ConditionFalse, "in match: "+match)}
	}
	idle := []podWant{labelIs("gameserver-idle", "true"), annotationIs(deletionCost, "-10"),
		conditionIs("game.io/idle", corev1.ConditionTrue, ""),
		func(p *corev1.Pod) string {
			// The seed shows an empty message for a success: idle.sh
			// prints nothing then.
			if c := podstatus.Condition(p, "game.io/idle"); c != nil && c.Message != "" {
				return fmt.Sprintf("condition game.io/idle message %q (want empty)", c.Message)
			}
			return ""
		}}
	setMatch := func(pod, match string) {
		t.Helper()
		_, stderr, err := f.ExecInPod(ctx, pod, "game-server", []string{"sh", "-c", "echo " + match + " >/tmp/match"})
		require.NoError(t, err, "stderr %q", stderr)
	}
	probeState := func(state string) func(*probeview.MarkerPods) string {
		return func(v *probeview.MarkerPods) string {
			if len(v.Pods) != 1 || len(v.Pods[0].Probes) != 1 || v.Pods[0].Probes[0].Name != "Idle" || v.Pods[0].Probes[0].State != state {
				return fmt.Sprintf("%+v (want one pod with probe Idle %s)", v.Pods, state)
			}
			return ""
		}
	}

	start := time.Now()
	pods := waitProbedPods(ctx, t, f, app, 1, gameServerFlipTimeout, "busy: idle.sh fails", busy("busy")...)
	pod := pods[0].Name
	waitView(ctx, t, f, ppm.Name, "Idle Failed", probeState(probeview.StateFailed))
	t.Logf("%s shows the failed probe %v after the Deployment is available", pod, time.Since(start).Round(time.Second))

	start = time.Now()
	setMatch(pod, "idle")
	waitProbedPods(ctx, t, f, app, 1, gameServerFlipTimeout, "idle: idle.sh succeeds", idle...)
	waitView(ctx, t, f, ppm.Name, "Idle Succeeded", probeState(probeview.StateSucceeded))
	t.Logf("idle shown after %v", time.Since(start).Round(time.Second))

	start = time.Now()
	setMatch(pod, "round-2")
	waitProbedPods(ctx, t, f, app, 1, gameServerFlipTimeout, "in a match again: idle.sh fails", busy("round-2")...)
	t.Logf("busy again shown after %v", time.Since(start).Round(time.Second))
}

// scaleCoordinator sets the coordinator Deployment's replicas through its
// scale subresource, retrying on conflicts.
func scaleCoordinator(ctx context.Context, f *framework.Framework, n int32) error {
	deployments := f.Kube.AppsV1().Deployments(framework.ShoalNamespace)
	return framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		s, err := deployments.GetScale(ctx, coordinatorDeployment, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if s.Spec.Replicas == n {
			return true, nil
		}
		s.Spec.Replicas = n
		_, err = deployments.UpdateScale(ctx, coordinatorDeployment, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// stopCoordinator scales the coordinator to 0 and waits until every
// coordinator pod is gone.
func stopCoordinator(ctx context.Context, t *testing.T, f *framework.Framework) {
	t.Helper()
	require.NoError(t, scaleCoordinator(ctx, f, 0))
	err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := f.Kube.CoreV1().Pods(framework.ShoalNamespace).List(ctx, metav1.ListOptions{LabelSelector: framework.CoordinatorSelector})
		return err == nil && len(pods.Items) == 0, err
	})
	require.NoError(t, err, "every coordinator pod gone after the scale to 0")
}

// startCoordinator scales the coordinator back to replicas and waits until
// that many of its pods are Ready.
func startCoordinator(ctx context.Context, f *framework.Framework, replicas int32) error {
	if err := scaleCoordinator(ctx, f, replicas); err != nil {
		return fmt.Errorf("scale %s back to %d: %w", coordinatorDeployment, replicas, err)
	}
	_, err := f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, int(replicas), 2*time.Minute)
	return err
}

// agentStateChanges reads the agent's count of probe state changes to
// state; found is false when the agent exports no such metric at all.
func agentStateChanges(ctx context.Context, agent corev1.Pod, state string) (v float64, found bool, err error) {
	m, err := framework.Scrape(ctx, framework.AgentURL(agent))
	if err != nil {
		return 0, false, err
	}
	if m[agentProbeStateChanges] == nil {
		return 0, false, nil
	}
	v, _ = m.Value(agentProbeStateChanges, map[string]string{"state": state})
	return v, true, nil
}

// TestPodProbeMarkerWithoutCoordinator: probes run on the nodes. With the
// coordinator scaled to 0, a probed pod's agent goes on probing and sees
// the probe fail; nothing writes the pod meanwhile. Once the coordinator
// is back, the pod shows the failure within coordinatorCatchUp of the
// first coordinator pod being Ready.
func TestPodProbeMarkerWithoutCoordinator(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)

	const cond = "e2e.shoal.io/probed"
	pod := runBusybox(ctx, t, f, "probed", "", "echo ok >/tmp/state && exec sleep 10000000")
	ppm := newPPM("probed", "probed", v1alpha1.PodContainerProbe{
		Name: "state", ContainerName: "busybox", PodConditionType: cond,
		Probe: execProbe("/bin/sh", "-c", `s=$(cat /tmp/state); [ "$s" = ok ] || { echo "state: $s" >&2; exit 1; }`),
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
			{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"probed": "ok"}},
			{State: v1alpha1.ProbeFailed, Labels: map[string]string{"probed": "failed"}},
		},
	})
	ppm.Spec.Probes[0].Probe.PeriodSeconds = 1
	createPPM(ctx, t, f, ppm)
	succeeded := []podWant{labelIs("probed", "ok"), conditionIs(cond, corev1.ConditionTrue, "")}
	failed := []podWant{labelIs("probed", "failed"), conditionIs(cond, corev1.ConditionFalse, "state: busy")}
	waitProbedPods(ctx, t, f, "probed", 1, ppmTimeout, "probe succeeded", succeeded...)
	waitView(ctx, t, f, ppm.Name, "probe Succeeded", func(v *probeview.MarkerPods) string {
		if len(v.Pods) != 1 || v.Pods[0].UID != string(pod.UID) || len(v.Pods[0].Probes) != 1 ||
			v.Pods[0].Probes[0].State != probeview.StateSucceeded {
			return fmt.Sprintf("%+v", v.Pods)
		}
		return ""
	})

	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)
	agent, ok := agents[pod.Spec.NodeName]
	require.True(t, ok, "no agent on %s", pod.Spec.NodeName)
	failedBefore, found, err := agentStateChanges(ctx, agent, probeview.StateFailed)
	require.NoError(t, err)
	require.True(t, found, "the agent %s exports no %s (its Succeeded change is counted by now): cannot tell when it has probed",
		agent.Name, agentProbeStateChanges)

	// Scale the coordinator to 0; put it back however the test ends,
	// before the namespace is deleted (the deletion-protection webhook,
	// failurePolicy Fail, needs the coordinator for that).
	scale, err := f.Kube.AppsV1().Deployments(framework.ShoalNamespace).GetScale(ctx, coordinatorDeployment, metav1.GetOptions{})
	require.NoError(t, err)
	replicas := scale.Spec.Replicas
	require.Positive(t, replicas, "the coordinator runs")
	restored := false
	t.Cleanup(func() {
		if restored {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := startCoordinator(ctx, f, replicas); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	stopCoordinator(ctx, t, f)
	t.Logf("coordinator scaled from %d to 0", replicas)

	// Flip the probe's result; the agent sees it (its count of changes
	// to Failed goes up) with no coordinator to tell.
	flipped := time.Now()
	_, stderr, err := execBusybox(ctx, f, pod.Name, "sh", "-c", "echo busy >/tmp/state")
	require.NoError(t, err, "stderr %q", stderr)
	var failedNow float64
	err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		v, _, err := agentStateChanges(ctx, agent, probeview.StateFailed)
		if err != nil {
			return false, nil // a scrape that failed: try again
		}
		failedNow = v
		return v > failedBefore, nil
	})
	require.NoError(t, err, "the agent %s should count the probe's change to Failed (%s{state=Failed} stayed at %v)",
		agent.Name, agentProbeStateChanges, failedBefore)
	t.Logf("the agent on %s saw the failure %v after the flip (%s{state=Failed} %v -> %v)",
		pod.Spec.NodeName, time.Since(flipped).Round(time.Millisecond), agentProbeStateChanges, failedBefore, failedNow)
	for _, d := range succeeded {
		require.Empty(t, d(getPod(ctx, t, f, pod.Name)), "nothing writes the pod while there is no coordinator")
	}

	// Bring the coordinator back and time the pod's catch-up from the
	// first coordinator pod being Ready. The polls are finer than
	// framework.PollInterval for the measurement.
	require.NoError(t, scaleCoordinator(ctx, f, replicas))
	scaledUp := time.Now()
	var readyAt, leaderAt, shownAt time.Time
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		now := time.Now()
		if readyAt.IsZero() {
			if pods, err := f.Kube.CoreV1().Pods(framework.ShoalNamespace).List(ctx, metav1.ListOptions{LabelSelector: framework.CoordinatorSelector}); err == nil {
				for i := range pods.Items {
					if pods.Items[i].DeletionTimestamp == nil && framework.IsPodReady(&pods.Items[i]) {
						readyAt = now
					}
				}
			}
		}
		if leaderAt.IsZero() {
			if l, err := f.CoordinatorLeader(ctx); err == nil && l.DeletionTimestamp == nil {
				leaderAt = now
			}
		}
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var diffs []string
		for _, want := range failed {
			if d := want(p); d != "" {
				diffs = append(diffs, d)
			}
		}
		if len(diffs) == 0 {
			shownAt = now
			return true, nil
		}
		last = strings.Join(diffs, "; ")
		if !readyAt.IsZero() && now.Sub(readyAt) > coordinatorCatchUp {
			return false, fmt.Errorf("not shown %v after the coordinator was Ready", now.Sub(readyAt).Round(time.Millisecond))
		}
		return false, nil
	})
	since := func(at time.Time) string {
		if at.IsZero() {
			return "never"
		}
		return at.Sub(scaledUp).Round(time.Millisecond).String()
	}
	t.Logf("after the scale-up: a coordinator pod Ready at %s, a leader at %s, the pod showing the failure at %s",
		since(readyAt), since(leaderAt), since(shownAt))
	require.NoError(t, err, "pod %s should show the failure within %v of the coordinator being Ready; last: %s", pod.Name, coordinatorCatchUp, last)
	if readyAt.IsZero() {
		// The kubelet reports Ready up to a readiness period late: a
		// leader can patch the pod before then.
		t.Logf("the pod showed the agent's result before a coordinator pod was seen Ready")
	} else {
		delay := shownAt.Sub(readyAt)
		t.Logf("the pod showed the agent's result %v after the coordinator was Ready", delay.Round(time.Millisecond))
		require.LessOrEqual(t, delay, coordinatorCatchUp)
	}
	waitView(ctx, t, f, ppm.Name, "probe Failed", func(v *probeview.MarkerPods) string {
		if len(v.Pods) != 1 || len(v.Pods[0].Probes) != 1 || v.Pods[0].Probes[0].State != probeview.StateFailed ||
			!strings.Contains(v.Pods[0].Probes[0].Message, "state: busy") {
			return fmt.Sprintf("%+v", v.Pods)
		}
		return ""
	})

	_, err = f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.CoordinatorSelector, int(replicas), 2*time.Minute)
	require.NoError(t, err, "every coordinator replica back (the warm standby, for the next tests)")
	restored = true
}
