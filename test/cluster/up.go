package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/test/cluster/images"
	"github.com/shoal-io/shoal/test/cluster/pki"
)

func pkiOptions(cfg *Config) pki.Options {
	opts := pki.Options{
		APIServerIPs: []net.IP{BridgeIP},
		ServiceIP:    ServiceIP,
		Nodes:        cfg.NodeNames(),
		NodeIPs:      map[string]net.IP{},
		APIServerURL: APIServerURL(),
	}
	for i := 1; i <= cfg.Nodes; i++ {
		opts.NodeIPs[NodeName(i)] = NodeIP(i)
	}
	return opts
}

func loadBundle(cfg *Config) (*pki.Bundle, error) {
	return pki.Generate(cfg.PKIDir(), pkiOptions(cfg))
}

// Up brings the cluster up: packages, binaries, PKI, network, registry and
// images, control plane, nodes; it returns when every node is Ready. A
// healthy running cluster of the same size is left as it is; anything else
// found from an earlier run is cleaned up first.
func Up(ctx context.Context, cfg *Config, self string, log io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the local cluster needs root (network namespaces, mounts, cgroups)")
	}
	start := time.Now()
	if Healthy(ctx, cfg) == nil {
		_, _ = fmt.Fprintln(log, "cluster is already up; refreshing test images and registry hosts")
		// A cluster started by an older harness may lack a registry host
		// (the test registry's); containerd reads them at every pull.
		for i := 1; i <= cfg.Nodes; i++ {
			if err := writeRegistryHosts(cfg, i); err != nil {
				return err
			}
		}
		if err := ensureStorageClass(ctx, cfg); err != nil {
			return err
		}
		return pushImages(ctx, cfg)
	}
	if left := Leftovers(cfg); len(left) > 0 {
		_, _ = fmt.Fprintf(log, "cleaning up an earlier run: %s\n", strings.Join(left, "; "))
		if err := Down(ctx, cfg, log); err != nil {
			return fmt.Errorf("clean up earlier run: %w", err)
		}
	}
	step := func(what string) { _, _ = fmt.Fprintf(log, "[%5.1fs] %s\n", time.Since(start).Seconds(), what) }

	step("packages")
	if err := EnsurePackages(ctx, log); err != nil {
		return err
	}
	step("binaries")
	if err := EnsureBinaries(ctx, cfg, log); err != nil {
		return err
	}
	if err := os.RemoveAll(cfg.LogDir()); err != nil {
		return fmt.Errorf("clear logs of the last run: %w", err)
	}
	for _, d := range []string{cfg.LogDir(), cfg.runDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	step("certificates")
	b, err := loadBundle(cfg)
	if err != nil {
		return err
	}
	step("network")
	if err := setupBridge(ctx); err != nil {
		return err
	}
	for i := 1; i <= cfg.Nodes; i++ {
		if err := setupNodeNetwork(ctx, cfg, i); err != nil {
			return err
		}
	}
	step("registry and images")
	if err := startRegistry(ctx, cfg, self); err != nil {
		return err
	}
	if err := pushImages(ctx, cfg); err != nil {
		return err
	}
	step("control plane")
	if err := startControlPlane(ctx, cfg, b); err != nil {
		return err
	}
	if err := installFile(b.Kubeconfig(pki.Admin), cfg.Kubeconfig(), 0o600); err != nil {
		return err
	}
	step("nodes")
	for i := 1; i <= cfg.Nodes; i++ {
		if err := startNode(ctx, cfg, b, self, i); err != nil {
			return err
		}
	}
	if err := waitNodesReady(ctx, cfg, 3*time.Minute); err != nil {
		return err
	}
	step(fmt.Sprintf("%d nodes Ready", cfg.Nodes))
	return ensureStorageClass(ctx, cfg)
}

// StorageClassName is the local cluster's default StorageClass: the
// controller-manager's hostPath provisioner (a directory under
// /tmp/hostpath_pv), so PVCs without a storageClassName (CloneSet and
// StatefulSet volumeClaimTemplates as users write them) are bound.
const StorageClassName = "shoal-hostpath"

// ensureStorageClass creates the default StorageClass if it is missing.
func ensureStorageClass(ctx context.Context, cfg *Config) error {
	client, err := Client(cfg)
	if err != nil {
		return err
	}
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:   "kubernetes.io/host-path",
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete),
	}
	_, err = client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass %s: %w", sc.Name, err)
	}
	return nil
}

// pushImages builds the test images (pause, busybox, testserver) and
// pushes those the registry lacks.
func pushImages(ctx context.Context, cfg *Config) error {
	if err := images.BuildAndPushAll(ctx, Registry(), filepath.Join(cfg.CacheDir(), "images")); err != nil {
		return fmt.Errorf("build and push test images: %w", err)
	}
	return nil
}

func startRegistry(ctx context.Context, cfg *Config, self string) error {
	_, err := startDetached(cfg, procSpec{
		Name: "registry",
		Log:  filepath.Join(cfg.LogDir(), "registry.log"),
		Args: []string{self, "registry",
			"--dir", filepath.Join(cfg.StateDir(), "registry"),
			"--addr", Registry(),
			"--addr", fmt.Sprintf("127.0.0.1:%d", RegistryPort)},
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", Registry(), time.Second)
		if err == nil {
			return conn.Close()
		}
		if _, ok := runningPid(cfg, "registry"); !ok {
			return fmt.Errorf("registry exited; see %s", filepath.Join(cfg.LogDir(), "registry.log"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("registry not listening on %s: %w; see %s", Registry(), err, filepath.Join(cfg.LogDir(), "registry.log"))
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// startNode writes node i's configuration and starts its supervisor inside
// the node's network namespace and a new mount namespace. Like the other
// start functions it runs on a clean machine: Up returns early for a
// healthy cluster and tears down anything else first.
func startNode(ctx context.Context, cfg *Config, b *pki.Bundle, self string, i int) error {
	node := NodeName(i)
	if err := createNodeCgroups(node); err != nil {
		return err
	}
	if err := writeNodeConfig(cfg, b, i); err != nil {
		return err
	}
	procs := []nodeProcess{
		{Name: "containerd", Args: []string{"/usr/bin/containerd", "--config", "/etc/containerd/config.toml"}, Ready: ContainerdSocket},
		{Name: "kubelet", Args: []string{
			filepath.Join(cfg.BinDir(), "kubelet"),
			"--config=" + filepath.Join(cfg.NodeDir(node), "kubelet.yaml"),
			"--kubeconfig=" + b.NodeKubeconfig(node),
			"--hostname-override=" + node,
			"--node-ip=" + NodeIP(i).String(),
			"--node-labels=" + nodeLabels(i),
		}},
		{Name: "kube-proxy", Args: []string{
			filepath.Join(cfg.BinDir(), "kube-proxy"),
			"--config=" + filepath.Join(cfg.NodeDir(node), "kube-proxy.yaml"),
		}},
	}
	data, _ := json.MarshalIndent(procs, "", "  ")
	if err := os.WriteFile(nodeProcessesFile(cfg, node), data, 0o644); err != nil {
		return fmt.Errorf("write %s processes: %w", node, err)
	}
	_, err := startDetached(cfg, procSpec{
		Name: node,
		Log:  filepath.Join(cfg.LogDir(), node+"-supervisor.log"),
		Args: []string{"nsenter", "--net=" + NetnsPath(node), "--",
			"unshare", "--mount", "--propagation", "private", "--",
			self, "node-supervisor", "--node", node, "--nodes", fmt.Sprint(cfg.Nodes)},
	})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := NodeStatus(ctx, cfg, node); err == nil {
			return nil
		}
		if _, ok := runningPid(cfg, node); !ok {
			return fmt.Errorf("node %s failed to start; see %s", node, filepath.Join(cfg.LogDir(), node+"-supervisor.log"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s supervisor not answering after 90s; see %s", node, cfg.LogDir())
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// Client returns a clientset for the running cluster as admin.
func Client(cfg *Config) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", cfg.Kubeconfig(), err)
	}
	return kubernetes.NewForConfig(rc)
}

// waitNodesReady waits until all nodes are registered and Ready, then gives
// them the worker role label (kubelet may not set node-role labels itself).
func waitNodesReady(ctx context.Context, cfg *Config, timeout time.Duration) error {
	client, err := Client(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		notReady := notReadyNodes(ctx, client, cfg)
		if len(notReady) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes not Ready after %s: %s; see %s", timeout, strings.Join(notReady, ", "), cfg.LogDir())
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	patch := []byte(`{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}}}`)
	for _, n := range cfg.NodeNames() {
		if _, err := client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s: %w", n, err)
		}
	}
	return nil
}

func notReadyNodes(ctx context.Context, client kubernetes.Interface, cfg *Config) []string {
	var notReady []string
	for _, name := range cfg.NodeNames() {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			notReady = append(notReady, name+" (not registered)")
			continue
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			notReady = append(notReady, name)
		}
	}
	return notReady
}

// Healthy reports nil when every process of the cluster runs and every
// node is Ready.
func Healthy(ctx context.Context, cfg *Config) error {
	var down []string
	for _, name := range append(append([]string{"registry"}, ControlPlaneComponents...), cfg.NodeNames()...) {
		if _, ok := runningPid(cfg, name); !ok {
			down = append(down, name)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("not running: %s", strings.Join(down, ", "))
	}
	client, err := Client(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if nr := notReadyNodes(ctx, client, cfg); len(nr) > 0 {
		return fmt.Errorf("nodes not Ready: %s", strings.Join(nr, ", "))
	}
	return nil
}

// Down stops everything the cluster started and removes what it made:
// processes, mounts, network namespaces, links, the bridge, cgroups and
// the state directory. Built binaries stay cached, and the logs stay in
// LogDir for a look after a failure. Safe to run any time. It goes through
// every step even when one fails, and keeps the state dir (with its pid
// files) if anything failed, so that the next Down can finish the job.
func Down(ctx context.Context, cfg *Config, log io.Writer) error {
	start := time.Now()
	step := func(what string) { _, _ = fmt.Fprintf(log, "[%5.1fs] %s\n", time.Since(start).Seconds(), what) }
	var errs []error
	nodes := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(cfg.StateDir(), "nodes"))
	for _, e := range entries {
		nodes[e.Name()] = true
	}
	cgroups, _ := leftoverCgroups()
	for _, c := range cgroups {
		nodes[filepath.Base(c)] = true
	}
	for node := range nodes {
		step("stopping " + node)
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		if _, err := NodeCommand(sctx, cfg, node, "shutdown"); err == nil {
			if pid, ok := runningPid(cfg, node); ok {
				_, _ = waitGone(sctx, pid, 60*time.Second)
			}
		}
		cancel()
		if err := killNodeCgroups(ctx, node); err != nil {
			errs = append(errs, fmt.Errorf("stop node %s: %w", node, err))
		}
	}
	step("stopping control plane and registry")
	for k := len(ControlPlaneComponents) - 1; k >= 0; k-- {
		if err := stopDetached(ctx, cfg, ControlPlaneComponents[k], false, 20*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := stopDetached(ctx, cfg, "registry", false, 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	for _, p := range clusterProcs(cfg) {
		_, _ = fmt.Fprintf(log, "killing leftover process %d %s\n", p.pid, strings.Join(p.args, " "))
		if err := terminate(ctx, p.pid, true, 5*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	step("removing network and state")
	if err := teardownNetwork(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("teardown incomplete (run down again; logs in %s): %w", cfg.LogDir(), errors.Join(errs...))
	}
	if err := removeAll(cfg, cfg.StateDir()); err != nil {
		return err
	}
	if err := os.Remove(cfg.Kubeconfig()); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove kubeconfig: %w", err)
	}
	if left := Leftovers(cfg); len(left) > 0 {
		return fmt.Errorf("left behind after teardown: %s", strings.Join(left, "; "))
	}
	step("down")
	return nil
}

// Leftovers lists anything of a cluster present on the machine: processes,
// mounts, network namespaces, links, cgroups, state. Empty after Down.
func Leftovers(cfg *Config) []string {
	var left []string
	for _, p := range clusterProcs(cfg) {
		left = append(left, fmt.Sprintf("process %d (%s)", p.pid, filepath.Base(p.args[0])))
	}
	for _, m := range leftoverMounts(cfg) {
		left = append(left, "mount "+m)
	}
	if namespaces, err := clusterNetns(context.Background()); err == nil {
		for _, ns := range namespaces {
			left = append(left, "netns "+ns)
		}
	}
	if links, err := clusterLinks(context.Background()); err == nil {
		for _, l := range links {
			left = append(left, "link "+l)
		}
	}
	if cg, err := leftoverCgroups(); err == nil {
		for _, c := range cg {
			left = append(left, "cgroup "+c)
		}
	}
	if _, err := os.Stat(cfg.StateDir()); err == nil {
		left = append(left, "state "+cfg.StateDir())
	}
	return left
}

// Env returns the shell variables that point tools and tests at the
// cluster.
func Env(cfg *Config) []string {
	return []string{
		"KUBECONFIG=" + cfg.Kubeconfig(),
		"SHOAL_REGISTRY=" + Registry(),
		"SHOAL_CLUSTER_LOGS=" + cfg.LogDir(),
		"PATH=" + filepath.Dir(cfg.Kubectl()) + ":" + os.Getenv("PATH"),
	}
}
