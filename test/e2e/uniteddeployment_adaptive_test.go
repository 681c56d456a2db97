//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// udAdaptive drives one of OpenKruise's adaptive UnitedDeployment cases
// (test/e2e/apps/v1alpha1/uniteddeployment.go) with the assertions of its
// UnitedDeploymentManager: pods are counted by subset label, pending and
// terminating ones included; each check polls for up to 2 minutes.
type udAdaptive struct {
	t    *testing.T
	ctx  context.Context
	f    *framework.Framework
	name string
	// node is the node whose labels the case turns subsets on and off
	// with (OpenKruise's "ci-testing-worker").
	node string
}

// newUDAdaptive creates the UnitedDeployment ud with the Adaptive
// strategy (rescheduleCriticalSeconds critical, unschedulableLastSeconds
// last, reserving or not) once labels are set on the node.
func newUDAdaptive(t *testing.T, f *framework.Framework, ud *v1alpha1.UnitedDeployment, critical, last int32, reserve bool, labels map[string]string) *udAdaptive {
	t.Helper()
	ctx := t.Context()
	u := &udAdaptive{t: t, ctx: ctx, f: f, name: ud.Name, node: requireSchedulableNodes(ctx, t, f, 1)[0].Name}
	for k, v := range labels {
		u.setNodeLabel(k, v)
	}
	ud.Spec.Topology.ScheduleStrategy = v1alpha1.UnitedDeploymentScheduleStrategy{
		Type: v1alpha1.AdaptiveUnitedDeploymentScheduleStrategyType,
		Adaptive: &v1alpha1.AdaptiveUnitedDeploymentStrategy{
			RescheduleCriticalSeconds: ptr.To(critical), UnschedulableLastSeconds: ptr.To(last), ReserveUnschedulablePods: reserve,
		},
	}
	_, err := uds(t, f).Create(ctx, ud, metav1.CreateOptions{})
	require.NoError(t, err)
	return u
}

// udNodeLabel is a node label key of this test's: the cases run at
// v1alpha1 and again at v1beta1 (TestV1beta1) at the same time, on the
// same node.
func udNodeLabel(f *framework.Framework, name string) string {
	return "ud-e2e-" + f.APIVersion + "/" + name
}

// nodeSelected is a subset term requiring the node label key=value.
func nodeSelected(key, value string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}
}

// setNodeLabel sets a label on the case's node; the label goes when the
// test ends.
func (u *udAdaptive) setNodeLabel(key, value string) {
	u.t.Helper()
	patch := func(ctx context.Context, v any) error {
		raw := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, key, v)
		_, err := u.f.Kube.CoreV1().Nodes().Patch(ctx, u.node, types.MergePatchType, raw, metav1.PatchOptions{})
		return err
	}
	require.NoError(u.t, patch(u.ctx, fmt.Sprintf("%q", value)), "label node %s %s=%s", u.node, key, value)
	u.t.Cleanup(func() {
		if err := patch(context.Background(), "null"); err != nil {
			u.t.Errorf("remove label %s from node %s: %v", key, u.node, err)
		}
	})
}

// get reads the UnitedDeployment.
func (u *udAdaptive) get(ctx context.Context) (*v1alpha1.UnitedDeployment, error) {
	return uds(u.t, u.f).Get(ctx, u.name, metav1.GetOptions{})
}

// update changes the UnitedDeployment.
func (u *udAdaptive) update(change func(*v1alpha1.UnitedDeployment)) {
	u.t.Helper()
	updateObject(u.ctx, u.t, uds(u.t, u.f), u.name, change)
}

// scale sets spec.replicas and waits until status.replicas (reserved
// pods not counted) is n for this generation, as OpenKruise's Scale does.
func (u *udAdaptive) scale(n int32) {
	u.t.Helper()
	u.update(func(ud *v1alpha1.UnitedDeployment) { ud.Spec.Replicas = ptr.To(n) })
	waitObject(u.ctx, u.t, uds(u.t, u.f), udTimeout, u.name, fmt.Sprintf("status.replicas %d", n),
		func(ud *v1alpha1.UnitedDeployment) bool {
			return ud.Status.ObservedGeneration == ud.Generation && ud.Status.Replicas == n
		},
		func(ud *v1alpha1.UnitedDeployment) any { return ud.Status })
}

// checkUnschedulable waits until subset i's Schedulable condition is
// False exactly when want[i].
func (u *udAdaptive) checkUnschedulable(want ...bool) {
	u.t.Helper()
	waitObject(u.ctx, u.t, uds(u.t, u.f), udTimeout, u.name, fmt.Sprintf("unschedulable subsets %v", want),
		func(ud *v1alpha1.UnitedDeployment) bool {
			for i, w := range want {
				i := slices.IndexFunc(ud.Status.SubsetStatuses, func(s v1alpha1.UnitedDeploymentSubsetStatus) bool { return s.Name == fmt.Sprintf("subset-%d", i) })
				if i < 0 {
					return false
				}
				unschedulable := false
				for _, c := range ud.Status.SubsetStatuses[i].Conditions {
					if c.Type == v1alpha1.UnitedDeploymentSubsetSchedulable {
						unschedulable = c.Status == corev1.ConditionFalse
					}
				}
				if unschedulable != w {
					return false
				}
			}
			return true
		},
		func(ud *v1alpha1.UnitedDeployment) any { return ud.Status.SubsetStatuses })
}

// podsBySubset counts every pod of the UnitedDeployment's current subsets
// (pending and terminating ones too) and its reserved ones.
func (u *udAdaptive) podsBySubset(ctx context.Context) (all, reserved map[string]int32, images map[string]int, err error) {
	ud, err := u.get(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	all, reserved, images = map[string]int32{}, map[string]int32{}, map[string]int{}
	for _, s := range ud.Spec.Topology.Subsets {
		all[s.Name], reserved[s.Name] = 0, 0
	}
	pods, err := u.f.Kube.CoreV1().Pods(u.f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + u.name})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, p := range pods.Items {
		s := p.Labels[wellknown.LabelSubsetName]
		if _, ok := all[s]; !ok {
			continue
		}
		all[s]++
		if p.Labels[wellknown.LabelUnitedDeploymentReservedPod] == "true" {
			reserved[s]++
		}
		images[p.Spec.Containers[0].Image]++
	}
	return all, reserved, images, nil
}

// checkPods waits until the subsets have exactly want pods.
func (u *udAdaptive) checkPods(want ...int32) {
	u.t.Helper()
	u.checkReserved(want, nil)
}

// checkReserved waits until the subsets have exactly total pods, of which
// reserved (nil: not checked) carry the reserved label.
func (u *udAdaptive) checkReserved(total, reserved []int32) {
	u.t.Helper()
	var all, res map[string]int32
	var status v1alpha1.UnitedDeploymentStatus
	err := framework.WaitFor(u.ctx, udTimeout, func(ctx context.Context) (bool, error) {
		a, r, _, err := u.podsBySubset(ctx)
		if err != nil {
			return false, nil
		}
		all, res = a, r
		if ud, err := u.get(ctx); err == nil {
			status = ud.Status
		}
		return maps.Equal(all, subsets(total...)) && (reserved == nil || maps.Equal(res, subsets(reserved...))), nil
	})
	require.NoError(u.t, err, "UnitedDeployment %s: want pods %v reserved %v; have %v reserved %v; status %+v", u.name, total, reserved, all, res, status)
}

// checkImage waits until every pod runs image.
func (u *udAdaptive) checkImage(image string) {
	u.t.Helper()
	var images map[string]int
	err := framework.WaitFor(u.ctx, udTimeout, func(ctx context.Context) (bool, error) {
		var err error
		if _, _, images, err = u.podsBySubset(ctx); err != nil {
			return false, nil
		}
		return len(images) == 1 && images[image] > 0, nil
	})
	require.NoError(u.t, err, "UnitedDeployment %s: every pod runs %s; have %v", u.name, image, images)
}

// TestUnitedDeploymentAdaptive ports OpenKruise's four adaptive
// UnitedDeployment cases. OpenKruise picks the subsets' workload kind at
// random (any kind; Deployment or CloneSet for the reserving ones, which
// refuse StatefulSet templates); here each case names one.
func TestUnitedDeploymentAdaptive(t *testing.T) {
	t.Parallel()
	f := newFramework(t)

	t.Run("adaptive united deployment basic", func(t *testing.T) {
		t.Parallel()
		key := udNodeLabel(f, "adaptive-ud")
		bad := udSubset("subset-1", "", "", "2")
		bad.NodeSelectorTerm = nodeSelected(key, "haha")
		ud := testUnitedDeployment(f, "adaptive-ud-elastic", "Deployment", 3,
			udSubset("subset-0", "", "", "2"), bad, udSubset("subset-2", "", "", ""))
		u := newUDAdaptive(t, f, ud, 10, 10, false, map[string]string{key: ""})

		// wait for rescheduling
		u.checkUnschedulable(false, true, false)
		u.checkPods(2, 0, 1)
		// scale up while unschedulable
		u.scale(5)
		u.checkPods(2, 0, 3)
		// scale down while unschedulable
		u.scale(4)
		u.checkPods(2, 0, 2)
		// wait subset recovery
		u.checkUnschedulable(false, false, false)
		u.checkPods(2, 0, 2)
		// scale up after recovery
		u.scale(5)
		u.checkPods(2, 1, 2)
		// scale down after recovery, pending first
		u.scale(4)
		u.checkPods(2, 0, 2)
		// scale down after recovery, goes to running
		u.scale(3)
		u.checkPods(2, 0, 1)
		// create new subset
		u.update(func(ud *v1alpha1.UnitedDeployment) {
			ud.Spec.Topology.Subsets = append(ud.Spec.Topology.Subsets, udSubset("subset-3", "", "2", ""))
		})
		// final status after scaling up to the new subset
		u.scale(6)
		u.checkUnschedulable(false, false, false, false)
		u.checkPods(2, 0, 2, 2)
		// fix subset-1 and wait recover
		u.setNodeLabel(key, "haha")
		u.checkUnschedulable(false, false, false, false)
		// final status after deleting the new subset
		u.update(func(ud *v1alpha1.UnitedDeployment) { ud.Spec.Topology.Subsets = ud.Spec.Topology.Subsets[:3] })
		u.checkUnschedulable(false, false, false)
		u.checkPods(2, 2, 2)
		// scale down after fixed (OpenKruise waits 10 s first)
		waitReady(u, 6)
		u.scale(3)
		u.checkUnschedulable(false, false, false)
		u.checkPods(2, 1, 0)
		// scale up after fixed
		u.scale(5)
		u.checkUnschedulable(false, false, false)
		u.checkPods(2, 2, 1)
	})

	t.Run("adaptive united deployment with min replicas", func(t *testing.T) {
		t.Parallel()
		key := udNodeLabel(f, "adaptive-ud-min")
		bad := udSubset("subset-0", "", "1", "2")
		bad.NodeSelectorTerm = nodeSelected(key, "haha")
		ud := testUnitedDeployment(f, "adaptive-ud-with-min", "CloneSet", 3, bad, udSubset("subset-1", "", "", ""))
		u := newUDAdaptive(t, f, ud, 10, 20, false, map[string]string{key: ""})

		// wait for rescheduling
		u.checkUnschedulable(true, false)
		u.checkPods(1, 2)
		// scale up while unschedulable
		u.scale(4)
		u.checkPods(1, 3)
		// scale down while unschedulable
		u.scale(3)
		u.checkPods(1, 2)
		// wait subset recovery (the pending pod must start)
		u.setNodeLabel(key, "haha")
		u.checkUnschedulable(false, false)
		u.checkPods(1, 2)
		// scale up after recovery
		u.scale(5)
		u.checkPods(2, 3)
		// scale down after recovery (OpenKruise waits 10 s first)
		waitReady(u, 5)
		u.scale(4)
		u.checkPods(2, 2)
		// scale down after recovery again
		u.scale(3)
		u.checkPods(2, 1)
		// and again
		u.scale(1)
		u.checkPods(1, 0)
	})

	// reserving runs a reserving case: before, the update (pending
	// reserved pods are replaced by pods of the new template too),
	// subset-0 recovering, then after.
	reserving := func(t *testing.T, name string, critical int32, minReplicas string, before, after func(u *udAdaptive)) {
		key0, key1 := udNodeLabel(f, "temp-"+name+"-0"), udNodeLabel(f, "temp-"+name+"-1")
		s0, s1 := udSubset("subset-0", "", minReplicas, ""), udSubset("subset-1", "", minReplicas, "")
		s0.NodeSelectorTerm, s1.NodeSelectorTerm = nodeSelected(key0, "true"), nodeSelected(key1, "true")
		ud := testUnitedDeployment(f, name, "Deployment", 2, s0, s1, udSubset("subset-2", "", "", ""))
		u := newUDAdaptive(t, f, ud, critical, 1, true, map[string]string{key0: "false", key1: "false"})
		before(u)
		v2 := f.Image("testserver:v2")
		u.update(func(ud *v1alpha1.UnitedDeployment) {
			ud.Spec.Template.DeploymentTemplate.Spec.Template.Spec.Containers[0].Image = v2
		})
		u.checkImage(v2)
		u.setNodeLabel(key0, "true")
		after(u)
	}

	t.Run("adaptive united deployment with unschedulable pods reserved", func(t *testing.T) {
		t.Parallel()
		reserving(t, "adaptive-ud-tr", 20, "", func(u *udAdaptive) {
			u.checkUnschedulable(true, true, false)
			u.checkReserved([]int32{2, 2, 2}, []int32{2, 2, 0})
			u.scale(4)
			u.checkReserved([]int32{2, 2, 4}, []int32{2, 2, 0})
			u.scale(2)
			u.checkReserved([]int32{2, 2, 2}, []int32{2, 2, 0})
			u.scale(4)
			u.checkReserved([]int32{2, 2, 4}, []int32{2, 2, 0})
		}, func(u *udAdaptive) {
			u.checkUnschedulable(false, false, false)
			u.checkReserved([]int32{4, 0, 0}, []int32{0, 0, 0})
			u.scale(5)
			u.checkReserved([]int32{5, 0, 0}, []int32{0, 0, 0})
		})
	})

	t.Run("adaptive united deployment with reserved pods and min replicas", func(t *testing.T) {
		t.Parallel()
		reserving(t, "adaptive-ud-trm", 10, "1", func(u *udAdaptive) {
			u.checkUnschedulable(true, true, false)
			u.checkReserved([]int32{1, 1, 2}, []int32{1, 1, 0})
			u.scale(4)
			u.checkReserved([]int32{1, 1, 4}, []int32{1, 1, 0})
			u.scale(2)
			u.checkReserved([]int32{1, 1, 2}, []int32{1, 1, 0})
			u.scale(4)
			u.checkReserved([]int32{1, 1, 4}, []int32{1, 1, 0})
		}, func(u *udAdaptive) {
			u.checkUnschedulable(false, true, false)
			u.checkReserved([]int32{4, 1, 0}, []int32{0, 1, 0})
			u.scale(5)
			u.checkReserved([]int32{5, 1, 0}, []int32{0, 1, 0})
		})
	})
}

// waitReady waits until n of the UnitedDeployment's pods are ready, every
// subset's pods among them, in place of OpenKruise's fixed 10 s sleep
// before a scale-in. The status must be of the current generation: one
// written before the last spec change still counts the pods of subsets
// that are gone, and a scale-in decided while a subset's new pods are not
// ready keeps the ready pods of the later subsets instead.
func waitReady(u *udAdaptive, n int32) {
	u.t.Helper()
	waitObject(u.ctx, u.t, uds(u.t, u.f), udTimeout, u.name, fmt.Sprintf("%d ready pods", n),
		func(ud *v1alpha1.UnitedDeployment) bool {
			if ud.Status.ObservedGeneration != ud.Generation || ud.Status.ReadyReplicas != n {
				return false
			}
			for _, s := range ud.Status.SubsetStatuses {
				if s.ReadyReplicas != s.Replicas {
					return false
				}
			}
			return true
		},
		func(ud *v1alpha1.UnitedDeployment) any { return ud.Status })
}
