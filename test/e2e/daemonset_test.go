//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// daemonSetTimeout bounds one DaemonSet step.
const daemonSetTimeout = 2 * time.Minute

// testDaemonSet is an Advanced DaemonSet of the test server with an HTTP
// readiness probe.
func testDaemonSet(f *framework.Framework, name string, strategy v1beta1.DaemonSetUpdateStrategy) *v1beta1.DaemonSet {
	labels := map[string]string{"daemonset-name": name}
	return &v1beta1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// A copy: labels a test adds to the template stay out of
				// the selector (a pod losing one would be released).
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
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
			},
			UpdateStrategy: strategy,
		},
	}
}

// daemonPods lists the DaemonSet's pods that are not being deleted, by
// node.
func daemonPods(ctx context.Context, t *testing.T, f *framework.Framework, name string) map[string][]corev1.Pod {
	t.Helper()
	list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "daemonset-name=" + name})
	require.NoError(t, err)
	out := map[string][]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
		}
	}
	return out
}

// waitDaemonPods polls the DaemonSet's pods until done says so.
func waitDaemonPods(ctx context.Context, t *testing.T, f *framework.Framework, name, what string, done func(map[string][]corev1.Pod) bool) map[string][]corev1.Pod {
	t.Helper()
	var last map[string][]corev1.Pod
	err := framework.WaitFor(ctx, daemonSetTimeout, func(ctx context.Context) (bool, error) {
		last = daemonPods(ctx, t, f, name)
		return done(last), nil
	})
	require.NoError(t, err, "DaemonSet %s: %s; pods by node: %v", name, what, podsByNodeString(last))
	return last
}

func podsByNodeString(m map[string][]corev1.Pod) string {
	out := ""
	for n, ps := range m {
		var names []string
		for _, p := range ps {
			names = append(names, fmt.Sprintf("%s(%s,ready=%v)", p.Name, p.Labels[wellknown.LabelControllerRevisionHash], podstatus.ReadySince(&p) != nil))
		}
		out += fmt.Sprintf("%q: %v; ", n, names)
	}
	return out
}

// runningOn reports whether exactly the nodes run one ready pod each.
func runningOn(nodes []string) func(map[string][]corev1.Pod) bool {
	return func(m map[string][]corev1.Pod) bool {
		if len(m) != len(nodes) {
			return false
		}
		for _, n := range nodes {
			if len(m[n]) != 1 || podstatus.ReadySince(&m[n][0]) == nil {
				return false
			}
		}
		return true
	}
}

// waitDaemonStatus waits for the status to say every desired node runs an
// available pod of the update revision, as OpenKruise's CheckDaemonStatus
// and CheckDaemonReady do.
func waitDaemonStatus(ctx context.Context, t *testing.T, f *framework.Framework, name string) *v1beta1.DaemonSet {
	t.Helper()
	return waitObject(ctx, t, f.Shoal.AppsV1beta1().DaemonSets(f.Namespace), daemonSetTimeout, name, "settles",
		func(ds *v1beta1.DaemonSet) bool {
			s := ds.Status
			return s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled > 0 && s.DesiredNumberScheduled == s.CurrentNumberScheduled &&
				s.DesiredNumberScheduled == s.NumberReady && s.DesiredNumberScheduled == s.NumberAvailable &&
				s.DesiredNumberScheduled == s.UpdatedNumberScheduled
		},
		func(ds *v1beta1.DaemonSet) any { return ds.Status })
}

func createDaemonSet(ctx context.Context, t *testing.T, f *framework.Framework, ds *v1beta1.DaemonSet) {
	t.Helper()
	_, err := f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)
}

// updateDaemonSet reads, changes and writes the DaemonSet, retrying on a
// conflict with the controller's status writes.
func updateDaemonSet(ctx context.Context, t *testing.T, f *framework.Framework, name string, change func(*v1beta1.DaemonSet)) {
	t.Helper()
	updateObject(ctx, t, f.Shoal.AppsV1beta1().DaemonSets(f.Namespace), name, change)
}

// uids maps node to the UID of its one pod.
func uids(m map[string][]corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for n, ps := range m {
		if len(ps) == 1 {
			out[n] = ps[0].UID
		}
	}
	return out
}

// imageOnEveryPod reports whether each node runs one pod, of image.
func imageOnEveryPod(nodes []string, image string) func(map[string][]corev1.Pod) bool {
	return func(m map[string][]corev1.Pod) bool {
		if !runningOn(nodes)(m) {
			return false
		}
		for _, ps := range m {
			if ps[0].Spec.Containers[0].Image != image {
				return false
			}
		}
		return true
	}
}

// TestDaemonSetBasic ports OpenKruise's Advanced DaemonSet cases
// [DaemonSetBasic]: run and stop a simple daemon, a node-selected
// ("complex") daemon, retry failed daemon pods, in-place image update,
// in place for an image and recreate for anything else, one by one with
// a preDelete hook, and a surging update with minReadySeconds. Each runs
// in its own DaemonSet on the local cluster's nodes; the node-selected
// case labels one node with a key of its own, removed at the end.
func TestDaemonSetBasic(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := readyNodes(ctx, t, f)
	require.NotEmpty(t, nodes)
	v2 := f.Image("testserver:v2")
	inPlace := func(maxUnavailable int32) v1beta1.DaemonSetUpdateStrategy {
		return v1beta1.DaemonSetUpdateStrategy{Type: v1beta1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &v1beta1.RollingUpdateDaemonSet{
			Type: v1beta1.InplaceRollingUpdateType, MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)),
		}}
	}

	t.Run("should run and stop simple daemon", func(t *testing.T) {
		t.Parallel()
		createDaemonSet(ctx, t, f, testDaemonSet(f, "simple", v1beta1.DaemonSetUpdateStrategy{}))
		pods := waitDaemonPods(ctx, t, f, "simple", "a ready pod on every node", runningOn(nodes))
		waitDaemonStatus(ctx, t, f, "simple")
		victim := pods[nodes[0]][0]
		require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}))
		waitDaemonPods(ctx, t, f, "simple", "the deleted pod revived", func(m map[string][]corev1.Pod) bool {
			return runningOn(nodes)(m) && m[nodes[0]][0].UID != victim.UID
		})
	})

	t.Run("should run and stop complex daemon", func(t *testing.T) {
		t.Parallel()
		key := "e2e-color-" + f.Namespace
		ds := testDaemonSet(f, "complex", v1beta1.DaemonSetUpdateStrategy{})
		ds.Spec.Template.Spec.NodeSelector = map[string]string{key: "blue"}
		createDaemonSet(ctx, t, f, ds)
		labelNode := func(value *string) {
			t.Helper()
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
			require.NoError(t, err)
			_, err = f.Kube.CoreV1().Nodes().Patch(ctx, nodes[0], types.MergePatchType, patch, metav1.PatchOptions{})
			require.NoError(t, err)
		}
		t.Cleanup(func() { labelNode(nil) })
		waitDaemonPods(ctx, t, f, "complex", "no node selected, no pods", runningOn(nil))

		labelNode(ptr.To("blue"))
		waitDaemonPods(ctx, t, f, "complex", "a pod on the blue node", runningOn(nodes[:1]))
		waitDaemonStatus(ctx, t, f, "complex")

		labelNode(ptr.To("green"))
		waitDaemonPods(ctx, t, f, "complex", "the pod goes with the label", runningOn(nil))

		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{%q:"green"}}},"updateStrategy":{"type":"RollingUpdate"}}}`, key)
		_, err := f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Patch(ctx, "complex", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		waitDaemonPods(ctx, t, f, "complex", "a pod on the green node", runningOn(nodes[:1]))
		waitDaemonStatus(ctx, t, f, "complex")
	})

	t.Run("should retry creating failed daemon pods", func(t *testing.T) {
		t.Parallel()
		createDaemonSet(ctx, t, f, testDaemonSet(f, "retry", v1beta1.DaemonSetUpdateStrategy{}))
		pods := waitDaemonPods(ctx, t, f, "retry", "a ready pod on every node", runningOn(nodes))
		waitDaemonStatus(ctx, t, f, "retry")
		failed := pods[nodes[0]][0]
		// The kubelet puts the phase of a pod whose containers run back to
		// Running within seconds, so the test marks it Failed again until
		// the DaemonSet has reacted: a pod that keeps failing.
		markFailed := func(ctx context.Context) error {
			p, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, failed.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed)) {
				return nil
			}
			if err != nil {
				return err
			}
			p.Status.Phase = corev1.PodFailed
			_, err = f.Kube.CoreV1().Pods(f.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		require.NoError(t, markFailed(ctx))
		waitDaemonPods(ctx, t, f, "retry", "the failed pod replaced", func(m map[string][]corev1.Pod) bool {
			if err := markFailed(ctx); err != nil {
				t.Logf("mark pod %s Failed again: %v", failed.Name, err)
			}
			return runningOn(nodes)(m) && m[nodes[0]][0].UID != failed.UID
		})
		err := framework.WaitFor(ctx, daemonSetTimeout, func(ctx context.Context) (bool, error) {
			_, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, failed.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "the failed pod is deleted")
	})

	t.Run("should only inplace image if update daemonset image with inplace update strategy", func(t *testing.T) {
		t.Parallel()
		createDaemonSet(ctx, t, f, testDaemonSet(f, "inplace", inPlace(5)))
		before := uids(waitDaemonPods(ctx, t, f, "inplace", "a ready pod on every node", runningOn(nodes)))
		waitDaemonStatus(ctx, t, f, "inplace")
		updateDaemonSet(ctx, t, f, "inplace", func(ds *v1beta1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = v2 })
		after := waitDaemonPods(ctx, t, f, "inplace", "every pod runs the new image", imageOnEveryPod(nodes, v2))
		waitDaemonStatus(ctx, t, f, "inplace")
		require.Equal(t, before, uids(after), "no pod recreated: the same pods on the same nodes")
		for _, ps := range after {
			require.Contains(t, ps[0].Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady})
			require.EqualValues(t, 1, ps[0].Status.ContainerStatuses[0].RestartCount)
		}
	})

	t.Run("Should upgrade inplace if update image and recreate if update others", func(t *testing.T) {
		t.Parallel()
		createDaemonSet(ctx, t, f, testDaemonSet(f, "mixed", inPlace(20)))
		for _, tc := range []struct {
			what     string
			update   func(*v1beta1.DaemonSet)
			recreate bool
		}{
			{"image", func(ds *v1beta1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = v2 }, false},
			{"env", func(ds *v1beta1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "foo", Value: "bar"}}
			}, true},
		} {
			before := uids(waitDaemonPods(ctx, t, f, "mixed", "a ready pod on every node", runningOn(nodes)))
			waitDaemonStatus(ctx, t, f, "mixed")
			updateDaemonSet(ctx, t, f, "mixed", tc.update)
			ds := waitDaemonStatus(ctx, t, f, "mixed")
			after := waitDaemonPods(ctx, t, f, "mixed", "every pod updated", func(m map[string][]corev1.Pod) bool {
				if !imageOnEveryPod(nodes, v2)(m) {
					return false
				}
				for _, ps := range m {
					if ps[0].Labels[wellknown.LabelControllerRevisionHash] != ds.Status.UpdateRevision {
						return false
					}
				}
				return true
			})
			for n, uid := range uids(after) {
				require.Equal(t, tc.recreate, uid != before[n], "%s change on node %s: recreated %v", tc.what, n, tc.recreate)
				require.Contains(t, after[n][0].Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: wellknown.ReadinessGateInPlaceUpdateReady})
			}
		}
	})

	t.Run("should upgrade one by one on steps if there is pre-delete hook", func(t *testing.T) {
		t.Parallel()
		const hook = "my-pre-delete"
		ds := testDaemonSet(f, "predelete", inPlace(1))
		ds.Spec.Lifecycle = &pub.Lifecycle{PreDelete: &pub.LifecycleHook{LabelsHandler: map[string]string{hook: "true"}}}
		ds.Spec.Template.Labels[hook] = "true"
		ds.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
		createDaemonSet(ctx, t, f, ds)
		before := waitDaemonPods(ctx, t, f, "predelete", "a ready pod on every node", runningOn(nodes))
		waitDaemonStatus(ctx, t, f, "predelete")
		updateDaemonSet(ctx, t, f, "predelete", func(ds *v1beta1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12m")}
			ds.Spec.Template.Spec.Containers[0].Env = append(ds.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "test", Value: "test"})
		})
		var held corev1.Pod
		pods := waitDaemonPods(ctx, t, f, "predelete", "one pod in PreparingDelete", func(m map[string][]corev1.Pod) bool {
			n := 0
			for _, ps := range m {
				for _, p := range ps {
					if p.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStatePreparingDelete) {
						n, held = n+1, p
					}
				}
			}
			return n == 1
		})
		require.Equal(t, uids(before), uids(pods), "no pod deleted while the hook holds it")

		patchPodLabels(ctx, t, f, held.Name, map[string]any{hook: nil})
		err := framework.WaitFor(ctx, daemonSetTimeout, func(ctx context.Context) (bool, error) {
			_, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, held.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "the released pod is deleted")
		cur, err := f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Get(ctx, "predelete", metav1.GetOptions{})
		require.NoError(t, err)
		waitDaemonPods(ctx, t, f, "predelete", "one pod at the new revision", func(m map[string][]corev1.Pod) bool {
			n := 0
			for _, ps := range m {
				for _, p := range ps {
					if p.Labels[wellknown.LabelControllerRevisionHash] == cur.Status.UpdateRevision {
						n++
					}
				}
			}
			return n == 1
		})
	})

	t.Run("should successfully surging update daemonset with minReadySeconds", func(t *testing.T) {
		t.Parallel()
		ds := testDaemonSet(f, "surge", v1beta1.DaemonSetUpdateStrategy{Type: v1beta1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &v1beta1.RollingUpdateDaemonSet{
			MaxSurge: ptr.To(intstr.FromString("100%")), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		}})
		ds.Spec.MinReadySeconds = 10
		createDaemonSet(ctx, t, f, ds)
		old := waitDaemonPods(ctx, t, f, "surge", "a ready pod on every node", runningOn(nodes))
		cur := waitDaemonStatus(ctx, t, f, "surge")
		updateDaemonSet(ctx, t, f, "surge", func(ds *v1beta1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = v2 })

		surged := map[string]bool{}
		waitDaemonPods(ctx, t, f, "surge", "a surge pod next to every old one", func(m map[string][]corev1.Pod) bool {
			for n, ps := range m {
				if len(ps) >= 2 && slices.ContainsFunc(ps, func(p corev1.Pod) bool { return p.UID == old[n][0].UID }) {
					surged[n] = true // the old pod is still there, not being deleted
				}
			}
			return len(surged) == int(cur.Status.DesiredNumberScheduled)
		})
		final := waitDaemonPods(ctx, t, f, "surge", "the old pods gone", func(m map[string][]corev1.Pod) bool {
			return imageOnEveryPod(nodes, v2)(m)
		})
		for n, ps := range final {
			require.NotEqual(t, old[n][0].UID, ps[0].UID)
			since := podstatus.ReadySince(&ps[0])
			require.NotNil(t, since)
			require.Greater(t, time.Since(*since), time.Duration(ds.Spec.MinReadySeconds)*time.Second,
				"on node %s the old pod went only after the new one was ready for minReadySeconds", n)
		}
	})
}

// TestDaemonSetSeedManifests applies the Advanced DaemonSet YAMLs of the
// seeds at apps.kruise.io/v1alpha1 (completed only where a fragment cannot
// apply) and checks that each does what its seed says.
func TestDaemonSetSeedManifests(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := readyNodes(ctx, t, f)
	v2 := f.Image("testserver:v2")
	apply := func(t *testing.T, file string) string {
		t.Helper()
		var ds v1alpha1.DaemonSet
		readSeed(t, f, file, &ds)
		_, err := f.Shoal.AppsV1alpha1().DaemonSets(f.Namespace).Create(ctx, &ds, metav1.CreateOptions{})
		require.NoError(t, err, "apply %s", file)
		return ds.Name
	}
	podsOf := func(name string) map[string][]corev1.Pod {
		list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		require.NoError(t, err)
		out := map[string][]corev1.Pod{}
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p)
			}
		}
		return out
	}
	waitPods := func(t *testing.T, name, what string, done func(map[string][]corev1.Pod) bool) map[string][]corev1.Pod {
		t.Helper()
		var last map[string][]corev1.Pod
		err := framework.WaitFor(ctx, daemonSetTimeout, func(context.Context) (bool, error) {
			last = podsOf(name)
			return done(last), nil
		})
		require.NoError(t, err, "%s: %s; %s", name, what, podsByNodeString(last))
		return last
	}

	t.Run("000 pre-download with parallelism 10", func(t *testing.T) {
		t.Parallel()
		name := apply(t, "daemonset-predownload.yaml")
		waitPods(t, name, "a ready pod on every node", runningOn(nodes))
		updateDaemonSet(ctx, t, f, name, func(ds *v1beta1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = v2 })
		var job *v1alpha1.ImagePullJob
		err := framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			list, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i := range list.Items {
				if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.Name == name && ref.Kind == "DaemonSet" {
					job = &list.Items[i]
				}
			}
			return job != nil, nil
		})
		require.NoError(t, err, "the update created an ImagePullJob")
		require.Equal(t, v2, job.Spec.Image)
		require.Equal(t, 10, job.Spec.Parallelism.IntValue(), "apps.kruise.io/image-predownload-parallelism")
		waitPods(t, name, "every pod at the new image", imageOnEveryPod(nodes, v2))
		err = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			_, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "the pre-download job is deleted once every pod is updated")
	})

	t.Run("000 and 003 preDelete hook holds the recreated pod", func(t *testing.T) {
		t.Parallel()
		name := apply(t, "daemonset-predelete-hook.yaml")
		before := waitPods(t, name, "a ready pod on every node", runningOn(nodes))
		updateDaemonSet(ctx, t, f, name, func(ds *v1beta1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CONFIG", Value: "v2"}}
		})
		var held corev1.Pod
		pods := waitPods(t, name, "one pod held in PreparingDelete", func(m map[string][]corev1.Pod) bool {
			for _, ps := range m {
				for _, p := range ps {
					if p.Labels[wellknown.LabelLifecycleState] == string(wellknown.LifecycleStatePreparingDelete) {
						held = p
						return true
					}
				}
			}
			return false
		})
		require.Equal(t, uids(before), uids(pods), "held, not deleted")
		patchPodLabels(ctx, t, f, held.Name, map[string]any{"example.io/block-deleting": nil})
		err := framework.WaitFor(ctx, daemonSetTimeout, func(ctx context.Context) (bool, error) {
			_, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, held.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "released, the pod is deleted")
	})
}
