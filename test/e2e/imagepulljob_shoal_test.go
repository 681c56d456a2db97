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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// dispatched counts the nodes of a per-node view that were handed the
// work and have not finished it: Waiting or Pulling, or Unknown (handed
// out, not reported on yet).
func dispatched(v *pullview.JobNodes) int {
	n := 0
	for _, s := range v.Nodes {
		switch s.Phase {
		case pullview.PhaseWaiting, pullview.PhasePulling, pullview.PhaseUnknown:
			n++
		}
	}
	return n
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// TestImagePullJobParallelism: with every pull from the registry made slow
// (1 MiB/s per blob, 2 layers of 4 MiB: about 4 s; later nodes take the
// image from their peers, faster), parallelism 1 and 2 hold at
// every instant: status.active, the per-node view's Waiting+Pulling nodes,
// sampled every 200 ms for the whole run, and the number of nodes the
// registry serves at the same time, never exceed it; the job completes.
func TestImagePullJobParallelism(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	if len(nodes) < 3 {
		t.Skipf("needs 3 nodes to tell parallelism 2 from all at once, the cluster has %d", len(nodes))
	}
	n := int32(len(nodes))
	reg := framework.StartRegistry(t, framework.RegistryOptions{BytesPerSecond: 1 << 20})

	for _, p := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism %d", p), func(t *testing.T) {
			ctx := t.Context()
			name := fmt.Sprintf("parallel-%d", p)
			ref := reg.Push(t, "parallel/p"+fmt.Sprint(p), "v1", 4, 2)
			reg.ResetMaxConcurrentClients()
			start := time.Now()
			createPullJob(ctx, t, f, pullJob(name, ref, func(j *v1alpha1.ImagePullJob) {
				setPull(&j.Spec.ImagePullJobTemplate, p, 120, 2)
			}))

			var maxActive, maxView, samples, viewSamples int
			var last *v1alpha1.ImagePullJob
			deadline := time.Now().Add(pullJobTimeout)
			for {
				j, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err)
				last = j
				samples++
				maxActive = max(maxActive, int(j.Status.Active))
				require.LessOrEqual(t, int(j.Status.Active), p, "status.active above parallelism: %s", pullJobState(j))
				if v, err := pullJobView(ctx, f, name); err == nil {
					viewSamples++
					maxView = max(maxView, dispatched(v))
					require.LessOrEqual(t, dispatched(v), p, "per-node view has more nodes at work than parallelism: %s", viewState(v))
				}
				if isComplete(j) {
					break
				}
				require.True(t, time.Now().Before(deadline), "not complete after %v: %s", pullJobTimeout, pullJobState(j))
				require.NoError(t, sleepCtx(ctx, 200*time.Millisecond))
			}
			took := time.Since(start)
			t.Logf("parallelism %d: complete after %.1fs; %d status samples (max active %d), %d view samples (max at work %d), registry served at most %d nodes at once",
				p, took.Seconds(), samples, maxActive, viewSamples, maxView, reg.MaxConcurrentClients())
			require.Equal(t, n, last.Status.Succeeded, pullJobState(last))
			require.Zero(t, last.Status.Failed, pullJobState(last))
			require.LessOrEqual(t, reg.MaxConcurrentClients(), p, "the registry served more nodes at once than parallelism:\n%s", reg.DownloadLog())
			require.Positive(t, maxActive+maxView, "the sampler never saw the job at work")
			require.Positive(t, viewSamples, "the per-node view never answered")
			requirePulledBy(t, reg, ref, nodes, nodeNames(nodes)...)
			// The throttle makes a pull from the registry take ~4 s. Through
			// the agents' swarm only the first round is bound by it: later
			// rounds take the image from the nodes that have it.
			require.Greater(t, took, 3*time.Second, "faster than one throttled pull from the registry")
		})
	}
}

// TestImagePullJobPausedByZeroParallelism: parallelism 0 dispatches
// nothing (10 s: nothing active, nothing succeeded, no node at work, the
// registry serves no layer); patching parallelism to 2 resumes the job to
// completion.
func TestImagePullJobPausedByZeroParallelism(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	n := int32(len(nodes))
	reg := framework.StartRegistry(t, framework.RegistryOptions{})
	ref := reg.Push(t, "paused/app", "v1", 4, 2)
	createPullJob(ctx, t, f, pullJob("paused", ref, func(j *v1alpha1.ImagePullJob) {
		setPull(&j.Spec.ImagePullJobTemplate, 0, 60, 2)
	}))
	j := getPullJob(ctx, t, f, "paused")
	require.Equal(t, intstr.FromInt32(0), *j.Spec.Parallelism, "parallelism 0 is kept, not defaulted")

	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		j := getPullJob(ctx, t, f, "paused")
		require.Zero(t, j.Status.Active, pullJobState(j))
		require.Zero(t, j.Status.Succeeded, pullJobState(j))
		require.Zero(t, j.Status.Failed, pullJobState(j))
		require.Nil(t, j.Status.CompletionTime, pullJobState(j))
		if v, err := pullJobView(ctx, f, "paused"); err == nil {
			for _, s := range v.Nodes {
				require.Equal(t, pullview.PhaseNotStarted, s.Phase, "a paused job handed work to a node: %s", viewState(v))
			}
		}
		require.NoError(t, sleepCtx(ctx, 500*time.Millisecond))
	}
	j = getPullJob(ctx, t, f, "paused")
	require.Equal(t, n, j.Status.Desired, "a paused job still selects every node: %s", pullJobState(j))
	requirePulledBy(t, reg, ref, nodes) // nobody
	t.Logf("paused for 10s: %s", pullJobState(j))

	_, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).Patch(ctx, "paused", types.MergePatchType,
		[]byte(`{"spec":{"parallelism":2}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	done := waitPullJob(ctx, t, f, "paused", 120*time.Second, "completed after parallelism 2", isComplete)
	require.Equal(t, n, done.Status.Succeeded, pullJobState(done))
	requirePulledBy(t, reg, ref, nodes, nodeNames(nodes)...)
}

// TestImagePullJobSurvivesAgentRestart: a node's agent pod is deleted
// while the per-node view says the node is pulling (a slow registry: 512
// KiB/s per blob, ~8 s a pull); the job still completes on every node. The
// test logs the node's attempts and what the registry served per digest
// and to whom, which shows whether the pull resumed (a Range request) or
// started over.
func TestImagePullJobSurvivesAgentRestart(t *testing.T) {
	serial(t)
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	n := int32(len(nodes))
	target := nodes[len(nodes)-1]
	reg := framework.StartRegistry(t, framework.RegistryOptions{BytesPerSecond: 512 << 10})
	ref := reg.Push(t, "restart/app", "v1", 4, 2)
	pushed, _ := reg.Pushed(ref)
	createPullJob(ctx, t, f, pullJob("agent-restart", ref, func(j *v1alpha1.ImagePullJob) {
		setPull(&j.Spec.ImagePullJobTemplate, int(n), 120, 3)
		j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always}
	}))

	// Pulling, with part of the layers already on the node.
	waitPullView(ctx, t, f, "agent-restart", time.Minute, target.Name+" pulling", func(v *pullview.JobNodes) bool {
		for _, s := range v.Nodes {
			if s.Node == target.Name && s.Phase == pullview.PhasePulling {
				// The node's runtime holds part of the layers (from the
				// registry or, through the swarm, from a peer).
				return s.BytesDone >= 512<<10
			}
		}
		return false
	})
	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)
	agent, ok := agents[target.Name]
	require.True(t, ok, "no agent pod on %s", target.Name)
	require.NoError(t, f.Kube.CoreV1().Pods(framework.ShoalNamespace).Delete(ctx, agent.Name, metav1.DeleteOptions{}))
	t.Logf("deleted agent %s on %s after %d layer bytes were served to it by the registry", agent.Name, target.Name, reg.BytesTo(pushed.Layers...)[nodeIP(target)])

	done := waitPullJob(ctx, t, f, "agent-restart", pullJobTimeout, "completed", isComplete)
	view, verr := pullJobView(ctx, f, "agent-restart")
	t.Logf("per-node view: %s (%v)", viewState(view), verr)
	t.Logf("layer bytes served by digest: %v (image layers %v, sizes %v)", filterDigests(reg.BlobBytes(), pushed.Layers), pushed.Layers, pushed.LayerSizes)
	t.Logf("layer bytes served by node: %v", layerBytesTo(t, reg, ref, nodes))
	t.Logf("downloads:\n%s", reg.DownloadLog(pushed.Layers...))
	resumed := false
	for _, g := range reg.BlobGets() {
		if g.Client == nodeIP(target) && g.Range != "" {
			resumed = true
		}
	}
	t.Logf("%s resumed its download with a Range request: %v; it was served %d bytes for %d bytes of layers",
		target.Name, resumed, layerBytesTo(t, reg, ref, nodes)[target.Name], pushed.Size())
	require.Equal(t, n, done.Status.Succeeded, pullJobState(done))
	require.Zero(t, done.Status.Failed, pullJobState(done))
	requirePulledBy(t, reg, ref, nodes, nodeNames(nodes)...)

	_, err = f.WaitForPodsReady(ctx, framework.ShoalNamespace, framework.AgentSelector, len(agents), 2*time.Minute)
	require.NoError(t, err)
}

func filterDigests(m map[string]int64, digests []string) map[string]int64 {
	out := map[string]int64{}
	for _, d := range digests {
		out[d] = m[d]
	}
	return out
}

// TestImagePullJobNodeJoinsSelector: a Never job selecting nodes by a
// label warms the one labelled node; labelling a second node later warms
// it too (the job picks up nodes that come to match).
func TestImagePullJobNodeJoinsSelector(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	if len(nodes) < 2 {
		t.Skipf("needs 2 nodes, the cluster has %d", len(nodes))
	}
	first, second := nodes[0], nodes[1]
	label := "e2e.shoal.io/warm-" + randomSecret(t)[:8]
	setLabel := func(ctx context.Context, node string, value *string) error {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{label: value}}})
		if err != nil {
			return err
		}
		_, err = f.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, node := range []string{first.Name, second.Name} {
			if err := setLabel(ctx, node, nil); err != nil {
				t.Errorf("remove label %s from %s: %v", label, node, err)
			}
		}
	})
	require.NoError(t, setLabel(ctx, first.Name, ptr.To("true")))

	reg := framework.StartRegistry(t, framework.RegistryOptions{})
	ref := reg.Push(t, "joins/app", "v1", 4, 2)
	createPullJob(ctx, t, f, pullJob("joins", ref, func(j *v1alpha1.ImagePullJob) {
		j.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}}}
		setPull(&j.Spec.ImagePullJobTemplate, 2, 60, 2)
		j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never}
	}))
	waitPullJob(ctx, t, f, "joins", 60*time.Second, "the labelled node warmed", func(j *v1alpha1.ImagePullJob) bool {
		return j.Status.Desired == 1 && j.Status.Succeeded == 1
	})
	requirePulledBy(t, reg, ref, nodes, first.Name)

	require.NoError(t, setLabel(ctx, second.Name, ptr.To("true")))
	done := waitPullJob(ctx, t, f, "joins", 60*time.Second, "the node labelled later warmed", func(j *v1alpha1.ImagePullJob) bool {
		return j.Status.Desired == 2 && j.Status.Succeeded == 2
	})
	require.Nil(t, done.Status.CompletionTime, pullJobState(done))
	requirePulledBy(t, reg, ref, nodes, first.Name, second.Name)
	requireViewPhases(ctx, t, f, "joins", []string{first.Name, second.Name}, pullview.PhaseSucceeded)
}

// TestImagePullJobFailures: an image the registry does not have, and a
// registry that answers 503 to everything, with backoffLimit 1 and
// timeoutSeconds 30: the (Always) job completes with every node failed,
// lists them in failedNodes, and the per-node view says why.
func TestImagePullJobFailures(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	n := int32(len(nodes))
	reg := framework.StartRegistry(t, framework.RegistryOptions{})

	run := func(t *testing.T, name, ref string, mentions ...string) {
		start := time.Now()
		createPullJob(ctx, t, f, pullJob(name, ref, func(j *v1alpha1.ImagePullJob) {
			setPull(&j.Spec.ImagePullJobTemplate, int(n), 30, 1)
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always}
		}))
		done := waitPullJob(ctx, t, f, name, 90*time.Second, "completed", isComplete)
		require.Equal(t, n, done.Status.Desired, pullJobState(done))
		require.Equal(t, n, done.Status.Failed, pullJobState(done))
		require.Zero(t, done.Status.Succeeded, pullJobState(done))
		require.Zero(t, done.Status.Active, pullJobState(done))
		require.Equal(t, nodeNames(nodes), done.Status.FailedNodes)
		require.Equal(t, "job has completed", done.Status.Message)
		v := requireViewPhases(ctx, t, f, name, nodeNames(nodes), pullview.PhaseFailed)
		for _, s := range v.Nodes {
			msg := strings.ToLower(s.Message)
			found := false
			for _, m := range mentions {
				found = found || strings.Contains(msg, strings.ToLower(m))
			}
			require.True(t, found, "node %s's message %q mentions none of %q", s.Node, s.Message, mentions)
			require.LessOrEqual(t, s.Attempts, uint32(2), "backoffLimit 1 allows 2 attempts on %s: %s", s.Node, viewState(v))
		}
		t.Logf("failed everywhere after %.1fs: %s", time.Since(start).Seconds(), viewState(v))
	}

	t.Run("image not found", func(t *testing.T) {
		ref := reg.Ref("failures/missing", "v1")
		run(t, "missing", ref, "not found", ref)
	})
	t.Run("registry unavailable", func(t *testing.T) {
		ref := reg.Push(t, "failures/unavailable", "v1", 1, 1)
		reg.SetFailing(true)
		defer reg.SetFailing(false)
		run(t, "unavailable", ref, "503", "service unavailable", ref)
	})
	t.Logf("the registry answered %d requests", reg.Requests())
}

// TestImagePullJobRefusals: what TestImagePullJobAdmission does not cover,
// through the real apiserver (CRD schema and CEL rules, and the webhooks):
// each bad job is refused with a message naming the field.
func TestImagePullJobRefusals(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)
	jobs := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace)
	const image = "registry.example.com/team/app:v1"
	pct := intstr.FromString("50%")
	neg := intstr.FromInt32(-1)

	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.ImagePullJob)
		want   []string
	}{
		{"empty image", func(j *v1alpha1.ImagePullJob) { j.Spec.Image = "" }, []string{"spec.image"}},
		{"percent parallelism", func(j *v1alpha1.ImagePullJob) { j.Spec.Parallelism = &pct },
			[]string{"spec.parallelism", "percentages are not accepted"}},
		{"negative parallelism", func(j *v1alpha1.ImagePullJob) { j.Spec.Parallelism = &neg },
			[]string{"spec.parallelism", "non-negative"}},
		{"Never with ttlSecondsAfterFinished", func(j *v1alpha1.ImagePullJob) {
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never, TTLSecondsAfterFinished: ptr.To[int32](20)}
		}, []string{"spec.completionPolicy", "ttlSecondsAfterFinished may only be set when type is Always"}},
		{"Never with activeDeadlineSeconds", func(j *v1alpha1.ImagePullJob) {
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never, ActiveDeadlineSeconds: ptr.To[int64](900)}
		}, []string{"spec.completionPolicy", "activeDeadlineSeconds"}},
		{"deadline below timeout", func(j *v1alpha1.ImagePullJob) {
			j.Spec.PullPolicy = &v1alpha1.PullPolicy{TimeoutSeconds: ptr.To[int32](60)}
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always, ActiveDeadlineSeconds: ptr.To[int64](30)}
		}, []string{"spec.completionPolicy.activeDeadlineSeconds", "pullPolicy.timeoutSeconds"}},
		{"deadline below the default timeout", func(j *v1alpha1.ImagePullJob) {
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always, ActiveDeadlineSeconds: ptr.To[int64](100)}
		}, []string{"spec.completionPolicy.activeDeadlineSeconds", "default 600"}},
		{"selector and podSelector", func(j *v1alpha1.ImagePullJob) {
			j.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{Names: []string{"n1"}}
			j.Spec.PodSelector = &v1alpha1.ImagePullJobPodSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}
		}, []string{"spec.podSelector", "not both"}},
		{"names and labels", func(j *v1alpha1.ImagePullJob) {
			j.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{Names: []string{"n1"},
				LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}}
		}, []string{"spec.selector", "not both"}},
		{"duplicate names", func(j *v1alpha1.ImagePullJob) {
			j.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{Names: []string{"n1", "n1"}}
		}, []string{"spec.selector.names"}},
		{"unknown completion type", func(j *v1alpha1.ImagePullJob) {
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: "Sometimes"}
		}, []string{"spec.completionPolicy.type"}},
		{"unknown imagePullPolicy", func(j *v1alpha1.ImagePullJob) { j.Spec.ImagePullPolicy = "Never" }, []string{"spec.imagePullPolicy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := pullJob("bad", image, tc.mutate)
			_, err := jobs.Create(ctx, j, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			t.Logf("refused: %v", err)
		})
	}

	t.Run("ImageListPullJob percent parallelism", func(t *testing.T) {
		_, err := f.Shoal.AppsV1alpha1().ImageListPullJobs(f.Namespace).Create(ctx, &v1alpha1.ImageListPullJob{
			ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			Spec: v1alpha1.ImageListPullJobSpec{Images: []string{image},
				ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{Parallelism: &pct}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.parallelism")
		t.Logf("refused: %v", err)
	})
	t.Run("ImageListPullJob without images", func(t *testing.T) {
		_, err := f.Shoal.AppsV1alpha1().ImageListPullJobs(f.Namespace).Create(ctx, &v1alpha1.ImageListPullJob{
			ObjectMeta: metav1.ObjectMeta{Name: "bad"},
			Spec:       v1alpha1.ImageListPullJobSpec{Images: []string{}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.images")
		t.Logf("refused: %v", err)
	})

	t.Run("pullSecrets are immutable", func(t *testing.T) {
		// A job that selects no existing node does nothing.
		created, err := jobs.Create(ctx, pullJob("immutable", image, func(j *v1alpha1.ImagePullJob) {
			j.Spec.PullSecrets = []string{"first"}
			j.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{Names: []string{"e2e-no-such-node"}}
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never}
		}), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, []string{"first"}, created.Spec.PullSecrets)
		// A patch, not an update: the coordinator writes the job's status
		// meanwhile, and an update would only meet that conflict.
		_, err = jobs.Patch(ctx, "immutable", types.MergePatchType, []byte(`{"spec":{"pullSecrets":["second"]}}`), metav1.PatchOptions{})
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec.pullSecrets")
		require.Contains(t, err.Error(), "immutable")
		t.Logf("refused: %v", err)
		// Other fields may change.
		_, err = jobs.Patch(ctx, "immutable", types.MergePatchType, []byte(`{"spec":{"parallelism":3}}`), metav1.PatchOptions{})
		require.NoError(t, err, "parallelism may change")
	})
}
