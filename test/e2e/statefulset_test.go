//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The Advanced StatefulSet tests port OpenKruise's StatefulSet e2e cases
// (test/e2e/apps/v1beta1/statefulset.go) with the same assertions, on
// pods that start in seconds: 1 to 3 replicas instead of OpenKruise's 3
// to 10 where the case allows, a one-second grace period, and 2-minute
// bounds per step instead of 10 minutes. OpenKruise's nginx pods, whose
// readiness is broken by moving index.html away, are busybox httpd pods
// here whose readiness file is moved the same way (serveReadyFile).

const (
	// statefulSetTimeout bounds one StatefulSet step.
	statefulSetTimeout = 2 * time.Minute
	// haltedFor is how long a halted scale must stay halted (OpenKruise
	// watches 10 s; a controller that does not halt acts within a second
	// of observing the change).
	haltedFor = 5 * time.Second
)

// newStatefulSet is an Advanced StatefulSet of replicas testservers
// (container "app", HTTP readiness on /healthz every second) selecting
// app=<name>, governed by the headless Service of the same name that
// createStatefulSet makes, OrderedReady, with a one-second grace period.
func newStatefulSet(f *framework.Framework, name string, replicas int32) *v1beta1.StatefulSet {
	return &v1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			ServiceName: name,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "app", Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"},
						ReadinessProbe: httpReadiness("/healthz"),
					}},
				},
			},
		},
	}
}

// httpReadiness probes GET path on port 8080 every second; one failure
// makes the pod unready (OpenKruise's httpProbe and pauseProbe).
func httpReadiness(path string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}},
		PeriodSeconds:    1,
		SuccessThreshold: 1,
		FailureThreshold: 1,
	}
}

// serveFiles makes the set's container a busybox httpd (container
// "busybox", so execBusybox reaches it) serving dir on 8080 after running
// setup, ready while GET readyPath finds its file.
func serveFiles(f *framework.Framework, sts *v1beta1.StatefulSet, setup, dir, readyPath string) {
	c := &sts.Spec.Template.Spec.Containers[0]
	c.Name, c.Image, c.Args = "busybox", f.Image("busybox:latest"), nil
	c.Command = []string{"sh", "-c", setup + "exec httpd -f -p 8080 -h " + dir}
	c.ReadinessProbe = httpReadiness(readyPath)
}

// serveReadyFile makes the set's pods busybox httpd servers that are ready
// while /www/ready exists: breakReadiness and restoreReadiness move it, as
// OpenKruise's BreakHTTPProbe and RestoreHTTPProbe move nginx's
// index.html. A new pod starts with the file.
func serveReadyFile(f *framework.Framework, sts *v1beta1.StatefulSet) {
	serveFiles(f, sts, "mkdir -p /www && echo ok >/www/ready && ", "/www", "/ready")
}

// withDataClaim adds a 1Gi ReadWriteOnce volumeClaimTemplate claim (the
// cluster's default StorageClass binds it) mounted at path in the first
// container.
func withDataClaim(sts *v1beta1.StatefulSet, claim, path string) {
	sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})
	c := &sts.Spec.Template.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: claim, MountPath: path})
}

// pauseNewPods gives the set a PVC "datadir" on /data and pods that stay
// unready until /data/statefulset-continue exists (OpenKruise's
// PauseNewPods); saturate creates the file pod by pod. The file is on the
// PVC, so a pod recreated on the same claim is ready at once.
func pauseNewPods(f *framework.Framework, sts *v1beta1.StatefulSet) {
	serveFiles(f, sts, "", "/data", "/statefulset-continue")
	withDataClaim(sts, "datadir", "/data")
}

// createStatefulSet creates the headless Service the set names (selecting
// its pods, port 80 to 8080) and then the set, and returns the set as
// created.
func createStatefulSet(ctx context.Context, t *testing.T, f *framework.Framework, sts *v1beta1.StatefulSet) *v1beta1.StatefulSet {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: sts.Spec.ServiceName},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  maps.Clone(sts.Spec.Selector.MatchLabels),
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	_, err := f.Kube.CoreV1().Services(f.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err, "create the headless Service %s", svc.Name)
	created, err := f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Create(ctx, sts, metav1.CreateOptions{})
	require.NoError(t, err, "create StatefulSet %s", sts.Name)
	return created
}

// waitStatefulSet polls the StatefulSet until its status is of its
// generation and done says so.
func waitStatefulSet(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, done func(*v1beta1.StatefulSet) bool) *v1beta1.StatefulSet {
	t.Helper()
	return waitObject(ctx, t, f.Shoal.AppsV1beta1().StatefulSets(f.Namespace), statefulSetTimeout, name, what,
		func(s *v1beta1.StatefulSet) bool { return s.Status.ObservedGeneration == s.Generation && done(s) },
		func(s *v1beta1.StatefulSet) any { return s.Status })
}

// observed accepts any status: waitStatefulSet(..., observed) waits until
// the controller has seen the latest spec.
func observed(*v1beta1.StatefulSet) bool { return true }

// settledSet: n pods, all ready, available, updated and at the current
// revision, which is the update revision.
func settledSet(n int32) func(*v1beta1.StatefulSet) bool {
	return func(s *v1beta1.StatefulSet) bool {
		st := s.Status
		return st.Replicas == n && st.ReadyReplicas == n && st.AvailableReplicas == n && st.CurrentReplicas == n &&
			st.UpdatedReplicas == n && st.UpdatedReadyReplicas == n && st.CurrentRevision != "" && st.CurrentRevision == st.UpdateRevision
	}
}

// readyReplicas: status.readyReplicas is n (OpenKruise's
// WaitForStatusReadyReplicas).
func readyReplicas(n int32) func(*v1beta1.StatefulSet) bool {
	return func(s *v1beta1.StatefulSet) bool { return s.Status.ReadyReplicas == n }
}

// newRevision: the spec change made an update revision other than the
// current one.
func newRevision(s *v1beta1.StatefulSet) bool {
	return s.Status.UpdateRevision != "" && s.Status.UpdateRevision != s.Status.CurrentRevision
}

// updateStatefulSet reads, changes and writes the StatefulSet, retrying on
// a conflict with the controller's status writes.
func updateStatefulSet(ctx context.Context, t *testing.T, f *framework.Framework, name string, change func(*v1beta1.StatefulSet)) {
	t.Helper()
	updateObject(ctx, t, f.Shoal.AppsV1beta1().StatefulSets(f.Namespace), name, change)
}

// scaleTo sets spec.replicas.
func scaleTo(ctx context.Context, t *testing.T, f *framework.Framework, name string, n int32) {
	t.Helper()
	updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) { s.Spec.Replicas = ptr.To(n) })
}

// ordinalOf is the ordinal in a pod's name <set>-<ordinal>, -1 if none.
func ordinalOf(p *corev1.Pod) int {
	n, err := strconv.Atoi(p.Name[strings.LastIndex(p.Name, "-")+1:])
	if err != nil {
		return -1
	}
	return n
}

// revisionOf is the pod's controller-revision-hash label.
func revisionOf(p *corev1.Pod) string {
	return p.Labels[wellknown.LabelControllerRevisionHash]
}

// listSetPods lists the pods labelled app=<name> (the set's selector),
// with or without those being deleted, sorted by ordinal.
func listSetPods(ctx context.Context, f *framework.Framework, name string, withTerminating bool) ([]corev1.Pod, error) {
	list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if withTerminating || p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return ordinalOf(&a) - ordinalOf(&b) })
	return out, nil
}

// setPods lists the StatefulSet's pods that are not being deleted, by
// ordinal.
func setPods(ctx context.Context, t *testing.T, f *framework.Framework, name string) []corev1.Pod {
	t.Helper()
	pods, err := listSetPods(ctx, f, name, false)
	require.NoError(t, err)
	return pods
}

// podsString summarises pods for failure messages.
func podsString(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range pods {
		s := fmt.Sprintf("%s(%s, rev %s, ready %v", p.Name, p.Status.Phase, revisionOf(&p), framework.IsPodReady(&p))
		if p.DeletionTimestamp != nil {
			s += ", terminating"
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, " ")
}

// waitSetPods polls the StatefulSet's pods that are not being deleted
// (sorted by ordinal) until done says so, and returns them.
func waitSetPods(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, done func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var last []corev1.Pod
	err := framework.WaitFor(ctx, statefulSetTimeout, func(ctx context.Context) (bool, error) {
		pods, err := listSetPods(ctx, f, name, false)
		if err != nil {
			return false, err
		}
		last = pods
		return done(pods), nil
	})
	require.NoError(t, err, "StatefulSet %s: %s; pods: %s", name, what, podsString(last))
	return last
}

// waitNoPods waits until the StatefulSet has no pod left, not even one
// being deleted.
func waitNoPods(ctx context.Context, t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	var last []corev1.Pod
	err := framework.WaitFor(ctx, statefulSetTimeout, func(ctx context.Context) (bool, error) {
		pods, err := listSetPods(ctx, f, name, true)
		last = pods
		return err == nil && len(pods) == 0, err
	})
	require.NoError(t, err, "StatefulSet %s: every pod gone; pods: %s", name, podsString(last))
}

// runningReady: exactly n pods, all Running, those of the first ready
// ordinals Ready and the others not (OpenKruise's WaitForRunning).
func runningReady(n, ready int) func([]corev1.Pod) bool {
	return func(pods []corev1.Pod) bool {
		if len(pods) != n {
			return false
		}
		for i := range pods {
			if pods[i].Status.Phase != corev1.PodRunning || framework.IsPodReady(&pods[i]) != (i < ready) {
				return false
			}
		}
		return true
	}
}

// readyExcept: exactly n pods, all Running, and Ready but for those of
// the unready ordinals.
func readyExcept(n int, unready ...int) func([]corev1.Pod) bool {
	return func(pods []corev1.Pod) bool {
		if len(pods) != n {
			return false
		}
		for i := range pods {
			if pods[i].Status.Phase != corev1.PodRunning || framework.IsPodReady(&pods[i]) == slices.Contains(unready, ordinalOf(&pods[i])) {
				return false
			}
		}
		return true
	}
}

// podNames: the pods are exactly names, in ordinal order.
func podNames(names ...string) func([]corev1.Pod) bool {
	return func(pods []corev1.Pod) bool {
		var have []string
		for _, p := range pods {
			have = append(have, p.Name)
		}
		return slices.Equal(names, have)
	}
}

// waitSetPod polls pod name until done says so.
func waitSetPod(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return waitObject(ctx, t, f.Kube.CoreV1().Pods(f.Namespace), statefulSetTimeout, name, what, done,
		func(p *corev1.Pod) any {
			return fmt.Sprintf("labels %v, owners %v, phase %s", p.Labels, p.OwnerReferences, p.Status.Phase)
		})
}

// waitPodGone waits until pod name no longer exists.
func waitPodGone(ctx context.Context, t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	err := framework.WaitFor(ctx, statefulSetTimeout, func(ctx context.Context) (bool, error) {
		_, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "pod %s is deleted", name)
}

// shInPods runs script with sh in the busybox container of each pod
// (OpenKruise's ExecInStatefulPods); any failure fails t.
func shInPods(ctx context.Context, t *testing.T, f *framework.Framework, pods []corev1.Pod, script string) {
	t.Helper()
	for _, p := range pods {
		stdout, stderr, err := execBusybox(ctx, f, p.Name, "sh", "-c", script)
		require.NoError(t, err, "%q in pod %s: stdout %q, stderr %q", script, p.Name, stdout, stderr)
	}
}

// breakReadiness moves the ready file of serveReadyFile's pods away, so
// their readiness probe fails (idempotent).
func breakReadiness(ctx context.Context, t *testing.T, f *framework.Framework, pods ...corev1.Pod) {
	t.Helper()
	shInPods(ctx, t, f, pods, "mv /www/ready /tmp/ready || true")
}

// restoreReadiness moves the ready file back (idempotent).
func restoreReadiness(ctx context.Context, t *testing.T, f *framework.Framework, pods ...corev1.Pod) {
	t.Helper()
	shInPods(ctx, t, f, pods, "mv /tmp/ready /www/ready || true")
}

// saturate brings up a set of pauseNewPods pods as OpenKruise's Saturate
// does: for each ordinal i it waits until exactly i+1 pods run with the
// first i ready, failing at once if more exist (OrderedReady creates a pod
// only after its predecessor is ready), then lets pod i become ready.
func saturate(ctx context.Context, t *testing.T, f *framework.Framework, name string, n int) []corev1.Pod {
	t.Helper()
	for i := range n {
		var pods []corev1.Pod
		err := framework.WaitFor(ctx, statefulSetTimeout, func(ctx context.Context) (bool, error) {
			var err error
			if pods, err = listSetPods(ctx, f, name, false); err != nil {
				return false, err
			}
			if len(pods) > i+1 {
				return false, fmt.Errorf("%d pods while pod %d is not ready yet: %s", len(pods), i, podsString(pods))
			}
			return runningReady(i+1, i)(pods), nil
		})
		require.NoError(t, err, "StatefulSet %s: %d running, the first %d ready; pods: %s", name, i+1, i, podsString(pods))
		shInPods(ctx, t, f, pods[i:i+1], "echo ok >/data/statefulset-continue && sync")
	}
	return waitSetPods(ctx, t, f, name, fmt.Sprintf("%d running and ready", n), runningReady(n, n))
}

// requireHolds polls for d and fails t at the first poll where ok is
// false: a state that must last (a halted scale, a held pod), checked
// without sleeping. ok also describes what it saw.
func requireHolds(ctx context.Context, t *testing.T, d time.Duration, what string, ok func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	start := time.Now()
	err := framework.WaitFor(ctx, d+statefulSetTimeout, func(ctx context.Context) (bool, error) {
		good, state, err := ok(ctx)
		if err != nil {
			return false, err
		}
		if !good {
			return false, fmt.Errorf("broken after %v: %s", time.Since(start).Round(time.Millisecond), state)
		}
		return time.Since(start) >= d, nil
	})
	require.NoError(t, err, "%s for %v", what, d)
}

// podCountIs is a requireHolds condition: the set has n pods not being
// deleted.
func podCountIs(f *framework.Framework, name string, n int) func(ctx context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		pods, err := listSetPods(ctx, f, name, false)
		return len(pods) == n, podsString(pods), err
	}
}

// podListRV is the resourceVersion of a list of the pods of selector: a
// watch from it sees every pod event after this moment.
func podListRV(ctx context.Context, t *testing.T, f *framework.Framework, selector string) string {
	t.Helper()
	list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	return list.ResourceVersion
}

// requireEventOrder watches the pods of selector from resourceVersion rv
// and requires the pods of events of type typ, in the order of their first
// such event, to be want (OpenKruise's watch on Added events when scaling
// up, on Deleted events when scaling down). It waits until as many pods as
// want names have had such an event.
func requireEventOrder(ctx context.Context, t *testing.T, f *framework.Framework, selector, rv string, typ watch.EventType, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, statefulSetTimeout)
	defer cancel()
	var order []string
	for len(order) < len(want) {
		w, err := f.Kube.CoreV1().Pods(f.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv})
		require.NoError(t, err, "watch pods %q from %s", selector, rv)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				w.Stop()
				require.Failf(t, "watch error", "pods %q: %v", selector, apierrors.FromObject(ev.Object))
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if ev.Type == typ && !slices.Contains(order, p.Name) {
				order = append(order, p.Name)
			}
			if len(order) >= len(want) {
				break
			}
		}
		w.Stop()
		require.NoError(t, ctx.Err(), "%s events of %d pods %q; seen %v", typ, len(want), selector, order)
	}
	require.Equal(t, want, order, "%s events in this order", typ)
}

// partitionOf is the set's rollingUpdate.partition, 0 if unset.
func partitionOf(s *v1beta1.StatefulSet) int {
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return int(*ru.Partition)
	}
	return 0
}

// setPartition sets rollingUpdate.partition, keeping the rest of
// rollingUpdate.
func setPartition(ctx context.Context, t *testing.T, f *framework.Framework, name string, partition int32) {
	t.Helper()
	updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{}
		}
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(partition)
	})
}

// setImage sets the image of the first container of the template.
func setImage(ctx context.Context, t *testing.T, f *framework.Framework, name, image string) {
	t.Helper()
	updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = image })
}

// waitPartitioned waits, as OpenKruise's WaitForPartitionedRollingUpdate
// and WaitForRollingUpdate, until the set has observed its spec, all its
// replicas run and are ready, the pods of the ordinals from the partition
// up are at the update revision and, with partition 0, the update
// revision is current. observe, if set, sees the pods at every poll and
// ends the wait with its error.
func waitPartitioned(ctx context.Context, t *testing.T, f *framework.Framework, name string, observe func([]corev1.Pod) error) (*v1beta1.StatefulSet, []corev1.Pod) {
	t.Helper()
	var s *v1beta1.StatefulSet
	var pods []corev1.Pod
	err := framework.WaitFor(ctx, statefulSetTimeout, func(ctx context.Context) (bool, error) {
		var err error
		if s, err = f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		if pods, err = listSetPods(ctx, f, name, false); err != nil {
			return false, err
		}
		if observe != nil {
			if err := observe(pods); err != nil {
				return false, err
			}
		}
		replicas := int(ptr.Deref(s.Spec.Replicas, 1))
		if s.Status.ObservedGeneration != s.Generation || !runningReady(replicas, replicas)(pods) {
			return false, nil
		}
		for i := max(partitionOf(s), 0); i < replicas; i++ {
			if revisionOf(&pods[i]) != s.Status.UpdateRevision {
				return false, nil
			}
		}
		return partitionOf(s) > 0 || s.Status.CurrentRevision == s.Status.UpdateRevision, nil
	})
	var status any = "none read"
	if s != nil {
		status = s.Status
	}
	require.NoError(t, err, "StatefulSet %s: the update done as far as the partition; status %+v; pods: %s", name, status, podsString(pods))
	return s, pods
}

// requirePartitioned checks OpenKruise's assertions after a partitioned
// update: pods below the partition keep oldImage and the current
// revision, the others run newImage at the update revision.
func requirePartitioned(t *testing.T, s *v1beta1.StatefulSet, pods []corev1.Pod, oldImage, newImage string) {
	t.Helper()
	for i := range pods {
		p := &pods[i]
		if i < partitionOf(s) {
			require.Equal(t, oldImage, p.Spec.Containers[0].Image, "pod %s below partition %d keeps the image", p.Name, partitionOf(s))
			require.Equal(t, s.Status.CurrentRevision, revisionOf(p), "pod %s below partition %d stays at the current revision", p.Name, partitionOf(s))
		} else {
			require.Equal(t, newImage, p.Spec.Containers[0].Image, "pod %s from partition %d up runs the new image", p.Name, partitionOf(s))
			require.Equal(t, s.Status.UpdateRevision, revisionOf(p), "pod %s from partition %d up is at the update revision", p.Name, partitionOf(s))
		}
	}
}

// requireAllAt checks that every pod is at revision rev and, if image is
// set, runs it.
func requireAllAt(t *testing.T, pods []corev1.Pod, rev, image string) {
	t.Helper()
	for i := range pods {
		require.Equal(t, rev, revisionOf(&pods[i]), "pod %s revision", pods[i].Name)
		if image != "" {
			require.Equal(t, image, pods[i].Spec.Containers[0].Image, "pod %s image", pods[i].Name)
		}
	}
}

// deletePodsAndWait deletes the set's pods of ordinals at once without
// grace (OpenKruise's DeleteStatefulPodAtIndex) and waits until the set
// runs replicas ready pods again, those of ordinals new ones.
func deletePodsAndWait(ctx context.Context, t *testing.T, f *framework.Framework, name string, replicas int, ordinals ...int) []corev1.Pod {
	t.Helper()
	old := map[string]types.UID{}
	for _, o := range ordinals {
		pod := fmt.Sprintf("%s-%d", name, o)
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod, metav1.GetOptions{})
		require.NoError(t, err)
		old[pod] = p.UID
		require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	return waitSetPods(ctx, t, f, name, fmt.Sprintf("pods %v recreated, %d running and ready", ordinals, replicas), func(pods []corev1.Pod) bool {
		if !runningReady(replicas, replicas)(pods) {
			return false
		}
		for _, p := range pods {
			if uid, ok := old[p.Name]; ok && uid == p.UID {
				return false
			}
		}
		return true
	})
}

// uidsByName maps pod names to UIDs.
func uidsByName(pods []corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

// imageByDigest is the reference of the image pod's first container runs,
// by digest, in the test registry: the same program under another
// reference, which makes a template change.
func imageByDigest(t *testing.T, f *framework.Framework, pod *corev1.Pod, repo string) string {
	t.Helper()
	require.NotEmpty(t, pod.Status.ContainerStatuses, "pod %s has container statuses", pod.Name)
	id := pod.Status.ContainerStatuses[0].ImageID
	digest := id[strings.LastIndex(id, "@")+1:]
	require.True(t, strings.HasPrefix(digest, "sha256:"), "image ID %q of pod %s", id, pod.Name)
	return f.Image(repo + "@" + digest)
}

// revisionsOf lists the names of the ControllerRevisions controlled by the
// object of uid.
func revisionsOf(ctx context.Context, t *testing.T, f *framework.Framework, uid types.UID) []string {
	t.Helper()
	list, err := f.Kube.AppsV1().ControllerRevisions(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == uid {
			names = append(names, list.Items[i].Name)
		}
	}
	slices.Sort(names)
	return names
}

// waitClaimOrdinals waits until the PVCs of the set's claim template,
// named <claim>-<set>-<ordinal>, are exactly those of ordinals (a PVC
// being deleted still counts, as in OpenKruise's
// verifyStatefulSetPVCsExist) and each satisfies ok if given.
func waitClaimOrdinals(ctx context.Context, t *testing.T, f *framework.Framework, set, claim string, ordinals []int, ok func(*corev1.PersistentVolumeClaim) bool) {
	t.Helper()
	re := regexp.MustCompile("^" + regexp.QuoteMeta(claim+"-"+set+"-") + "([0-9]+)$")
	var have []int
	var problem string
	err := framework.WaitFor(ctx, statefulSetTimeout, func(ctx context.Context) (bool, error) {
		list, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		have, problem = nil, ""
		for i := range list.Items {
			m := re.FindStringSubmatch(list.Items[i].Name)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			have = append(have, n)
			if ok != nil && !ok(&list.Items[i]) {
				problem = fmt.Sprintf("PVC %s: owners %v", list.Items[i].Name, list.Items[i].OwnerReferences)
			}
		}
		slices.Sort(have)
		return slices.Equal(have, ordinals) && problem == "", nil
	})
	require.NoError(t, err, "PVCs %s-%s-N for ordinals %v; have %v %s", claim, set, ordinals, have, problem)
}

// TestStatefulSetIdentity ports OpenKruise's [StatefulSetBasic] identity
// cases on pods with a PVC that stay unready until told (pauseNewPods):
// stable names, host names, subdomain and storage across a restart, and
// adoption and release by controller reference.
func TestStatefulSetIdentity(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()

	// OpenKruise: "should provide basic identity"
	t.Run("should provide basic identity", func(t *testing.T) {
		t.Parallel()
		const name = "identity"
		sts := newStatefulSet(f, name, 3)
		pauseNewPods(f, sts)
		created := createStatefulSet(ctx, t, f, sts)
		pods := saturate(ctx, t, f, name, 3)
		waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))

		checkMount := func(pods []corev1.Pod) {
			t.Helper()
			shInPods(ctx, t, f, pods, fmt.Sprintf("ls -idlh /data && find /data && touch /data/%d", time.Now().UnixNano()))
		}
		checkMount(pods)
		for i := range pods {
			p := &pods[i]
			require.Equal(t, fmt.Sprintf("%s-%d", name, i), p.Name)
			stdout, stderr, err := execBusybox(ctx, f, p.Name, "sh", "-c", "printf $(hostname)")
			require.NoError(t, err, "hostname in %s: %s", p.Name, stderr)
			require.Equal(t, p.Name, stdout, "a stable host name: the pod's name")
			require.Equal(t, p.Name, p.Spec.Hostname)
			require.Equal(t, name, p.Spec.Subdomain, "the governing Service")
			require.Equal(t, p.Name, p.Labels[wellknown.LabelStatefulSetPodName])
			require.Equal(t, strconv.Itoa(i), p.Labels[wellknown.LabelPodIndex])
			require.True(t, slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == "datadir" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "datadir-"+p.Name
			}), "pod %s mounts PVC datadir-%s; volumes %v", p.Name, p.Name, p.Spec.Volumes)
		}
		require.Equal(t, name, created.Spec.ServiceName)
		waitClaimOrdinals(ctx, t, f, name, "datadir", []int{0, 1, 2}, nil)
		shInPods(ctx, t, f, pods, "hostname >/data/hostname && sync")

		// Restart: scale to 0, wait for the controller to count 0, scale
		// back. The new pods find their PVCs, with the continue file.
		scaleTo(ctx, t, f, name, 0)
		waitNoPods(ctx, t, f, name)
		waitStatefulSet(ctx, t, f, name, "status.replicas 0", func(s *v1beta1.StatefulSet) bool { return s.Status.Replicas == 0 })
		scaleTo(ctx, t, f, name, 3)
		pods = waitSetPods(ctx, t, f, name, "3 running and ready after the restart", runningReady(3, 3))
		checkMount(pods)
		shInPods(ctx, t, f, pods, `[ "$(cat /data/hostname)" = "$(hostname)" ]`)
	})

	// OpenKruise: "should adopt matching orphans and release non-matching pods"
	t.Run("should adopt matching orphans and release non-matching pods", func(t *testing.T) {
		t.Parallel()
		const name = "adopt"
		sts := newStatefulSet(f, name, 1)
		pauseNewPods(f, sts)
		created := createStatefulSet(ctx, t, f, sts)
		pods := saturate(ctx, t, f, name, 1)
		require.Len(t, pods, 1)
		ownedBySet := func(p *corev1.Pod) bool {
			ref := metav1.GetControllerOf(p)
			return ref != nil && ref.Kind == "StatefulSet" && strings.HasPrefix(ref.APIVersion, "apps.kruise.io/") &&
				ref.Name == name && ref.UID == created.UID
		}
		pod := pods[0]
		require.True(t, ownedBySet(&pod), "created with the set as controller: %v", pod.OwnerReferences)

		pc := f.Kube.CoreV1().Pods(f.Namespace)
		updateObject(ctx, t, pc, pod.Name, func(p *corev1.Pod) { p.OwnerReferences = nil })
		waitSetPod(ctx, t, f, pod.Name, "readopted", ownedBySet)

		prevLabels := pod.Labels
		updateObject(ctx, t, pc, pod.Name, func(p *corev1.Pod) { p.Labels = nil })
		waitSetPod(ctx, t, f, pod.Name, "released", func(p *corev1.Pod) bool { return metav1.GetControllerOf(p) == nil })

		updateObject(ctx, t, pc, pod.Name, func(p *corev1.Pod) { p.Labels = prevLabels })
		adopted := waitSetPod(ctx, t, f, pod.Name, "readopted", ownedBySet)
		require.Equal(t, pod.UID, adopted.UID, "the same pod, adopted again")
	})

	// OpenKruise: "should not deadlock when a pod's predecessor fails"
	t.Run("should not deadlock when a pod's predecessor fails", func(t *testing.T) {
		t.Parallel()
		const name = "deadlock"
		sts := newStatefulSet(f, name, 2)
		pauseNewPods(f, sts)
		createStatefulSet(ctx, t, f, sts)
		// OpenKruise sleeps a minute, then expects 1 pod, not ready.
		pods := waitSetPods(ctx, t, f, name, "pod 0 running, not ready", runningReady(1, 0))
		requireHolds(ctx, t, haltedFor, "no pod 1 while pod 0 is unready", podCountIs(f, name, 1))

		// Resuming pod 0: pod 1 comes and stays unready.
		shInPods(ctx, t, f, pods, "echo ok >/data/statefulset-continue && sync")
		pods = waitSetPods(ctx, t, f, name, "pod 0 ready, pod 1 running and not ready", runningReady(2, 1))

		// Deleting the healthy pod 0 while pod 1 is unhealthy: pod 0 is
		// recreated (on its PVC, so ready at once) all the same.
		require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}))
		pods = waitSetPods(ctx, t, f, name, "pod 0 recreated and ready, pod 1 not ready", func(now []corev1.Pod) bool {
			return runningReady(2, 1)(now) && now[0].UID != pods[0].UID
		})

		// Resuming pod 1: both ready.
		shInPods(ctx, t, f, pods[1:], "echo ok >/data/statefulset-continue && sync")
		waitSetPods(ctx, t, f, name, "2 running and ready", runningReady(2, 2))
	})
}

// rollbackTest is OpenKruise's rollbackTest: on a 3-pod set of
// serveReadyFile pods, a rolling update waits for an unready pod 1 and
// then recreates the pods in reverse ordinal order, and a roll back to the
// prior image does the same and reuses the prior ControllerRevision.
func rollbackTest(ctx context.Context, t *testing.T, f *framework.Framework, sts *v1beta1.StatefulSet) {
	t.Helper()
	name := sts.Name
	serveReadyFile(f, sts)
	created := createStatefulSet(ctx, t, f, sts)
	pods := waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
	s := waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))
	requireAllAt(t, pods, s.Status.CurrentRevision, "")
	require.True(t, strings.HasPrefix(s.Status.CurrentRevision, name+"-"), "revision %q is a ControllerRevision of the set", s.Status.CurrentRevision)
	require.Equal(t, []string{s.Status.CurrentRevision}, revisionsOf(ctx, t, f, created.UID))
	oldBusybox := pods[0].Spec.Containers[0].Image
	newBusybox := imageByDigest(t, f, &pods[0], "busybox")
	require.NotEqual(t, oldBusybox, newBusybox, "an update to a different image")

	breakReadiness(ctx, t, f, pods[1])
	waitSetPods(ctx, t, f, name, "pod 1 running, not ready", readyExcept(3, 1))
	setImage(ctx, t, f, name, newBusybox)
	s = waitStatefulSet(ctx, t, f, name, "a new revision", newRevision)
	current, update := s.Status.CurrentRevision, s.Status.UpdateRevision

	// Updating pods in reverse ordinal order once pod 1 is ready again.
	restoreReadiness(ctx, t, f, setPods(ctx, t, f, name)[1])
	s, pods = waitPartitioned(ctx, t, f, name, nil)
	require.Equal(t, update, s.Status.CurrentRevision, "the update revision is current when the update completes")
	requireAllAt(t, pods, update, newBusybox)
	for i := 1; i < len(pods); i++ {
		require.False(t, pods[i-1].CreationTimestamp.Before(&pods[i].CreationTimestamp),
			"recreated in reverse ordinal order: %s at %v, %s at %v", pods[i].Name, pods[i].CreationTimestamp, pods[i-1].Name, pods[i-1].CreationTimestamp)
	}

	// Rolling back to the previous revision, halted by pod 1 again.
	breakReadiness(ctx, t, f, pods[1])
	waitSetPods(ctx, t, f, name, "pod 1 running, not ready", readyExcept(3, 1))
	prior := current
	setImage(ctx, t, f, name, oldBusybox)
	s = waitStatefulSet(ctx, t, f, name, "the roll back's revision", func(s *v1beta1.StatefulSet) bool { return s.Status.UpdateRevision == prior })
	require.NotEqual(t, s.Status.CurrentRevision, s.Status.UpdateRevision, "during the roll back")
	restoreReadiness(ctx, t, f, setPods(ctx, t, f, name)[1])
	s, pods = waitPartitioned(ctx, t, f, name, nil)
	require.Equal(t, prior, s.Status.CurrentRevision, "the prior revision is current after the roll back")
	requireAllAt(t, pods, prior, oldBusybox)
	require.ElementsMatch(t, []string{prior, update}, revisionsOf(ctx, t, f, created.UID), "the roll back reuses the prior ControllerRevision")
}

// TestStatefulSetUpdates ports OpenKruise's [StatefulSetBasic] update
// cases, each on its own 3-pod set: a rolling update and a roll back
// (recreating, halted while a pod is unready), canary and phased updates
// by partition, OnDelete, and an in-place image update.
func TestStatefulSetUpdates(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	oldImage, newImage := f.Image("testserver:latest"), f.Image("testserver:v2")

	// OpenKruise: "should perform rolling updates and roll backs of template modifications"
	t.Run("should perform rolling updates and roll backs of template modifications", func(t *testing.T) {
		t.Parallel()
		rollbackTest(ctx, t, f, newStatefulSet(f, "rollback", 3))
	})

	// OpenKruise: "should perform rolling updates and roll backs of template modifications with PVCs"
	t.Run("should perform rolling updates and roll backs of template modifications with PVCs", func(t *testing.T) {
		t.Parallel()
		sts := newStatefulSet(f, "rollbackpvc", 3)
		withDataClaim(sts, "datadir", "/data")
		rollbackTest(ctx, t, f, sts)
		waitClaimOrdinals(ctx, t, f, sts.Name, "datadir", []int{0, 1, 2}, nil)
	})

	// OpenKruise: "should perform canary updates and phased rolling updates of template modifications"
	t.Run("should perform canary updates and phased rolling updates of template modifications", func(t *testing.T) {
		t.Parallel()
		const name = "canary"
		sts := newStatefulSet(f, name, 3)
		sts.Spec.UpdateStrategy = v1beta1.StatefulSetUpdateStrategy{
			Type:          appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](3)},
		}
		createStatefulSet(ctx, t, f, sts)
		before := waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
		s := waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))
		requireAllAt(t, before, s.Status.CurrentRevision, oldImage)

		setImage(ctx, t, f, name, newImage)
		s = waitStatefulSet(ctx, t, f, name, "a new revision", newRevision)
		// Not applying an update when the partition is not below the
		// number of replicas.
		pods := setPods(ctx, t, f, name)
		requireAllAt(t, pods, s.Status.CurrentRevision, oldImage)
		require.Equal(t, uidsByName(before), uidsByName(pods), "no pod recreated")

		// A canary: partition 2 updates pod 2 only.
		setPartition(ctx, t, f, name, 2)
		s, pods = waitPartitioned(ctx, t, f, name, nil)
		requirePartitioned(t, s, pods, oldImage, newImage)

		// Pods deleted during the update come back at their revision.
		deletePodsAndWait(ctx, t, f, name, 3, 0, 2)
		s, pods = waitPartitioned(ctx, t, f, name, nil)
		requirePartitioned(t, s, pods, oldImage, newImage)

		// A phased rolling update.
		update := s.Status.UpdateRevision
		for p := int32(1); p >= 0; p-- {
			setPartition(ctx, t, f, name, p)
			s, pods = waitPartitioned(ctx, t, f, name, nil)
			requirePartitioned(t, s, pods, oldImage, newImage)
		}
		require.Equal(t, update, s.Status.CurrentRevision, "the update revision is current when the update completes")
		waitStatefulSet(ctx, t, f, name, "3 updated and ready", settledSet(3))
	})

	// OpenKruise: "should implement legacy replacement when the update strategy is OnDelete"
	t.Run("should implement legacy replacement when the update strategy is OnDelete", func(t *testing.T) {
		t.Parallel()
		const name = "ondelete"
		sts := newStatefulSet(f, name, 3)
		sts.Spec.UpdateStrategy = v1beta1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		createStatefulSet(ctx, t, f, sts)
		pods := waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
		s := waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))
		current := s.Status.CurrentRevision
		requireAllAt(t, pods, current, oldImage)

		// Restoring pods to the current revision.
		pods = deletePodsAndWait(ctx, t, f, name, 3, 0, 1, 2)
		requireAllAt(t, pods, current, oldImage)

		setImage(ctx, t, f, name, newImage)
		s = waitStatefulSet(ctx, t, f, name, "a new revision", newRevision)
		update := s.Status.UpdateRevision
		require.Equal(t, current, s.Status.CurrentRevision)
		after := setPods(ctx, t, f, name)
		requireAllAt(t, after, current, oldImage)
		require.Equal(t, uidsByName(pods), uidsByName(after), "OnDelete: nothing replaced until deleted")

		// Recreating pods at the new revision.
		pods = deletePodsAndWait(ctx, t, f, name, 3, 0, 1, 2)
		requireAllAt(t, pods, update, newImage)
	})

	// OpenKruise: "should in-place update pods when the pod update strategy is InPlace"
	t.Run("should in-place update pods when the pod update strategy is InPlace", func(t *testing.T) {
		t.Parallel()
		const name = "inplace"
		sts := newStatefulSet(f, name, 3)
		sts.Spec.UpdateStrategy = v1beta1.StatefulSetUpdateStrategy{
			Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{
				PodUpdatePolicy: v1beta1.InPlaceIfPossiblePodUpdateStrategyType,
				// OpenKruise waits 10 s before each pod's update; 1 s
				// keeps the grace step at a third of the time.
				InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{GracePeriodSeconds: 1},
			},
		}
		sts.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady}}
		createStatefulSet(ctx, t, f, sts)
		pods := waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
		s := waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))
		current := s.Status.CurrentRevision
		requireAllAt(t, pods, current, oldImage)

		// Restoring pods to the current revision.
		pods = deletePodsAndWait(ctx, t, f, name, 3, 0, 1, 2)
		requireAllAt(t, pods, current, oldImage)
		before := uidsByName(pods)

		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = newImage
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](3)
		})
		s = waitStatefulSet(ctx, t, f, name, "a new revision", newRevision)
		update := s.Status.UpdateRevision
		requireAllAt(t, setPods(ctx, t, f, name), current, oldImage)

		// In-place update of every pod at the new revision.
		setPartition(ctx, t, f, name, 0)
		s, pods = waitPartitioned(ctx, t, f, name, nil)
		require.Equal(t, update, s.Status.CurrentRevision)
		requireAllAt(t, pods, update, newImage)
		waitStatefulSet(ctx, t, f, name, "3 updated and ready", settledSet(3))
		for i := range pods {
			p := &pods[i]
			require.Equal(t, before[p.Name], p.UID, "pod %s updated in place, not recreated", p.Name)
			require.Contains(t, p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady})
			require.Contains(t, p.Annotations[wellknown.AnnotationInPlaceUpdateState], `"revision":"`+update+`"`, "pod %s", p.Name)
			require.EqualValues(t, 1, p.Status.ContainerStatuses[0].RestartCount, "pod %s: the container restarted once, with the new image", p.Name)
		}
	})

	// envFromLabel is OpenKruise's set for the next two cases: 3 pods,
	// InPlaceIfPossible with a grace period (1 s here, 10 s there), the
	// InPlaceUpdateReady gate, a label test-env=foo and an env var that
	// reads it; its pods are recreated once so that all start at the
	// current revision. It returns the pods and the current revision.
	envFromLabel := func(t *testing.T, name string) ([]corev1.Pod, string) {
		t.Helper()
		sts := newStatefulSet(f, name, 3)
		sts.Spec.UpdateStrategy = v1beta1.StatefulSetUpdateStrategy{
			Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{
				PodUpdatePolicy:       v1beta1.InPlaceIfPossiblePodUpdateStrategyType,
				InPlaceUpdateStrategy: &pub.InPlaceUpdateStrategy{GracePeriodSeconds: 1},
			},
		}
		sts.Spec.Template.Labels["test-env"] = "foo"
		c := &sts.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "TEST_ENV", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['test-env']"},
		}})
		sts.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady}}
		createStatefulSet(ctx, t, f, sts)
		pods := waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
		s := waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))
		requireAllAt(t, pods, s.Status.CurrentRevision, "")

		// Restoring pods to the current revision.
		pods = deletePodsAndWait(ctx, t, f, name, 3, 0, 1, 2)
		requireAllAt(t, pods, s.Status.CurrentRevision, "")
		return pods, s.Status.CurrentRevision
	}

	// updateAtPartition3 applies change with partition 3 (a new revision
	// and no pod updated), then releases the partition and waits for
	// every pod to be at the new revision, which it returns with the pods.
	updateAtPartition3 := func(t *testing.T, name, current string, change func(*v1beta1.StatefulSet)) ([]corev1.Pod, string) {
		t.Helper()
		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
			change(s)
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](3)
		})
		s := waitStatefulSet(ctx, t, f, name, "a new revision", newRevision)
		require.Equal(t, current, s.Status.CurrentRevision)
		update := s.Status.UpdateRevision
		setPartition(ctx, t, f, name, 0)
		s, _ = waitPartitioned(ctx, t, f, name, nil)
		require.Equal(t, update, s.Status.CurrentRevision)
		return waitSetPods(ctx, t, f, name, "3 running and ready at the new revision", func(pods []corev1.Pod) bool {
			return runningReady(3, 3)(pods) && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return revisionOf(&p) != update })
		}), update
	}

	// OpenKruise: "should in-place update env from label"
	t.Run("should in-place update env from label", func(t *testing.T) {
		t.Parallel()
		const name = "envlabel"
		before, current := envFromLabel(t, name)
		pods, update := updateAtPartition3(t, name, current, func(s *v1beta1.StatefulSet) { s.Spec.Template.Labels["test-env"] = "bar" })
		for i := range pods {
			p := &pods[i]
			require.Equal(t, update, revisionOf(p), "pod %s", p.Name)
			require.EqualValues(t, 1, p.Status.ContainerStatuses[0].RestartCount, "pod %s: restarted once, for the env its label feeds", p.Name)
			require.Equal(t, uidsByName(before)[p.Name], p.UID, "pod %s updated in place", p.Name)
			require.Equal(t, "bar", p.Labels["test-env"], "pod %s", p.Name)
		}
	})

	// OpenKruise: "should recreate update when pod qos changed". Its
	// Guaranteed resources (1 CPU, 1Gi) are 100m and 64Mi here: the QoS
	// class changes the same way on the local cluster's small nodes.
	t.Run("should recreate update when pod qos changed", func(t *testing.T) {
		t.Parallel()
		const name = "qos"
		before, current := envFromLabel(t, name)
		// Creation times are whole seconds.
		updateTime := time.Now().Truncate(time.Second)
		guaranteed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		pods, update := updateAtPartition3(t, name, current, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: guaranteed, Limits: guaranteed}
		})
		for i := range pods {
			p := &pods[i]
			require.Equal(t, update, revisionOf(p), "pod %s", p.Name)
			require.EqualValues(t, 0, p.Status.ContainerStatuses[0].RestartCount, "pod %s: a new pod, not a restart", p.Name)
			require.False(t, p.CreationTimestamp.Time.Before(updateTime), "pod %s created at %s, before the update at %s", p.Name, p.CreationTimestamp, updateTime)
			require.NotEqual(t, uidsByName(before)[p.Name], p.UID, "pod %s recreated", p.Name)
			require.Equal(t, corev1.PodQOSGuaranteed, p.Status.QOSClass, "pod %s", p.Name)
		}
	})
}

// TestStatefulSetScaling ports OpenKruise's [StatefulSetBasic] scaling
// cases, each on its own set: OrderedReady scales in order and halts on
// an unhealthy pod, Parallel does not; the scale subresource; and
// scaleStrategy.maxUnavailable caps the pods created at once, and lets an
// update replace every pod even when all are unhealthy.
func TestStatefulSetScaling(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()

	// OpenKruise: "Scaling should happen in predictable order and halt if any stateful pod is unhealthy"
	t.Run("Scaling should happen in predictable order and halt if any stateful pod is unhealthy", func(t *testing.T) {
		t.Parallel()
		const name = "ordered"
		selector := "app=" + name
		rv := podListRV(ctx, t, f, selector)
		sts := newStatefulSet(f, name, 1)
		serveReadyFile(f, sts)
		createStatefulSet(ctx, t, f, sts)
		pods := waitSetPods(ctx, t, f, name, "1 running and ready", runningReady(1, 1))

		// Scale-up halts while pod 0 is unhealthy.
		breakReadiness(ctx, t, f, pods...)
		waitSetPods(ctx, t, f, name, "pod 0 running, not ready", runningReady(1, 0))
		waitStatefulSet(ctx, t, f, name, "0 ready", readyReplicas(0))
		scaleTo(ctx, t, f, name, 3)
		waitStatefulSet(ctx, t, f, name, "the scale-up observed", observed)
		requireHolds(ctx, t, haltedFor, "no pod created while pod 0 is unready", podCountIs(f, name, 1))

		restoreReadiness(ctx, t, f, pods...)
		waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
		requireEventOrder(ctx, t, f, selector, rv, watch.Added, []string{name + "-0", name + "-1", name + "-2"})

		// Scale-down halts while the pods are unhealthy.
		rv = podListRV(ctx, t, f, selector)
		pods = setPods(ctx, t, f, name)
		breakReadiness(ctx, t, f, pods...)
		waitStatefulSet(ctx, t, f, name, "0 ready", readyReplicas(0))
		waitSetPods(ctx, t, f, name, "3 running, none ready", runningReady(3, 0))
		scaleTo(ctx, t, f, name, 0)
		waitStatefulSet(ctx, t, f, name, "the scale-down observed", observed)
		requireHolds(ctx, t, haltedFor, "no pod deleted while the pods are unready", podCountIs(f, name, 3))

		restoreReadiness(ctx, t, f, pods...)
		requireEventOrder(ctx, t, f, selector, rv, watch.Deleted, []string{name + "-2", name + "-1", name + "-0"})
		waitNoPods(ctx, t, f, name)
		waitStatefulSet(ctx, t, f, name, "status.replicas 0", func(s *v1beta1.StatefulSet) bool { return s.Status.Replicas == 0 })
	})

	// OpenKruise: "Burst scaling should run to completion even with unhealthy pods"
	t.Run("Burst scaling should run to completion even with unhealthy pods", func(t *testing.T) {
		t.Parallel()
		const name = "burst"
		sts := newStatefulSet(f, name, 1)
		serveReadyFile(f, sts)
		sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		createStatefulSet(ctx, t, f, sts)
		pods := waitSetPods(ctx, t, f, name, "1 running and ready", runningReady(1, 1))

		breakReadiness(ctx, t, f, pods...)
		waitSetPods(ctx, t, f, name, "pod 0 running, not ready", runningReady(1, 0))
		waitStatefulSet(ctx, t, f, name, "0 ready", readyReplicas(0))
		scaleTo(ctx, t, f, name, 3)
		// Parallel: pods 1 and 2 come (and run) despite the unready pod 0.
		pods = waitSetPods(ctx, t, f, name, "3 running pods despite the unready one", readyExcept(3, 0))

		restoreReadiness(ctx, t, f, pods...)
		pods = waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))

		breakReadiness(ctx, t, f, pods...)
		waitStatefulSet(ctx, t, f, name, "0 ready", readyReplicas(0))
		waitSetPods(ctx, t, f, name, "3 running, none ready", runningReady(3, 0))
		scaleTo(ctx, t, f, name, 0)
		waitNoPods(ctx, t, f, name)
		waitStatefulSet(ctx, t, f, name, "status.replicas 0", func(s *v1beta1.StatefulSet) bool { return s.Status.Replicas == 0 })
	})

	// OpenKruise: "should have a working scale subresource"
	t.Run("should have a working scale subresource", func(t *testing.T) {
		t.Parallel()
		const name = "scale"
		createStatefulSet(ctx, t, f, newStatefulSet(f, name, 1))
		waitSetPods(ctx, t, f, name, "1 running and ready", runningReady(1, 1))
		s := waitStatefulSet(ctx, t, f, name, "1 ready", settledSet(1))
		require.Equal(t, "app="+name, s.Status.LabelSelector)

		sets := f.Shoal.AppsV1beta1().StatefulSets(f.Namespace)
		scale, err := sets.GetScale(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "get the scale subresource")
		require.EqualValues(t, 1, scale.Spec.Replicas)
		require.EqualValues(t, 1, scale.Status.Replicas)
		require.Equal(t, s.Status.LabelSelector, scale.Status.Selector)

		scale.ResourceVersion = "" // an unconditional update
		scale.Spec.Replicas = 2
		result, err := sets.UpdateScale(ctx, name, scale, metav1.UpdateOptions{})
		require.NoError(t, err, "update the scale subresource")
		require.EqualValues(t, 2, result.Spec.Replicas)
		s, err = sets.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.EqualValues(t, 2, *s.Spec.Replicas, "spec.replicas follows the scale")
		waitStatefulSet(ctx, t, f, name, "2 ready", settledSet(2))
	})

	// OpenKruise: "Should can update pods when the statefulset scale strategy is set"
	// (3 to 6 replicas instead of 3 to 10.)
	t.Run("Should can update pods when the statefulset scale strategy is set", func(t *testing.T) {
		t.Parallel()
		const name, minReady = "scalestrategy", 3
		sts := newStatefulSet(f, name, 3)
		c := &sts.Spec.Template.Spec.Containers[0]
		c.Name, c.Image, c.Args, c.ReadinessProbe = "busybox", f.Image("busybox:latest"), nil, nil
		c.Command = []string{"sleep", "3600"}
		sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		sts.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		sts.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady}}
		sts.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{
			MinReadySeconds: ptr.To[int32](minReady),
			PodUpdatePolicy: v1beta1.InPlaceIfPossiblePodUpdateStrategyType,
		}
		sts.Spec.ScaleStrategy = &v1beta1.StatefulSetScaleStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
		createStatefulSet(ctx, t, f, sts)
		waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
		waitStatefulSet(ctx, t, f, name, "3 available", settledSet(3))

		// Scaling up creates at most maxUnavailable pods that are not yet
		// available (ready for minReadySeconds).
		scaleTo(ctx, t, f, name, 6)
		var violation string
		maxSeen := 0
		waitSetPods(ctx, t, f, name, "6 running and ready, at most 2 unavailable at once", func(pods []corev1.Pod) bool {
			now, unavailable := time.Now(), 0
			for i := range pods {
				if !podstatus.Available(&pods[i], minReady*time.Second, now) {
					unavailable++
				}
			}
			maxSeen = max(maxSeen, unavailable)
			if unavailable > 2 {
				violation = fmt.Sprintf("%d pods unavailable at once: %s", unavailable, podsString(pods))
				return true
			}
			return runningReady(6, 6)(pods)
		})
		require.Empty(t, violation, "scaleStrategy.maxUnavailable 2")
		t.Logf("at most %d pods unavailable at once during the scale-up", maxSeen)
		healthy := waitStatefulSet(ctx, t, f, name, "6 available", settledSet(6)).Status.UpdateRevision

		// Every pod may be updated into an unhealthy one at once.
		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
			s.Spec.ScaleStrategy.MaxUnavailable = ptr.To(intstr.FromString("100%"))
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("100%"))
			s.Spec.Template.Spec.Containers[0].Command = []string{} // the image's sh, which exits at once
		})
		s := waitStatefulSet(ctx, t, f, name, "6 updated, none ready", func(s *v1beta1.StatefulSet) bool {
			return s.Status.UpdateRevision != healthy && s.Status.ReadyReplicas == 0 && s.Status.UpdatedReplicas == 6
		})
		waitSetPods(ctx, t, f, name, "6 unready pods at the update revision", func(pods []corev1.Pod) bool {
			if len(pods) != 6 {
				return false
			}
			for i := range pods {
				if framework.IsPodReady(&pods[i]) || revisionOf(&pods[i]) != s.Status.UpdateRevision {
					return false
				}
			}
			return true
		})

		// And every unhealthy pod may be updated again.
		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Labels["test-update"] = "yes"
			s.Spec.Template.Spec.Containers[0].Command = []string{"sleep", "3600"}
		})
		s, pods := waitPartitioned(ctx, t, f, name, nil)
		waitStatefulSet(ctx, t, f, name, "6 ready", readyReplicas(6))
		requireAllAt(t, pods, s.Status.UpdateRevision, "")
		for i := range pods {
			require.Equal(t, "yes", pods[i].Labels["test-update"], "pod %s updated", pods[i].Name)
		}
	})
}

// ownedBySetOnly: the PVC has set among its owners and no pod (the
// WhenDeleted policy's references, OpenKruise's
// verifyStatefulSetPVCsExistWithOwnerRefs(..., true, false)).
func ownedBySetOnly(set *v1beta1.StatefulSet) func(*corev1.PersistentVolumeClaim) bool {
	return func(c *corev1.PersistentVolumeClaim) bool {
		byset, bypod := false, false
		for _, ref := range c.OwnerReferences {
			byset = byset || (ref.Kind == "StatefulSet" && ref.UID == set.UID)
			bypod = bypod || ref.Kind == "Pod"
		}
		return byset && !bypod
	}
}

// TestStatefulSetPVCRetention ports OpenKruise's "Non-retain
// StatefulSetPersistentVolumeClaimPolicy" cases: whenDeleted Delete
// deletes the PVCs with the set (garbage collection, the set owns them),
// whenScaled Delete those of the ordinals a scale-in removes, with
// reserved ordinals too, and both still after a pod was orphaned and
// adopted again.
func TestStatefulSetPVCRetention(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	retaining := func(name string, policy v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy) *v1beta1.StatefulSet {
		sts := newStatefulSet(f, name, 3)
		withDataClaim(sts, "datadir", "/data")
		sts.Spec.PersistentVolumeClaimRetentionPolicy = &policy
		return sts
	}

	// orphan drops the pod's owner references and waits until the set has
	// adopted it again (the cases' "after adopting pod").
	orphan := func(t *testing.T, set *v1beta1.StatefulSet, pod string) {
		t.Helper()
		_, err := f.Kube.CoreV1().Pods(f.Namespace).Patch(ctx, pod, types.MergePatchType,
			[]byte(`{"metadata":{"ownerReferences":null}}`), metav1.PatchOptions{})
		require.NoError(t, err, "orphan pod %s", pod)
		waitSetPod(ctx, t, f, pod, "adopted again", func(p *corev1.Pod) bool {
			ref := metav1.GetControllerOf(p)
			return ref != nil && ref.UID == set.UID
		})
	}

	// deletedWithSet is a whenDeleted Delete case: the 3 PVCs are owned by
	// the set alone; with orphaned set, that pod is orphaned and adopted
	// again first; deleting the set deletes them.
	deletedWithSet := func(t *testing.T, name string, orphaned int) {
		created := createStatefulSet(ctx, t, f, retaining(name, v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: v1beta1.DeletePersistentVolumeClaimRetentionPolicyType,
		}))
		waitClaimOrdinals(ctx, t, f, name, "datadir", []int{0, 1, 2}, ownedBySetOnly(created))
		if orphaned >= 0 {
			waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
			orphan(t, created, fmt.Sprintf("%s-%d", name, orphaned))
		}
		err := f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Delete(ctx, name,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		require.NoError(t, err)
		waitClaimOrdinals(ctx, t, f, name, "datadir", nil, nil)
	}

	// scaledAway is a whenScaled Delete case: 3 PVCs; with orphaned set,
	// that pod is orphaned and adopted again first; scaled to 1, only
	// ordinal 0's PVC is left.
	scaledAway := func(t *testing.T, name string, orphaned int) {
		created := createStatefulSet(ctx, t, f, retaining(name, v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenScaled: v1beta1.DeletePersistentVolumeClaimRetentionPolicyType,
		}))
		waitClaimOrdinals(ctx, t, f, name, "datadir", []int{0, 1, 2}, nil)
		waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
		if orphaned >= 0 {
			orphan(t, created, fmt.Sprintf("%s-%d", name, orphaned))
		}
		scaleTo(ctx, t, f, name, 1)
		waitSetPods(ctx, t, f, name, "pod 0 left", podNames(name+"-0"))
		waitClaimOrdinals(ctx, t, f, name, "datadir", []int{0}, nil)
	}

	// OpenKruise: "should delete PVCs with a WhenDeleted policy"
	t.Run("should delete PVCs with a WhenDeleted policy", func(t *testing.T) {
		t.Parallel()
		deletedWithSet(t, "whendeleted", -1)
	})

	// OpenKruise: "should delete PVCs with a OnScaledown policy"
	t.Run("should delete PVCs with a OnScaledown policy", func(t *testing.T) {
		t.Parallel()
		scaledAway(t, "onscaledown", -1)
	})

	// OpenKruise: "should delete PVCs with a OnScaledown policy and range reserveOrdinals=[0,2-5]"
	t.Run("should delete PVCs with a OnScaledown policy and range reserveOrdinals=[0,2-5]", func(t *testing.T) {
		t.Parallel()
		const name = "reserved"
		sts := retaining(name, v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenScaled: v1beta1.DeletePersistentVolumeClaimRetentionPolicyType,
		})
		sts.Spec.ReserveOrdinals = []intstr.IntOrString{intstr.FromInt32(0), intstr.FromString("2-5")}
		createStatefulSet(ctx, t, f, sts)
		waitClaimOrdinals(ctx, t, f, name, "datadir", []int{1, 6, 7}, nil)
		waitSetPods(ctx, t, f, name, "pods 1, 6 and 7 ready", func(pods []corev1.Pod) bool {
			return podNames(name+"-1", name+"-6", name+"-7")(pods) && runningReady(3, 3)(pods)
		})
		scaleTo(ctx, t, f, name, 1)
		waitSetPods(ctx, t, f, name, "pod 1 left", podNames(name+"-1"))
		waitClaimOrdinals(ctx, t, f, name, "datadir", []int{1}, nil)
	})

	// OpenKruise: "should delete PVCs after adopting pod (WhenDeleted)"
	t.Run("should delete PVCs after adopting pod (WhenDeleted)", func(t *testing.T) {
		t.Parallel()
		deletedWithSet(t, "adoptdeleted", 2)
	})

	// OpenKruise: "should delete PVCs after adopting pod (WhenScaled)"
	t.Run("should delete PVCs after adopting pod (WhenScaled)", func(t *testing.T) {
		t.Parallel()
		scaledAway(t, "adoptscaled", 1)
	})
}

// TestStatefulSetStartOrdinal ports OpenKruise's "Scaling
// StatefulSetStartOrdinal" cases, each on its own 2-pod set: setting,
// increasing, decreasing and removing spec.ordinals.start renames the
// pods (replacing them) to start at the new ordinal.
func TestStatefulSetStartOrdinal(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	names := func(set string, ordinals ...int) []string {
		var out []string
		for _, o := range ordinals {
			out = append(out, fmt.Sprintf("%s-%d", set, o))
		}
		return out
	}
	for _, tc := range []struct {
		name, set   string
		start       *int32
		newStart    *int32
		newReplicas int32
		before      []int
		after       []int
	}{
		// OpenKruise: "Setting .start.ordinal"
		{"Setting .start.ordinal", "setting", nil, ptr.To[int32](2), 3, []int{0, 1}, []int{2, 3, 4}},
		// OpenKruise: "Increasing .start.ordinal"
		{"Increasing .start.ordinal", "increasing", ptr.To[int32](2), ptr.To[int32](4), 2, []int{2, 3}, []int{4, 5}},
		// OpenKruise: "Decreasing .start.ordinal"
		{"Decreasing .start.ordinal", "decreasing", ptr.To[int32](3), ptr.To[int32](2), 2, []int{3, 4}, []int{2, 3}},
		// OpenKruise: "Removing .start.ordinal"
		{"Removing .start.ordinal", "removing", ptr.To[int32](3), nil, 2, []int{3, 4}, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sts := newStatefulSet(f, tc.set, 2)
			if tc.start != nil {
				sts.Spec.Ordinals = &v1beta1.StatefulSetOrdinals{Start: *tc.start}
			}
			createStatefulSet(ctx, t, f, sts)
			waitStatefulSet(ctx, t, f, tc.set, "2 ready", settledSet(2))
			waitSetPods(ctx, t, f, tc.set, fmt.Sprintf("pods %v", tc.before), podNames(names(tc.set, tc.before...)...))

			updateStatefulSet(ctx, t, f, tc.set, func(s *v1beta1.StatefulSet) {
				s.Spec.Ordinals = nil
				if tc.newStart != nil {
					s.Spec.Ordinals = &v1beta1.StatefulSetOrdinals{Start: *tc.newStart}
				}
				s.Spec.Replicas = ptr.To(tc.newReplicas)
			})
			waitStatefulSet(ctx, t, f, tc.set, "the new ordinals observed", observed)
			want := names(tc.set, tc.after...)
			waitSetPods(ctx, t, f, tc.set, fmt.Sprintf("pods %v ready", tc.after), func(pods []corev1.Pod) bool {
				return podNames(want...)(pods) && runningReady(len(want), len(want))(pods)
			})
			waitStatefulSet(ctx, t, f, tc.set, fmt.Sprintf("%d ready", tc.newReplicas), func(s *v1beta1.StatefulSet) bool {
				return s.Status.Replicas == tc.newReplicas && s.Status.ReadyReplicas == tc.newReplicas
			})
		})
	}
}

// TestStatefulSetParallelMaxUnavailable (Shoal): a Parallel set of 5 with
// rollingUpdate.maxUnavailable 2 updated by partition steps 5, 3, 0
// recreates the pods from the highest ordinals down, never more than 2
// not ready at once (as polled every second), and keeps the pods below
// each partition at the current revision.
func TestStatefulSetParallelMaxUnavailable(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name, replicas = "maxunavailable", 5
	oldImage, newImage := f.Image("testserver:latest"), f.Image("testserver:v2")
	sts := newStatefulSet(f, name, replicas)
	sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	sts.Spec.UpdateStrategy = v1beta1.StatefulSetUpdateStrategy{
		Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{
			Partition:      ptr.To[int32](replicas),
			MaxUnavailable: ptr.To(intstr.FromInt32(2)),
		},
	}
	createStatefulSet(ctx, t, f, sts)
	before := waitSetPods(ctx, t, f, name, "5 running and ready", runningReady(replicas, replicas))
	waitStatefulSet(ctx, t, f, name, "5 ready", settledSet(replicas))

	setImage(ctx, t, f, name, newImage)
	s := waitStatefulSet(ctx, t, f, name, "a new revision", newRevision)
	update := s.Status.UpdateRevision
	pods := setPods(ctx, t, f, name)
	requireAllAt(t, pods, s.Status.CurrentRevision, oldImage)
	require.Equal(t, uidsByName(before), uidsByName(pods), "partition 5 of 5: nothing updated")

	maxSeen := 0
	capped := func(pods []corev1.Pod) error {
		ready := 0
		for i := range pods {
			if framework.IsPodReady(&pods[i]) {
				ready++
			}
		}
		unavailable := replicas - ready
		maxSeen = max(maxSeen, unavailable)
		if unavailable > 2 {
			return fmt.Errorf("maxUnavailable 2: %d of %d pods unavailable at once: %s", unavailable, replicas, podsString(pods))
		}
		return nil
	}
	for _, partition := range []int32{3, 0} {
		setPartition(ctx, t, f, name, partition)
		s, pods = waitPartitioned(ctx, t, f, name, capped)
		requirePartitioned(t, s, pods, oldImage, newImage)
	}
	require.Equal(t, update, s.Status.CurrentRevision)
	waitStatefulSet(ctx, t, f, name, "5 updated and ready", settledSet(replicas))
	t.Logf("at most %d pods unavailable at once during the update", maxSeen)
}

// TestStatefulSetPreDeleteHook (Shoal): with a preDelete label hook,
// scaling 3 to 2 holds pod 2 in PreparingDelete, not deleted, until the
// hook's label is removed; then it is deleted and pods 0 and 1 are
// untouched.
func TestStatefulSetPreDeleteHook(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name, hook = "predelete", "example.io/block-deleting"
	sts := newStatefulSet(f, name, 3)
	sts.Spec.Lifecycle = &pub.Lifecycle{PreDelete: &pub.LifecycleHook{LabelsHandler: map[string]string{hook: "true"}}}
	sts.Spec.Template.Labels[hook] = "true"
	createStatefulSet(ctx, t, f, sts)
	before := waitSetPods(ctx, t, f, name, "3 running and ready", runningReady(3, 3))
	waitStatefulSet(ctx, t, f, name, "3 ready", settledSet(3))

	scaleTo(ctx, t, f, name, 2)
	victim := name + "-2"
	held := waitSetPod(ctx, t, f, victim, "held in PreparingDelete", func(p *corev1.Pod) bool {
		return p.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStatePreparingDelete)
	})
	require.Equal(t, before[2].UID, held.UID)
	require.Nil(t, held.DeletionTimestamp, "held, not deleted")
	requireHolds(ctx, t, 3*time.Second, "the hook holds pod "+victim, func(ctx context.Context) (bool, string, error) {
		p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, victim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "deleted", nil
		}
		if err != nil {
			return false, "", err
		}
		return p.UID == held.UID && p.DeletionTimestamp == nil, fmt.Sprintf("uid %s, deletion %v", p.UID, p.DeletionTimestamp), nil
	})

	patchPodLabels(ctx, t, f, victim, map[string]any{hook: nil})
	waitPodGone(ctx, t, f, victim)
	pods := waitSetPods(ctx, t, f, name, "pods 0 and 1 ready", func(pods []corev1.Pod) bool {
		return podNames(name+"-0", name+"-1")(pods) && runningReady(2, 2)(pods)
	})
	for i := range pods {
		require.Equal(t, before[i].UID, pods[i].UID, "pod %s untouched", pods[i].Name)
	}
	waitStatefulSet(ctx, t, f, name, "2 ready", settledSet(2))
}

// specifiedDelete labels pod apps.kruise.io/specified-delete and waits
// until the set recreated it (a new UID) and every one of the n pods runs
// ready; it returns the pods.
func specifiedDelete(ctx context.Context, t *testing.T, f *framework.Framework, name string, n, ordinal int) []corev1.Pod {
	t.Helper()
	pod := fmt.Sprintf("%s-%d", name, ordinal)
	old, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	patchPodLabels(ctx, t, f, pod, map[string]any{wellknown.LabelSpecifiedDelete: "true"})
	return waitSetPods(ctx, t, f, name, "pod "+pod+" recreated, all ready", func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.Name == pod && p.UID == old.UID {
				return false
			}
		}
		return runningReady(n, n)(pods)
	})
}

// TestStatefulSetSpecifiedDeleteAndEviction: pods labelled for deletion
// and pods the kubelet rejected come back at the same ordinal.
func TestStatefulSetSpecifiedDeleteAndEviction(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()

	// OpenKruise: "should perform rolling updates with specified-deleted"
	t.Run("should perform rolling updates with specified-deleted", func(t *testing.T) {
		t.Parallel()
		const name = "specified"
		createStatefulSet(ctx, t, f, newStatefulSet(f, name, 4))
		waitSetPods(ctx, t, f, name, "4 running and ready", runningReady(4, 4))
		s := waitStatefulSet(ctx, t, f, name, "4 ready", settledSet(4))
		current := s.Status.CurrentRevision
		pods := specifiedDelete(ctx, t, f, name, 4, 1)
		requireAllAt(t, pods, current, "")

		updateStatefulSet(ctx, t, f, name, func(s *v1beta1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2")
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
		})
		specifiedDelete(ctx, t, f, name, 4, 2)
		s = waitStatefulSet(ctx, t, f, name, "a new revision", newRevision)
		require.Equal(t, current, s.Status.CurrentRevision)
		update := s.Status.UpdateRevision
		waitPartitioned(ctx, t, f, name, nil)
		// Below the partition, a specified delete brings the pod back at
		// the current revision.
		pods = specifiedDelete(ctx, t, f, name, 4, 1)
		for _, p := range pods {
			want := current
			if ordinalOf(&p) >= 2 {
				want = update
			}
			require.Equal(t, want, revisionOf(&p), "pod %s", p.Name)
		}
	})

	// OpenKruise: "Should recreate evicted statefulset"
	t.Run("Should recreate evicted statefulset", func(t *testing.T) {
		t.Parallel()
		const name = "evicted"
		const hostPort = 21017
		node := requireSchedulableNodes(ctx, t, f, 1)[0].Name
		conflict := busyboxPod(f, "conflict", node, "sleep 3600")
		conflict.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: hostPort, HostPort: hostPort}}
		_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, conflict, metav1.CreateOptions{})
		require.NoError(t, err)
		waitObject(ctx, t, f.Kube.CoreV1().Pods(f.Namespace), statefulSetTimeout, "conflict", "running",
			func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, func(p *corev1.Pod) any { return p.Status.Phase })

		sts := newStatefulSet(f, name, 1)
		sts.Spec.Template.Spec.NodeName = node
		sts.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: hostPort, HostPort: hostPort}}
		createStatefulSet(ctx, t, f, sts)

		// The kubelet rejects the pod (its host port is taken); the set
		// deletes the failed pod and creates it again.
		var first types.UID
		waitSetPods(ctx, t, f, name, "pod 0 recreated at least once", func(pods []corev1.Pod) bool {
			for _, p := range pods {
				if first == "" {
					first = p.UID
				}
				if first != "" && p.UID != first {
					return true
				}
			}
			return false
		})
		require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, "conflict", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		pods := waitSetPods(ctx, t, f, name, "pod 0 running and ready", runningReady(1, 1))
		require.Equal(t, node, pods[0].Spec.NodeName)
	})
}

// TestStatefulSetRecreatesMissingPVC ports OpenKruise's "Automatically
// recreate PVC for pending pod when PVC is missing": a 1-pod set with a
// PVC, pinned to one node by nodeSelector; with that node cordoned the
// pod is deleted and comes back Pending, its PVC is deleted, and once the
// node is uncordoned the set recreates the PVC and the pod runs and is
// ready on the same node.
//
// Serial: it cordons a node of the shared cluster.
func TestStatefulSetRecreatesMissingPVC(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	node := requireSchedulableNodes(ctx, t, f, 1)[0].Name
	cordon := func(on bool) {
		t.Helper()
		_, err := f.Kube.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType,
			fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on), metav1.PatchOptions{})
		require.NoError(t, err, "cordon=%t node %s", on, node)
	}
	t.Cleanup(func() {
		// Never leave a node of the shared cluster cordoned.
		_, err := f.Kube.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType,
			[]byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
		if err != nil {
			t.Errorf("uncordon node %s: %v", node, err)
		}
	})

	const name = "pvcgone"
	sts := newStatefulSet(f, name, 1)
	withDataClaim(sts, "datadir", "/data")
	sts.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	createStatefulSet(ctx, t, f, sts)
	waitClaimOrdinals(ctx, t, f, name, "datadir", []int{0}, nil)
	waitStatefulSet(ctx, t, f, name, "1 ready", readyReplicas(1))
	pod := setPods(ctx, t, f, name)[0]
	require.Equal(t, node, pod.Spec.NodeName)

	cordon(true)
	require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	waitSetPod(ctx, t, f, pod.Name, "recreated, Pending on the cordoned node", func(p *corev1.Pod) bool {
		return p.UID != pod.UID && p.Spec.NodeName == ""
	})
	waitStatefulSet(ctx, t, f, name, "status.currentReplicas 1", func(s *v1beta1.StatefulSet) bool { return s.Status.CurrentReplicas == 1 })
	claims, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, claims.Items, 1)
	old := claims.Items[0]
	require.NoError(t, f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}))
	cordon(false)

	waitClaimOrdinals(ctx, t, f, name, "datadir", []int{0}, func(c *corev1.PersistentVolumeClaim) bool { return c.UID != old.UID })
	waitStatefulSet(ctx, t, f, name, "1 ready again", readyReplicas(1))
	back, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, node, back.Spec.NodeName, "scheduled back to its node")
}

// TestStatefulSetSeedManifests applies seed 000's two Advanced StatefulSet
// examples as the dry run has them (../testdata/seed-examples; INDEX.md
// lists the reconstruction), in the test's namespace, with the seed's
// nginx:alpine replaced by the local registry's test server:
//   - 000-19, scale-up with a rate limit: replicas 100, Parallel,
//     scaleStrategy.maxUnavailable 10%. The seed's point is an incorrect
//     set (here: a readiness probe on a port nothing serves) creating only
//     10 failing pods instead of 100; exactly 10 exist and stay.
//   - 000-13, persistentVolumeClaimRetentionPolicy whenDeleted Retain,
//     whenScaled Delete, completed with 3 replicas and one claim template
//     (the seed elides the rest of the spec): a scale to 1 deletes the
//     PVCs of ordinals 1 and 2, deleting the set keeps ordinal 0's.
func TestStatefulSetSeedManifests(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	read := func(t *testing.T, file string) *v1beta1.StatefulSet {
		t.Helper()
		var sts v1beta1.StatefulSet
		readSeedExample(t, f, file, &sts)
		sts.Namespace = f.Namespace
		c := &sts.Spec.Template.Spec.Containers[0]
		require.Equal(t, "nginx:alpine", c.Image, "the seed's image")
		app := newStatefulSet(f, sts.Name, 1).Spec.Template.Spec
		c.Image, c.Args, c.ReadinessProbe = app.Containers[0].Image, app.Containers[0].Args, app.Containers[0].ReadinessProbe
		sts.Spec.Template.Spec.TerminationGracePeriodSeconds = app.TerminationGracePeriodSeconds
		if sts.Spec.ServiceName == "" {
			sts.Spec.ServiceName = sts.Name
		}
		return &sts
	}

	t.Run("000-19 scale-up with maxUnavailable 10% of 100", func(t *testing.T) {
		t.Parallel()
		sts := read(t, "000-19.yaml")
		sts.Name, sts.Spec.ServiceName = "ratelimit", "ratelimit" // both seeds name their set sts-demo
		sts.Spec.Selector.MatchLabels["app"] = sts.Name
		sts.Spec.Template.Labels["app"] = sts.Name
		require.EqualValues(t, 100, *sts.Spec.Replicas)
		require.Equal(t, intstr.FromString("10%"), *sts.Spec.ScaleStrategy.MaxUnavailable)
		sts.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9999) // the mistake
		createStatefulSet(ctx, t, f, sts)
		waitSetPods(ctx, t, f, sts.Name, "10 running, none ready", func(pods []corev1.Pod) bool {
			return len(pods) == 10 && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })
		})
		requireHolds(ctx, t, haltedFor, "no more than the 10 unavailable pods created", podCountIs(f, sts.Name, 10))
		s := waitStatefulSet(ctx, t, f, sts.Name, "10 replicas, 0 ready", func(s *v1beta1.StatefulSet) bool { return s.Status.Replicas == 10 })
		require.Zero(t, s.Status.ReadyReplicas)
	})

	t.Run("000-13 whenDeleted Retain, whenScaled Delete", func(t *testing.T) {
		t.Parallel()
		sts := read(t, "000-13.yaml")
		require.Equal(t, &v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: v1beta1.RetainPersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  v1beta1.DeletePersistentVolumeClaimRetentionPolicyType,
		}, sts.Spec.PersistentVolumeClaimRetentionPolicy)
		sts.Spec.Replicas = ptr.To[int32](3)
		withDataClaim(sts, "datadir", "/data")
		createStatefulSet(ctx, t, f, sts)
		waitSetPods(ctx, t, f, sts.Name, "3 running and ready", runningReady(3, 3))
		waitClaimOrdinals(ctx, t, f, sts.Name, "datadir", []int{0, 1, 2}, nil)

		scaleTo(ctx, t, f, sts.Name, 1)
		waitSetPods(ctx, t, f, sts.Name, "pod 0 left", podNames(sts.Name+"-0"))
		waitClaimOrdinals(ctx, t, f, sts.Name, "datadir", []int{0}, nil)

		require.NoError(t, f.Shoal.AppsV1beta1().StatefulSets(f.Namespace).Delete(ctx, sts.Name,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
		waitNoPods(ctx, t, f, sts.Name)
		requireHolds(ctx, t, haltedFor, "ordinal 0's PVC kept", func(ctx context.Context) (bool, string, error) {
			pvc, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).Get(ctx, "datadir-"+sts.Name+"-0", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return pvc.DeletionTimestamp == nil, fmt.Sprintf("owners %v", pvc.OwnerReferences), nil
		})
	})
}
