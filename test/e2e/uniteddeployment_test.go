//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// udTimeout bounds one UnitedDeployment step.
const udTimeout = 2 * time.Minute

// testUnitedDeployment is a UnitedDeployment "name" of replicas whose
// subsets are workloads of template kind kind ("CloneSet",
// "AdvancedStatefulSet" or "Deployment") of the test server.
func testUnitedDeployment(f *framework.Framework, name, kind string, replicas int32, subsets ...v1alpha1.Subset) *v1alpha1.UnitedDeployment {
	labels := map[string]string{"app": name}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			}},
		},
	}
	ud := &v1alpha1.UnitedDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.UnitedDeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Topology: v1alpha1.Topology{Subsets: subsets},
		},
	}
	sel := &metav1.LabelSelector{MatchLabels: maps.Clone(labels)}
	switch kind {
	case "CloneSet":
		ud.Spec.Template.CloneSetTemplate = &v1alpha1.CloneSetTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
			Spec: v1alpha1.CloneSetSpec{Selector: sel, Template: pod}}
	case "AdvancedStatefulSet":
		ud.Spec.Template.AdvancedStatefulSetTemplate = &v1alpha1.AdvancedStatefulSetTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
			Spec: v1beta1.StatefulSetSpec{Selector: sel, Template: pod, PodManagementPolicy: appsv1.ParallelPodManagement}}
	default:
		ud.Spec.Template.DeploymentTemplate = &v1alpha1.DeploymentTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
			Spec: appsv1.DeploymentSpec{Selector: sel, Template: pod}}
	}
	return ud
}

// udSubset is a subset with replicas, minReplicas and maxReplicas ("" for
// none).
func udSubset(name, replicas, minReplicas, maxReplicas string) v1alpha1.Subset {
	parse := func(s string) *intstr.IntOrString {
		if s == "" {
			return nil
		}
		v := intstr.Parse(s)
		return &v
	}
	return v1alpha1.Subset{Name: name, Replicas: parse(replicas), MinReplicas: parse(minReplicas), MaxReplicas: parse(maxReplicas)}
}

// subsetPods counts the UnitedDeployment's running, ready pods by subset.
func subsetPods(ctx context.Context, f *framework.Framework, name string) (map[string]int32, error) {
	pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && framework.IsPodReady(&p) {
			out[p.Labels[wellknown.LabelSubsetName]]++
		}
	}
	return out, nil
}

// waitSubsets waits until the UnitedDeployment's status and its pods show
// want (replicas by subset; zeros included).
func waitSubsets(ctx context.Context, t *testing.T, f *framework.Framework, name string, want map[string]int32) {
	t.Helper()
	var have map[string]int32
	var status v1alpha1.UnitedDeploymentStatus
	err := framework.WaitFor(ctx, udTimeout, func(ctx context.Context) (bool, error) {
		ud, err := uds(t, f).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status = ud.Status
		if ud.Status.ObservedGeneration != ud.Generation || !maps.Equal(ud.Status.SubsetReplicas, want) {
			return false, nil
		}
		if have, err = subsetPods(ctx, f, name); err != nil {
			return false, err
		}
		for s, n := range want {
			if have[s] != n {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "UnitedDeployment %s: want %v; status subsetReplicas %v (%+v), ready pods %v", name, want, status.SubsetReplicas, status, have)
}

// scaleUnitedDeployment sets spec.replicas.
func scaleUnitedDeployment(ctx context.Context, t *testing.T, f *framework.Framework, name string, replicas int32) {
	t.Helper()
	updateObject(ctx, t, uds(t, f), name, func(ud *v1alpha1.UnitedDeployment) { ud.Spec.Replicas = ptr.To(replicas) })
}

// subsets maps subset-0, subset-1, ... to replicas.
func subsets(replicas ...int32) map[string]int32 {
	out := map[string]int32{}
	for i, r := range replicas {
		out[fmt.Sprintf("subset-%d", i)] = r
	}
	return out
}

// TestUnitedDeployment ports OpenKruise's allocator cases and checks a
// manual update's partitions.
func TestUnitedDeployment(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()

	// OpenKruise: "united deployment with elastic allocator"
	t.Run("united deployment with elastic allocator", func(t *testing.T) {
		t.Parallel()
		ud := testUnitedDeployment(f, "ud-elastic", "AdvancedStatefulSet", 3,
			udSubset("subset-0", "", "1", "2"), udSubset("subset-1", "", "1", "2"), udSubset("subset-2", "", "1", ""))
		_, err := uds(t, f).Create(ctx, ud, metav1.CreateOptions{})
		require.NoError(t, err)
		waitSubsets(ctx, t, f, ud.Name, subsets(1, 1, 1))
		scaleUnitedDeployment(ctx, t, f, ud.Name, 7)
		waitSubsets(ctx, t, f, ud.Name, subsets(2, 2, 3))
		scaleUnitedDeployment(ctx, t, f, ud.Name, 1)
		waitSubsets(ctx, t, f, ud.Name, subsets(1, 0, 0))
	})

	// OpenKruise: "united deployment with specific allocator"
	t.Run("united deployment with specific allocator", func(t *testing.T) {
		t.Parallel()
		ud := testUnitedDeployment(f, "ud-specific", "CloneSet", 3,
			udSubset("subset-0", "25%", "", ""), udSubset("subset-1", "25%", "", ""), udSubset("subset-2", "", "", ""))
		_, err := uds(t, f).Create(ctx, ud, metav1.CreateOptions{})
		require.NoError(t, err)
		waitSubsets(ctx, t, f, ud.Name, subsets(1, 1, 1))
		scaleUnitedDeployment(ctx, t, f, ud.Name, 4)
		waitSubsets(ctx, t, f, ud.Name, subsets(1, 1, 2))
		scaleUnitedDeployment(ctx, t, f, ud.Name, 1)
		waitSubsets(ctx, t, f, ud.Name, subsets(0, 0, 1))
	})

	// Manual update: each subset's partition keeps that many pods at the
	// old revision; the subsets' workloads carry the nodes' terms.
	t.Run("manual update partitions and subset topology", func(t *testing.T) {
		t.Parallel()
		nodes := requireSchedulableNodes(ctx, t, f, 2)
		pin := func(node string) corev1.NodeSelectorTerm {
			return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}
		}
		a, b := udSubset("subset-0", "2", "", ""), udSubset("subset-1", "", "", "")
		a.NodeSelectorTerm, b.NodeSelectorTerm = pin(nodes[0].Name), pin(nodes[1].Name)
		ud := testUnitedDeployment(f, "ud-manual", "AdvancedStatefulSet", 4, a, b)
		_, err := uds(t, f).Create(ctx, ud, metav1.CreateOptions{})
		require.NoError(t, err)
		waitSubsets(ctx, t, f, ud.Name, subsets(2, 2))
		pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + ud.Name})
		require.NoError(t, err)
		for _, p := range pods.Items {
			want := nodes[0].Name
			if p.Labels[wellknown.LabelSubsetName] == "subset-1" {
				want = nodes[1].Name
			}
			require.Equal(t, want, p.Spec.NodeName, "pod %s of %s", p.Name, p.Labels[wellknown.LabelSubsetName])
		}

		updateObject(ctx, t, uds(t, f), ud.Name, func(ud *v1alpha1.UnitedDeployment) {
			ud.Spec.Template.AdvancedStatefulSetTemplate.Spec.Template.Spec.Containers[0].Image = f.Image("testserver:v2")
			ud.Spec.UpdateStrategy = v1alpha1.UnitedDeploymentUpdateStrategy{Type: v1alpha1.ManualUpdateStrategyType,
				ManualUpdate: &v1alpha1.ManualUpdate{Partitions: map[string]int32{"subset-0": 1}}}
		})
		err = framework.WaitFor(ctx, udTimeout, func(ctx context.Context) (bool, error) {
			pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + ud.Name})
			if err != nil {
				return false, err
			}
			images := map[string]map[string]int{}
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil || !framework.IsPodReady(&p) {
					return false, nil
				}
				s := p.Labels[wellknown.LabelSubsetName]
				if images[s] == nil {
					images[s] = map[string]int{}
				}
				images[s][p.Spec.Containers[0].Image]++
			}
			old, v2 := f.Image("testserver:latest"), f.Image("testserver:v2")
			return maps.Equal(images["subset-0"], map[string]int{old: 1, v2: 1}) && maps.Equal(images["subset-1"], map[string]int{v2: 2}), nil
		})
		require.NoError(t, err, "subset-0 keeps one old pod (partition 1), subset-1 is all new")
		got, err := uds(t, f).Get(ctx, ud.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, map[string]int32{"subset-0": 1}, got.Status.UpdateStatus.CurrentPartitions)
	})
}
