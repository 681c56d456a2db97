//go:build e2e

package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/shoal-io/shoal/test/crdvalidation"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// shoalSystemNamespace is where Shoal's components run.
const shoalSystemNamespace = "shoal-system"

// TestMain runs the suite; see runSuite.
func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// runSuite runs the tests of the group SHOAL_E2E_GROUP names (see
// groups_test.go), then fails the suite if a Shoal component restarted
// while they ran or, after the serial group, a test namespace is left. Without a configured cluster every test skips
// with the reason.
func runSuite(m *testing.M) int {
	flag.Parse()
	group, err := selectGroup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	cfg, err := framework.Load()
	if errors.Is(err, framework.ErrNotConfigured) {
		skipReason = err.Error()
		fmt.Println("skipping every e2e test:", skipReason)
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// The serial group runs one test at a time: a test's cleanup does not
	// wait for its namespace to go, the suite waits for all at the end.
	serialGroup := group == "serial"
	if serialGroup {
		framework.DeferNamespaceWaits()
	}
	code := m.Run()

	clients, err := framework.NewClients(cfg)
	if err == nil && serialGroup {
		ctx, cancel := context.WithTimeout(context.Background(), framework.NamespaceDeleteTimeout+10*time.Second)
		if err := clients.WaitNamespacesGone(ctx, framework.NamespaceDeleteTimeout); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: after the suite: %v\n", err)
			code = 1
		}
		cancel()
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = clients.CheckNoRestarts(ctx, shoalSystemNamespace)
		cancel()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: restart check of %s after the suite:\n%v\n", shoalSystemNamespace, err)
		return 1
	}
	return code
}

// TestDeploymentSpreadsAcrossNodes proves that the scheduler sees the nodes
// and their hostname labels, and that every node runs pods to readiness.
func TestDeploymentSpreadsAcrossNodes(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	requireSchedulableNodes(ctx, t, f, 3)

	pods := runTestservers(ctx, t, f, "spread", 3)

	podByNode := map[string]string{}
	for _, p := range pods {
		podByNode[p.Spec.NodeName] = p.Name
	}
	require.Len(t, podByNode, 3, "pods by node: %v", podByNode)
}

// TestLogsAndExec proves that the apiserver reaches the kubelets for logs
// and exec (stdout, stderr and exit status).
func TestLogsAndExec(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	pod := runBusybox(ctx, t, f, "logs-exec", "", "echo hello-from-log; sleep 3600")

	var log string
	err := framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		log, err = f.PodLogs(ctx, pod.Name, "busybox")
		return strings.Contains(log, "hello-from-log"), err
	})
	require.NoError(t, err, "log so far: %q", log)

	stdout, _, err := execBusybox(ctx, f, pod.Name, "cat", "/etc/hostname")
	require.NoError(t, err)
	require.Equal(t, pod.Name, strings.TrimSpace(stdout))

	stdout, stderr, err := execBusybox(ctx, f, pod.Name, "echo", "ok")
	require.NoError(t, err)
	require.Equal(t, "ok\n", stdout)
	require.Empty(t, stderr)

	stdout, stderr, err = execBusybox(ctx, f, pod.Name, "sh", "-c", "echo to-stderr >&2; exit 3")
	var exitErr utilexec.ExitError
	require.ErrorAs(t, err, &exitErr)
	require.Equal(t, 3, exitErr.ExitStatus())
	require.Empty(t, stdout)
	require.Equal(t, "to-stderr\n", stderr)
}

// TestClusterIPServiceAcrossNodes proves pod-to-pod routing between nodes
// and kube-proxy: a client on one node reaches the backends on the other
// nodes directly, and all backends through the Service's cluster IP.
func TestClusterIPServiceAcrossNodes(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	requireSchedulableNodes(ctx, t, f, 3)

	backends := runTestservers(ctx, t, f, "web", 3)
	svc, err := f.Kube.CoreV1().Services(f.Namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	clientNode := backends[0].Spec.NodeName
	client := runHTTPClient(ctx, t, f, "client", clientNode)

	remote := 0
	for _, b := range backends {
		if b.Spec.NodeName == clientNode {
			continue
		}
		remote++
		url := "http://" + net.JoinHostPort(b.Status.PodIP, "8080") + "/"
		var out string
		var lastErr error
		err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			out, lastErr = httpGet(ctx, f, client.Name, url)
			return lastErr == nil, nil
		})
		require.NoError(t, err, "client on %s cannot reach pod %s on %s at %s: %v",
			clientNode, b.Name, b.Spec.NodeName, url, lastErr)
		require.Equal(t, b.Name, strings.TrimSpace(out), "answer of %s", url)
	}
	require.NotZero(t, remote, "no backend runs on a node other than the client's")

	// Up to 60 requests through the cluster IP, until every backend has
	// answered (kube-proxy picks backends at random).
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/"
	answers := map[string]int{}
	var failures []string
	for i := 0; i < 60 && len(answers) < len(backends); i++ {
		out, err := httpGet(ctx, f, client.Name, url)
		if err != nil {
			failures = append(failures, err.Error())
			continue
		}
		answers[strings.TrimSpace(out)]++
	}
	for _, b := range backends {
		require.NotZero(t, answers[b.Name], "backend %s on %s never answered through %s; answers %v, failures %v",
			b.Name, b.Spec.NodeName, url, answers, failures)
	}
	t.Logf("answers through %s: %v (%d failed requests)", url, answers, len(failures))
}

// TestNodeLocalContainerdFromDaemonSet proves that each node has its own
// container runtime and that a hostPath socket in a hostNetwork DaemonSet
// pod reaches that node's runtime, as Shoal's node agent will.
func TestNodeLocalContainerdFromDaemonSet(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name, socket = "cri-pods", "/run/containerd/containerd.sock"
	labels := map[string]string{"app": name}

	_, err := f.Kube.AppsV1().DaemonSets(f.Namespace).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					TerminationGracePeriodSeconds: new(int64(1)),
					// Every node, tainted control planes included.
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:         name,
						Image:        f.Image("testserver:latest"),
						Args:         []string{"cri-pods", "--socket", socket, "--watch"},
						VolumeMounts: []corev1.VolumeMount{{Name: "containerd", MountPath: socket}},
					}},
					Volumes: []corev1.Volume{{
						Name: "containerd",
						VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
							Path: socket,
							Type: new(corev1.HostPathSocket),
						}},
					}},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	ds, err := f.WaitForDaemonSetReady(ctx, f.Namespace, name, podStartTimeout)
	require.NoError(t, err)
	desired := int(ds.Status.DesiredNumberScheduled)
	pods, err := f.WaitForPodsReady(ctx, f.Namespace, "app="+name, desired, podStartTimeout)
	require.NoError(t, err)
	require.Len(t, pods, desired)
	if desired < 2 {
		t.Logf("only %d node: this proves the socket works, not that nodes have separate runtimes", desired)
	}

	all, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	apiPods := map[string]corev1.Pod{}
	for _, p := range all.Items {
		apiPods[p.Name] = p
	}

	for _, p := range pods {
		node := p.Spec.NodeName
		var sandboxes []sandbox
		isOwn := func(s sandbox) bool { return s.Namespace == f.Namespace && s.Name == p.Name }
		err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			log, err := f.PodLogs(ctx, p.Name, name)
			sandboxes = parseSandboxes(log)
			return slices.ContainsFunc(sandboxes, isOwn), err
		})
		require.NoError(t, err, "the runtime seen by %s on node %s never listed that pod; it listed %v", p.Name, node, sandboxes)

		for _, s := range sandboxes {
			if s.Namespace != f.Namespace {
				continue
			}
			owner, ok := apiPods[s.Name]
			require.True(t, ok, "the runtime of node %s has a sandbox of %s/%s, which the API does not know", node, s.Namespace, s.Name)
			require.Equal(t, node, owner.Spec.NodeName,
				"the runtime seen by %s on node %s runs pod %s of node %s: nodes share a runtime", p.Name, node, s.Name, owner.Spec.NodeName)
			if s.UID != "" {
				require.Equal(t, string(owner.UID), s.UID, "uid of the sandbox of %s", s.Name)
			}
		}
	}
}

// TestSeedExamplesDryRun proves that the OpenKruise examples in
// test/testdata/seed-examples are accepted by a real apiserver serving
// Shoal's CRDs (server-side dry run: schema, CEL, admission). The pod the
// ContainerRecreateRequest examples name, "pod-name" with containers app
// and sidecar, runs first: Shoal's webhook (like OpenKruise's) refuses a
// request for a pod that does not exist, before the schema is checked.
func TestSeedExamplesDryRun(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	served, err := f.ServesGroupVersion("apps.kruise.io/v1alpha1")
	require.NoError(t, err)
	require.True(t, served, "the apps.kruise.io group is not served: install Shoal's CRDs from deploy/crds (hack/install-crds.sh)")
	if deployed, _, err := f.ShoalDeployed(ctx); err == nil && deployed {
		startCRRPod(ctx, t, f, "pod-name", nil)
		// Seed 000's patchPodMetadata example says the allow-list must
		// grant its keys first (OpenKruise's SidecarSet_PatchPodMetadata_WhiteList).
		for _, key := range []string{"oom-score", "custom.example.com/sidecar-configuration", "apps.kruise.io/container-launch-priority"} {
			allowPatchPodMetadata(ctx, t, f, key, nil)
		}
	}

	files, err := filepath.Glob("../testdata/seed-examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no seed examples found")
	sort.Strings(files)

	for _, file := range files {
		objs, err := crdvalidation.ReadManifests(file)
		require.NoError(t, err)
		base := strings.TrimSuffix(filepath.Base(file), ".yaml")
		for i, obj := range objs {
			t.Run(fmt.Sprintf("%s_%d", base, i+1), func(t *testing.T) {
				if reason := notAnObject(obj.Object); reason != "" {
					t.Skipf("%s document %d: %s", file, i+1, reason)
				}
				m, err := f.RESTMapping(obj.GroupVersionKind())
				require.NoError(t, err, "is this group/version served? Shoal's CRDs are in deploy/crds")
				if obj.GetName() == "" {
					obj.SetName(fmt.Sprintf("seed-%s-%d", base, i+1))
				}
				if m.Scope.Name() == meta.RESTScopeNameNamespace {
					obj.SetNamespace(f.Namespace)
				} else {
					// Unique, so that an object of the same name already in
					// the cluster cannot make the dry run fail.
					obj.SetName(f.Namespace + "-" + obj.GetName())
				}
				if obj.GetKind() == "SidecarSet" {
					scopeSidecarSet(t, obj.Object, f.Namespace)
				}
				require.NoError(t, f.ApplyDryRun(ctx, obj))
			})
		}
	}
}

// scopeSidecarSet confines a seed SidecarSet that selects pods of every
// namespace to the test's namespace. The admission check that two
// SidecarSets selecting the same pods do not inject containers of the same
// name is cluster-wide, so an unscoped seed set would be refused whenever a
// test running at the same time injects a container of the same name.
func scopeSidecarSet(t *testing.T, obj map[string]any, namespace string) {
	t.Helper()
	spec, _ := obj["spec"].(map[string]any)
	require.NotNil(t, spec, "a SidecarSet without spec")
	if spec["namespace"] == nil && spec["namespaceSelector"] == nil {
		spec["namespace"] = namespace
	}
}

// notAnObject says why a seed document is not an object to apply, or "".
func notAnObject(obj map[string]any) string {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	switch {
	case apiVersion == "" || kind == "":
		return "a fragment without apiVersion or kind"
	case kind == "CustomResourceDefinition":
		return "a CRD definition (test/crdvalidation checks those in process)"
	case apiVersion == "v1" && kind == "Pod":
		// INDEX.md: core objects only had their indentation restored; the
		// seeds show pods for their metadata and leave out containers.
		if spec, _ := obj["spec"].(map[string]any); spec == nil || len(asSlice(spec["containers"])) == 0 {
			return "a Pod without containers (the seed shows its metadata only)"
		}
	}
	return ""
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
