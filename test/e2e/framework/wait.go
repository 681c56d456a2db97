package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often the wait helpers check their condition, at
// most (see pollEvery).
const PollInterval = time.Second

// pollEvery is how often WaitFor checks within timeout: PollInterval, or
// a twentieth of a shorter window (at least 50 ms). A check each second
// would leave "within 2 s" (OpenKruise's cases poll such windows every
// 10 ms) with checks at 0 and 1 s only: the poller's deadline races the
// check that is due at 2 s, so the window the test enforced was shorter
// than the one it names.
func pollEvery(timeout time.Duration) time.Duration {
	return min(PollInterval, max(timeout/20, 50*time.Millisecond))
}

// WaitFor checks cond every pollEvery(timeout), the first time at once,
// until it returns true (nil), returns an error (that error), or timeout
// passes or ctx ends (an error saying so). An error of cond that only says
// the deadline came during the call counts as the timeout.
func WaitFor(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, pollEvery(timeout), timeout, true, func(ctx context.Context) (bool, error) {
		done, err := cond(ctx)
		if err != nil && ctx.Err() != nil {
			return false, nil // the poller returns ctx's error
		}
		return done, err
	})
}

// waitWithState is WaitFor for helpers that describe what they last saw,
// so that a timeout says why the condition was not met.
func waitWithState(ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) error {
	var last string
	err := WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		done, state, err := cond(ctx)
		if state != "" {
			last = state
		}
		return done, err
	})
	switch {
	case err == nil:
		return nil
	case last == "":
		return fmt.Errorf("waiting %v for %s: %w", timeout, what, err)
	default:
		return fmt.Errorf("waiting %v for %s: %w; last seen: %s", timeout, what, err, last)
	}
}

// WaitForPodsReady waits until at least n pods in namespace ns matching the
// label selector are Ready and not being deleted, and returns the ready ones.
func (c *Clients) WaitForPodsReady(ctx context.Context, ns, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	var ready []corev1.Pod
	err := waitWithState(ctx, timeout, fmt.Sprintf("%d ready pods %q in %s", n, selector, ns),
		func(ctx context.Context) (bool, string, error) {
			pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, "", err
			}
			ready = ready[:0]
			var states []string
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && IsPodReady(&p) {
					ready = append(ready, p)
				}
				states = append(states, p.Name+"="+podState(&p))
			}
			return len(ready) >= n, listState(states, "no pods"), nil
		})
	return ready, err
}

// WaitForDeploymentAvailable waits until a Deployment has rolled out its
// current spec and all of its replicas are available.
func (c *Clients) WaitForDeploymentAvailable(ctx context.Context, ns, name string, timeout time.Duration) (*appsv1.Deployment, error) {
	var d *appsv1.Deployment
	err := waitWithState(ctx, timeout, "deployment "+ns+"/"+name+" available",
		func(ctx context.Context) (bool, string, error) {
			var err error
			d, err = c.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			s := d.Status
			state := fmt.Sprintf("generation %d observed %d, replicas %d updated %d ready %d available %d of %d",
				d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, want)
			done := s.ObservedGeneration >= d.Generation && s.Replicas == want &&
				s.UpdatedReplicas == want && s.AvailableReplicas == want
			return done, state, nil
		})
	return d, err
}

// WaitForDaemonSetReady waits until a DaemonSet has at least one pod to run
// and every one of them is updated, ready and available.
func (c *Clients) WaitForDaemonSetReady(ctx context.Context, ns, name string, timeout time.Duration) (*appsv1.DaemonSet, error) {
	var ds *appsv1.DaemonSet
	err := waitWithState(ctx, timeout, "daemonset "+ns+"/"+name+" ready",
		func(ctx context.Context) (bool, string, error) {
			var err error
			ds, err = c.Kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			s := ds.Status
			state := fmt.Sprintf("generation %d observed %d, desired %d scheduled %d updated %d ready %d available %d",
				ds.Generation, s.ObservedGeneration, s.DesiredNumberScheduled, s.CurrentNumberScheduled,
				s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable)
			want := s.DesiredNumberScheduled
			done := s.ObservedGeneration >= ds.Generation && want > 0 &&
				s.UpdatedNumberScheduled == want && s.NumberReady == want && s.NumberAvailable == want
			return done, state, nil
		})
	return ds, err
}

// WaitForNodesReady waits until at least n nodes are Ready and returns the
// ready ones.
func (c *Clients) WaitForNodesReady(ctx context.Context, n int, timeout time.Duration) ([]corev1.Node, error) {
	var ready []corev1.Node
	err := waitWithState(ctx, timeout, fmt.Sprintf("%d ready nodes", n),
		func(ctx context.Context) (bool, string, error) {
			nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			ready = ready[:0]
			var states []string
			for _, node := range nodes.Items {
				status := NodeConditionStatus(&node, corev1.NodeReady)
				if status == corev1.ConditionTrue {
					ready = append(ready, node)
				}
				states = append(states, fmt.Sprintf("%s Ready=%s", node.Name, status))
			}
			return len(ready) >= n, listState(states, "no nodes"), nil
		})
	return ready, err
}

// WaitForNodeCondition waits until a node's condition of type cond has
// status, e.g. (node, corev1.NodeReady, corev1.ConditionFalse) after the
// node's kubelet was stopped.
func (c *Clients) WaitForNodeCondition(ctx context.Context, node string, cond corev1.NodeConditionType, status corev1.ConditionStatus, timeout time.Duration) (*corev1.Node, error) {
	var got *corev1.Node
	err := waitWithState(ctx, timeout, fmt.Sprintf("node %s %s=%s", node, cond, status),
		func(ctx context.Context) (bool, string, error) {
			var err error
			got, err = c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			now := NodeConditionStatus(got, cond)
			return now == status, fmt.Sprintf("%s=%s", cond, now), nil
		})
	return got, err
}

// SchedulableNodes lists the Ready nodes that take ordinary pods: not
// cordoned and without NoSchedule or NoExecute taints (a kind
// control-plane node, for one, is left out).
func (c *Clients) SchedulableNodes(ctx context.Context) ([]corev1.Node, error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []corev1.Node
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable || NodeConditionStatus(&n, corev1.NodeReady) != corev1.ConditionTrue {
			continue
		}
		tainted := false
		for _, taint := range n.Spec.Taints {
			if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
				tainted = true
			}
		}
		if !tainted {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// IsPodReady reports whether pod's Ready condition is True.
func IsPodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeConditionStatus returns the status of node's condition of type cond,
// or Unknown if the node does not report it.
func NodeConditionStatus(node *corev1.Node, cond corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == cond {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// podState summarises a pod for timeout messages: phase, node, readiness
// and why a container is waiting.
func podState(pod *corev1.Pod) string {
	parts := []string{string(pod.Status.Phase)}
	if pod.Spec.NodeName != "" {
		parts = append(parts, "on "+pod.Spec.NodeName)
	}
	if IsPodReady(pod) {
		parts = append(parts, "ready")
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			parts = append(parts, "unschedulable: "+c.Message)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("%s waiting %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	if pod.DeletionTimestamp != nil {
		parts = append(parts, "terminating")
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// listState joins states for a timeout message, or says none.
func listState(states []string, none string) string {
	if len(states) == 0 {
		return none
	}
	return strings.Join(states, ", ")
}
