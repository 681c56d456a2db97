//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/test/e2e/framework"
)

// Timeouts of the suite. Generous enough for a cold image pull on kind.
const (
	podStartTimeout = 3 * time.Minute
	execTimeout     = 70 * time.Second
)

// skipReason is set by TestMain when the suite has no cluster to run on.
var skipReason string

// newFramework skips t when the suite is not configured and otherwise
// gives it a framework with a namespace of its own.
func newFramework(t *testing.T) *framework.Framework {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	f := framework.New(t)
	f.APIVersion = apiVersionFor(t)
	return f
}

// requireSchedulableNodes skips t unless the cluster has at least n nodes
// that take ordinary pods, and returns them.
func requireSchedulableNodes(ctx context.Context, t *testing.T, f *framework.Framework, n int) []corev1.Node {
	t.Helper()
	nodes, err := f.SchedulableNodes(ctx)
	require.NoError(t, err)
	if len(nodes) < n {
		t.Skipf("needs %d schedulable nodes, the cluster has %d (local cluster: make cluster-up NODES=%d)", n, len(nodes), n)
	}
	return nodes
}

// testserverDeployment is a Deployment of replicas testservers answering
// HTTP on 8080 (GET / returns the pod's host name), at most one per node.
func testserverDeployment(f *framework.Framework, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: new(int64(1)),
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       corev1.LabelHostname,
						WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: labels},
						// Tainted nodes (a kind control plane) are no domain
						// of the spread.
						NodeTaintsPolicy: new(corev1.NodeInclusionPolicyHonor),
					}},
					Containers: []corev1.Container{{
						Name:  "testserver",
						Image: f.Image("testserver:latest"),
						Args:  []string{"serve", "--port", "8080"},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/healthz",
								Port: intstr.FromInt32(8080),
							}},
							PeriodSeconds: 2,
						},
					}},
				},
			},
		},
	}
}

// runTestservers creates a testserverDeployment and returns its ready pods.
func runTestservers(ctx context.Context, t *testing.T, f *framework.Framework, name string, replicas int32) []corev1.Pod {
	t.Helper()
	_, err := f.Kube.AppsV1().Deployments(f.Namespace).Create(ctx, testserverDeployment(f, name, replicas), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.WaitForDeploymentAvailable(ctx, f.Namespace, name, podStartTimeout)
	require.NoError(t, err)
	pods, err := f.WaitForPodsReady(ctx, f.Namespace, "app="+name, int(replicas), podStartTimeout)
	require.NoError(t, err)
	require.Len(t, pods, int(replicas))
	return pods
}

// busyboxPod is a busybox pod running script with sh; nodeName, if set,
// pins it to that node.
func busyboxPod(f *framework.Framework, name, nodeName, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			// sh as PID 1 ignores SIGTERM: do not wait 30s for it on cleanup.
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{
				Name:    "busybox",
				Image:   f.Image("busybox:latest"),
				Command: []string{"sh", "-c", script},
			}},
		},
	}
}

// runBusybox creates a busyboxPod and waits until it is ready.
func runBusybox(ctx context.Context, t *testing.T, f *framework.Framework, name, nodeName, script string) *corev1.Pod {
	t.Helper()
	_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, busyboxPod(f, name, nodeName, script), metav1.CreateOptions{})
	require.NoError(t, err)
	pods, err := f.WaitForPodsReady(ctx, f.Namespace, "app="+name, 1, podStartTimeout)
	require.NoError(t, err)
	return &pods[0]
}

// execBusybox runs cmd in the busybox container of pod with execTimeout.
func execBusybox(ctx context.Context, f *framework.Framework, pod string, cmd ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	return f.ExecInPod(ctx, pod, "busybox", cmd)
}

// runHTTPClient starts a pod on nodeName whose testserver can make HTTP
// requests for the test (testserver get; Debian's static busybox wget
// crashes) and returns it once ready.
func runHTTPClient(ctx context.Context, t *testing.T, f *framework.Framework, name, nodeName string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			Containers: []corev1.Container{{
				Name:  "client",
				Image: f.Image("testserver:latest"),
				Args:  []string{"pause"},
			}},
		},
	}
	_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	pods, err := f.WaitForPodsReady(ctx, f.Namespace, "app="+name, 1, podStartTimeout)
	require.NoError(t, err)
	return &pods[0]
}

// httpGet makes a GET from inside pod (started by runHTTPClient) and
// returns the body.
func httpGet(ctx context.Context, f *framework.Framework, pod, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	stdout, stderr, err := f.ExecInPod(ctx, pod, "client", []string{"/testserver", "get", "--timeout", "5s", url})
	if err != nil {
		return "", fmt.Errorf("GET %s from %s: %w (stderr: %q)", url, pod, err, stderr)
	}
	return stdout, nil
}

// sandbox is one line of `testserver cri-pods`: a pod sandbox as the
// node's container runtime knows it.
type sandbox struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
	State     string `json:"state"`
}

// parseSandboxes reads the JSON lines of a cri-pods log, skipping any
// other line.
func parseSandboxes(log string) []sandbox {
	var out []sandbox
	for _, line := range strings.Split(log, "\n") {
		var s sandbox
		if json.Unmarshal([]byte(line), &s) == nil && s.Name != "" {
			out = append(out, s)
		}
	}
	return out
}

// objectClient is the part of a typed client (a CloneSet's, a
// DaemonSet's, ...) that waitObject and updateObject use.
type objectClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// waitObject polls object name through c until done says so, at most
// timeout; a failure names what was awaited and shows status of the last
// copy read.
func waitObject[T any](ctx context.Context, t *testing.T, c objectClient[T], timeout time.Duration, name, what string,
	done func(T) bool, status func(T) any) T {
	t.Helper()
	var last T
	var seen bool
	err := framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		obj, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last, seen = obj, true
		return done(obj), nil
	})
	var lastStatus any = "none read"
	if seen {
		lastStatus = status(last)
	}
	require.NoError(t, err, "%s %s: %s; last status %+v", fmt.Sprintf("%T", last), name, what, lastStatus)
	return last
}

// updateObject reads, changes and writes object name through c, retrying
// on a conflict with the controllers' status writes.
func updateObject[T any](ctx context.Context, t *testing.T, c objectClient[T], name string, change func(T)) {
	t.Helper()
	err := framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		obj, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(obj)
		_, err = c.Update(ctx, obj, metav1.UpdateOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "update %s", name)
}
