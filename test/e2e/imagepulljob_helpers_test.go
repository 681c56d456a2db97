//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// Bounds of the ImagePullJob tests (OpenKruise's e2e uses the same).
const (
	// pullJobStartTimeout bounds the wait for a new job's status.desired.
	pullJobStartTimeout = 3 * time.Second
	// pullJobTimeout bounds a job's way to completion (or to succeeded ==
	// desired for a Never job).
	pullJobTimeout = 180 * time.Second
	// pullJobTTLTimeout bounds the wait for a job with
	// ttlSecondsAfterFinished 20 to be deleted, from its completion.
	pullJobTTLTimeout = 25 * time.Second
	// pullViewGoneTimeout bounds the wait for the coordinator to forget a
	// deleted job's per-node work.
	pullViewGoneTimeout = 10 * time.Second
)

// requireImagePull skips t unless Shoal runs on the local cluster (the
// tests serve their registry on its bridge) and every node trusts the test
// registry; it returns the nodes, sorted by name.
func requireImagePull(ctx context.Context, t *testing.T, f *framework.Framework) []corev1.Node {
	t.Helper()
	nodes := requireShoal(ctx, t, f)
	cfg := localCluster(t, f)
	for _, n := range nodes {
		for _, reg := range cluster.TestRegistries() {
			path := cluster.RegistryHostsFile(cfg, n.Name, reg)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("node %s does not trust the test registry %s (%v): the cluster was started before the harness knew it; "+
					"run make cluster-up (on a running cluster it rewrites the nodes' registry hosts)", n.Name, reg, err)
			}
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes
}

// randomSecret returns a fresh random password (so a copy of a secret
// holding it is recognisable anywhere).
func randomSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func basicAuth(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// registrySecret is a pull secret for host of type
// kubernetes.io/dockerconfigjson, or kubernetes.io/dockercfg (the legacy
// format) when legacy is set.
func registrySecret(t *testing.T, name, host, user, pass string, legacy bool) *corev1.Secret {
	t.Helper()
	entry := map[string]string{"username": user, "password": pass, "auth": basicAuth(user, pass)}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if legacy {
		entry["email"] = "e2e@shoal.io"
		data, err := json.Marshal(map[string]any{host: entry})
		require.NoError(t, err)
		s.Type = corev1.SecretTypeDockercfg
		s.Data = map[string][]byte{corev1.DockerConfigKey: data}
	} else {
		data, err := json.Marshal(map[string]any{"auths": map[string]any{host: entry}})
		require.NoError(t, err)
		s.Type = corev1.SecretTypeDockerConfigJson
		s.Data = map[string][]byte{corev1.DockerConfigJsonKey: data}
	}
	return s
}

func createSecret(ctx context.Context, t *testing.T, f *framework.Framework, s *corev1.Secret) {
	t.Helper()
	_, err := f.Kube.CoreV1().Secrets(f.Namespace).Create(ctx, s, metav1.CreateOptions{})
	require.NoError(t, err)
}

// requireNoSecretCopies checks that no Secret outside the test's own
// (named) secrets holds any of passwords, and that none carries
// OpenKruise's synced-secret annotations: Shoal reads pull secrets where
// they are and never copies them (OpenKruise copied them into
// kruise-daemon-config).
func requireNoSecretCopies(ctx context.Context, t *testing.T, f *framework.Framework, own []string, passwords ...string) {
	t.Helper()
	secrets, err := f.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	ours := map[string]bool{}
	for _, n := range own {
		ours[f.Namespace+"/"+n] = true
	}
	for _, s := range secrets.Items {
		key := s.Namespace + "/" + s.Name
		if ours[key] {
			continue
		}
		for a := range s.Annotations {
			require.False(t, strings.HasPrefix(a, "imagepulljobs.kruise.io/"), "secret %s has the synced-secret annotation %s", key, a)
		}
		for k, v := range s.Data {
			for _, p := range passwords {
				require.False(t, bytes.Contains(v, []byte(p)), "secret %s (key %s) holds a copy of a pull secret's password", key, k)
			}
		}
	}
}

// pullJob is an ImagePullJob of image; mutate adjusts it.
func pullJob(name, image string, mutate func(*v1alpha1.ImagePullJob)) *v1alpha1.ImagePullJob {
	j := &v1alpha1.ImagePullJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ImagePullJobSpec{Image: image},
	}
	if mutate != nil {
		mutate(j)
	}
	return j
}

func createPullJob(ctx context.Context, t *testing.T, f *framework.Framework, j *v1alpha1.ImagePullJob) *v1alpha1.ImagePullJob {
	t.Helper()
	created, err := pullJobs(t, f).Create(ctx, j, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

func getPullJob(ctx context.Context, t *testing.T, f *framework.Framework, name string) *v1alpha1.ImagePullJob {
	t.Helper()
	j, err := pullJobs(t, f).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	return j
}

// pullJobState summarises a job's status for logs and failure messages.
func pullJobState(j *v1alpha1.ImagePullJob) string {
	if j == nil {
		return "(not seen)"
	}
	s := j.Status
	ts := func(t *metav1.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format("15:04:05")
	}
	return fmt.Sprintf("desired %d active %d succeeded %d failed %d failedNodes %v start %s completion %s message %q",
		s.Desired, s.Active, s.Succeeded, s.Failed, s.FailedNodes, ts(s.StartTime), ts(s.CompletionTime), s.Message)
}

// viewState summarises a per-node view.
func viewState(v *pullview.JobNodes) string {
	if v == nil {
		return "(no view)"
	}
	var parts []string
	for _, n := range v.Nodes {
		p := fmt.Sprintf("%s=%s", n.Node, n.Phase)
		if n.Attempts > 0 || n.Round > 0 {
			p += fmt.Sprintf("(round %d attempts %d)", n.Round, n.Attempts)
		}
		if n.BytesTotal > 0 {
			p += fmt.Sprintf("[%d/%d bytes]", n.BytesDone, n.BytesTotal)
		}
		if n.Present {
			p += "[present]"
		}
		if n.Shared {
			p += "[shared]"
		}
		if n.Message != "" {
			p += fmt.Sprintf(" %q", n.Message)
		}
		parts = append(parts, p)
	}
	return listOr(parts, "no nodes")
}

func listOr(parts []string, none string) string {
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, ", ")
}

// pullJobView reads the coordinator's per-node view of a job in the
// test namespace.
func pullJobView(ctx context.Context, f *framework.Framework, name string) (*pullview.JobNodes, error) {
	return f.ImagePullJobNodes(ctx, f.Namespace, name)
}

// waitPullJob polls the job until done says so; on timeout it fails t with
// the last status and the per-node view.
func waitPullJob(ctx context.Context, t *testing.T, f *framework.Framework, name string, timeout time.Duration, what string, done func(*v1alpha1.ImagePullJob) bool) *v1alpha1.ImagePullJob {
	t.Helper()
	var last *v1alpha1.ImagePullJob
	start := time.Now()
	err := framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		j, err := pullJobs(t, f).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = j
		return done(j), nil
	})
	if err != nil {
		view, verr := pullJobView(context.WithoutCancel(ctx), f, name)
		require.NoError(t, err, "imagepulljob %s: %s: last status %s; per-node view: %s (%v)", name, what, pullJobState(last), viewState(view), verr)
	}
	t.Logf("imagepulljob %s: %s after %.1fs: %s", name, what, time.Since(start).Seconds(), pullJobState(last))
	return last
}

// waitPullJobGone waits until the job no longer exists.
func waitPullJobGone(ctx context.Context, t *testing.T, f *framework.Framework, name string, timeout time.Duration, what string) {
	t.Helper()
	var last *v1alpha1.ImagePullJob
	start := time.Now()
	err := framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		j, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		last = j
		return false, nil
	})
	var finalizers []string
	if last != nil {
		finalizers = last.Finalizers
	}
	require.NoError(t, err, "imagepulljob %s not gone (%s); last status %s, finalizers %v", name, what, pullJobState(last), finalizers)
	t.Logf("imagepulljob %s gone (%s) after %.1fs", name, what, time.Since(start).Seconds())
}

// waitPullViewGone waits until the coordinator answers 404 for the job's
// per-node view: it no longer holds work for it on any node.
func waitPullViewGone(ctx context.Context, t *testing.T, f *framework.Framework, name string) {
	t.Helper()
	var last *pullview.JobNodes
	var lastErr error
	err := framework.WaitFor(ctx, pullViewGoneTimeout, func(ctx context.Context) (bool, error) {
		v, err := pullJobView(ctx, f, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		last, lastErr = v, err
		return false, nil
	})
	require.NoError(t, err, "per-node view of deleted imagepulljob %s still there: %s (%v)", name, viewState(last), lastErr)
}

// waitPullView polls the per-node view until done says so.
func waitPullView(ctx context.Context, t *testing.T, f *framework.Framework, name string, timeout time.Duration, what string, done func(*pullview.JobNodes) bool) *pullview.JobNodes {
	t.Helper()
	var last *pullview.JobNodes
	var lastErr error
	err := framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		v, err := pullJobView(ctx, f, name)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = v
		return done(v), nil
	})
	require.NoError(t, err, "per-node view of imagepulljob %s: %s: last %s (%v)", name, what, viewState(last), lastErr)
	return last
}

// requireViewPhases checks the per-node view lists exactly nodes, each in
// phase.
func requireViewPhases(ctx context.Context, t *testing.T, f *framework.Framework, name string, nodes []string, phase string) *pullview.JobNodes {
	t.Helper()
	v, err := pullJobView(ctx, f, name)
	require.NoError(t, err)
	var got []string
	for _, n := range v.Nodes {
		got = append(got, n.Node)
		require.Equal(t, phase, n.Phase, "node %s in the per-node view of %s: %s", n.Node, name, viewState(v))
	}
	require.Equal(t, nodes, got, "nodes of the per-node view of %s", name)
	return v
}

// isComplete: the job has a completion time.
func isComplete(j *v1alpha1.ImagePullJob) bool { return j.Status.CompletionTime != nil }

// nodeIP is a node's InternalIP, the address its pulls come from.
func nodeIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// layerBytesTo returns, by node name, the bytes of ref's layers the
// registry served to each node.
func layerBytesTo(t *testing.T, reg *framework.Registry, ref string, nodes []corev1.Node) map[string]int64 {
	t.Helper()
	p, ok := reg.Pushed(ref)
	require.True(t, ok, "%s was not pushed", ref)
	byIP := reg.BytesTo(p.Layers...)
	out := map[string]int64{}
	for _, n := range nodes {
		out[n.Name] = byIP[nodeIP(n)]
	}
	return out
}

// requirePulledBy checks what the registry served of ref's layers:
// nothing to the nodes outside want (the job does not select them) and,
// when want is not empty, at least one copy in all to the nodes of want
// and at most one copy per node of want. Through the agents' image swarm
// one lease holder fetches a layer for every node that wants it, so which
// of them the registry served is not fixed.
func requirePulledBy(t *testing.T, reg *framework.Registry, ref string, nodes []corev1.Node, want ...string) {
	t.Helper()
	p, _ := reg.Pushed(ref)
	got := layerBytesTo(t, reg, ref, nodes)
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w] = true
	}
	var total int64
	for _, n := range nodes {
		if wanted[n.Name] {
			total += got[n.Name]
		} else {
			require.Zero(t, got[n.Name], "layers of %s served to %s, which the job does not select (bytes by node: %v)", ref, n.Name, got)
		}
	}
	if len(want) > 0 {
		require.GreaterOrEqual(t, total, p.Size(), "layers of %s served to the nodes that pulled it (bytes by node: %v)", ref, got)
		// A retried or resumed download may fetch a few bytes twice.
		require.LessOrEqual(t, total, int64(len(want))*p.Size()+p.Size()/2, "layers of %s served more than once per node (bytes by node: %v)", ref, got)
	}
}

// setPull sets a job template's parallelism, timeoutSeconds and
// backoffLimit.
func setPull(j *v1alpha1.ImagePullJobTemplate, parallelism int, timeout, backoff int32) {
	j.Parallelism = ptrIntOrString(parallelism)
	j.PullPolicy = &v1alpha1.PullPolicy{TimeoutSeconds: &timeout, BackoffLimit: &backoff}
}
