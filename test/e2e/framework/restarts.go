package framework

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckNoRestarts returns an error listing every container (init containers
// included) of every pod in namespace whose restartCount is above zero,
// with how its last instance ended. A namespace that does not exist has no
// restarts. The suite runs it for shoal-system at the end, as OpenKruise's
// CI does for kruise-system: a component that crashed during the tests is a
// failure even if every test passed.
func (c *Clients) CheckNoRestarts(ctx context.Context, namespace string) error {
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	var errs []error
	for _, pod := range pods.Items {
		statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
		for _, cs := range statuses {
			if cs.RestartCount > 0 {
				errs = append(errs, fmt.Errorf("%s/%s container %s restarted %d times (last: %s)",
					namespace, pod.Name, cs.Name, cs.RestartCount, describeTermination(cs.LastTerminationState.Terminated)))
			}
		}
	}
	return errors.Join(errs...)
}

func describeTermination(t *corev1.ContainerStateTerminated) string {
	if t == nil {
		return "unknown"
	}
	s := fmt.Sprintf("exit code %d, reason %s", t.ExitCode, t.Reason)
	if t.Message != "" {
		s += ": " + t.Message
	}
	return s
}
