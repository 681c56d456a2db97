//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The soak's work (soak_test.go): ImagePullJobs, CRRs, CloneSet updates and
// probe flips, each with its invariants.

// create runs create until it succeeds (or finds the object made by an
// attempt whose answer was lost), for up to a minute: under a fault the
// apiserver or a webhook may refuse it for a moment, as a client would
// see and retry.
func (s *soak) create(ctx context.Context, name string, create func(context.Context) error) error {
	var last error
	err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		last = create(ctx)
		if last != nil && !apierrors.IsAlreadyExists(last) {
			s.rep.op("creates retried (refused for a moment under a fault)")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("create %s: %w (last: %v)", name, err, last)
	}
	return nil
}

// ---- ImagePullJobs ----

// pulls runs one ImagePullJob after the other, over every node.
func (s *soak) pulls(ctx context.Context) error {
	for i := 0; time.Now().Before(s.until) && i < len(s.images); i++ {
		if err := s.pull(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (s *soak) pull(ctx context.Context, i int) error {
	ref := s.images[i]
	pushed, _ := s.reg.Pushed(ref)
	name := fmt.Sprintf("soak-pull-%d", i)
	jobs := s.f.Shoal.AppsV1alpha1().ImagePullJobs(s.f.Namespace)
	j := pullJob(name, ref, func(j *v1alpha1.ImagePullJob) {
		setPull(&j.Spec.ImagePullJobTemplate, len(s.nodes), 120, 4)
		j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always, ActiveDeadlineSeconds: ptr.To[int64](int64(soakOpTimeout / time.Second))}
	})
	if err := s.create(ctx, name, func(ctx context.Context) error {
		_, err := jobs.Create(ctx, j, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	s.rep.op("ImagePullJobs created")
	var last *v1alpha1.ImagePullJob
	err := framework.WaitFor(ctx, soakOpTimeout+time.Minute, func(ctx context.Context) (bool, error) {
		got, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // the apiserver may be slow under faults
		}
		last = got
		return isComplete(got), nil
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		s.rep.check(invPullEnds, fmt.Errorf("%s did not end: %s", name, pullJobState(last)))
		return nil
	}
	s.rep.check(invPullEnds, nil)
	s.rep.op("ImagePullJobs completed")
	if last.Status.Failed > 0 {
		s.rep.op("node pulls failed after retries")
	}

	view, err := s.f.ImagePullJobNodes(ctx, s.f.Namespace, name)
	if err == nil {
		for _, n := range view.Nodes {
			if n.Phase != pullview.PhaseSucceeded {
				continue
			}
			s.rep.op("node pulls succeeded")
			s.rep.check(invPullVerified, s.imageInRuntime(ctx, n.Node, ref, pushed.Digest))
		}
	}
	var upstream int64
	for _, b := range s.reg.BytesTo(pushed.Layers...) {
		upstream += b
	}
	var layers int64
	for _, l := range pushed.LayerSizes {
		layers += l
	}
	var over error
	if float64(upstream) > 1.5*float64(layers) {
		over = fmt.Errorf("%s: the registry served %d layer bytes for %d bytes of layers (%.2f copies)", name, upstream, layers, float64(upstream)/float64(layers))
	}
	s.rep.check(invPullUpstream, over)
	if err := jobs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// imageInRuntime checks that node's containerd has ref under digest: it
// committed every blob after checking its sha256.
func (s *soak) imageInRuntime(ctx context.Context, node, ref, digest string) error {
	var last error
	err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := runtimeImageDigests(ctx, s.cfg, node, ref)
		if err != nil {
			last = err // containerd may be restarting
			return false, nil
		}
		if !slices.ContainsFunc(got, func(d string) bool { return strings.HasSuffix(d, "@"+digest) }) {
			last = fmt.Errorf("%s on %s has repo digests %v, not %s", ref, node, got, digest)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return cmp.Or(last, err)
	}
	return nil
}

// runtimeImageDigests asks node's containerd for ref's repo digests.
func runtimeImageDigests(ctx context.Context, cfg *cluster.Config, node, ref string) ([]string, error) {
	is, err := nodeImages(ctx, cfg, node)
	if err != nil {
		return nil, err
	}
	img, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil {
		return nil, err
	}
	if img.GetImage() == nil {
		return nil, fmt.Errorf("%s is not in the runtime of %s", ref, node)
	}
	return img.GetImage().GetRepoDigests(), nil
}

// ---- ContainerRecreateRequests ----

// crrsPerPod is how many CRRs a pod gets before the soak replaces it:
// the kubelet delays each restart of a container twice as long as the one
// before (10 s, 20 s, 40 s, ... up to 5 minutes, until it has run 10
// minutes), which would soon make every CRR wait minutes for the kubelet.
const crrsPerPod = 3

// crrPod is the testserver pod the CRRs of slot i (a node) go to; gen
// numbers its replacements.
func (s *soak) crrPod(i, gen int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("soak-crr-%d-%d", i, gen), Labels: map[string]string{"app": "soak-crr"}},
		Spec: corev1.PodSpec{
			NodeName:                      s.nodes[i].Name,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: s.f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"},
			}},
		},
	}
}

// startCRRPods runs one testserver pod per node for the CRRs.
func (s *soak) startCRRPods(ctx context.Context) []string {
	var names []string
	for i := range s.nodes {
		pod, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).Create(ctx, s.crrPod(i, 0), metav1.CreateOptions{})
		require.NoError(s.t, err)
		names = append(names, pod.Name)
	}
	_, err := s.f.WaitForPodsReady(ctx, s.f.Namespace, "app=soak-crr", len(names), podStartTimeout)
	require.NoError(s.t, err)
	return names
}

// replaceCRRPod deletes slot i's pod and runs the next one in its place.
func (s *soak) replaceCRRPod(ctx context.Context, i, gen int, old string) (string, error) {
	pods := s.f.Kube.CoreV1().Pods(s.f.Namespace)
	if err := pods.Delete(ctx, old, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("delete %s: %w", old, err)
	}
	next := s.crrPod(i, gen)
	if err := s.create(ctx, next.Name, func(ctx context.Context) error {
		_, err := pods.Create(ctx, next, metav1.CreateOptions{})
		return err
	}); err != nil {
		return "", err
	}
	err := framework.WaitFor(ctx, soakOpTimeout, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, next.Name, metav1.GetOptions{})
		return err == nil && framework.IsPodReady(p), nil
	})
	if err != nil {
		return "", fmt.Errorf("%s not ready: %w", next.Name, err)
	}
	s.rep.op("CRR pods replaced (kubelet restart backoff)")
	return next.Name, nil
}

// crrs recreates a random pod's container, one request at a time, and
// checks each request's end and the pods' restart counts. A pod that had
// crrsPerPod requests is replaced by a new one on its node.
func (s *soak) crrs(ctx context.Context, pods []string) error {
	rng := rand.New(rand.NewPCG(uint64(s.p.seed), 1))
	asked := map[string]int{}
	completed := map[string]int{}
	gens := make([]int, len(pods))
	requests := s.f.Shoal.AppsV1alpha1().ContainerRecreateRequests(s.f.Namespace)
	for i := 0; time.Now().Before(s.until); i++ {
		slot := rng.IntN(len(pods))
		if asked[pods[slot]] >= crrsPerPod {
			gens[slot]++
			next, err := s.replaceCRRPod(ctx, slot, gens[slot], pods[slot])
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			pods[slot] = next
		}
		pod := pods[slot]
		name := fmt.Sprintf("soak-crr-%d", i)
		if err := s.create(ctx, name, func(ctx context.Context) error {
			_, err := requests.Create(ctx, newCRR(name, pod, "main"), metav1.CreateOptions{})
			return err
		}); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		asked[pod]++
		s.rep.op("CRRs created")
		var last *v1alpha1.ContainerRecreateRequest
		err := framework.WaitFor(ctx, soakOpTimeout, func(ctx context.Context) (bool, error) {
			c, err := requests.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = c
			return c.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted || c.Status.Phase == v1alpha1.ContainerRecreateRequestFailed, nil
		})
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err != nil:
			s.rep.check(invCRREnds, fmt.Errorf("%s on %s did not end: %+v", name, pod, statusOf(last)))
		case last.Status.Phase == v1alpha1.ContainerRecreateRequestFailed && last.Status.Message == "":
			s.rep.check(invCRREnds, fmt.Errorf("%s on %s failed without a reason", name, pod))
		default:
			s.rep.check(invCRREnds, nil)
			s.rep.op("CRRs " + strings.ToLower(string(last.Status.Phase)))
			if last.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted {
				completed[pod]++
			}
		}
		s.rep.check(invCRRRestarts, s.restartsWithin(ctx, pod, completed[pod], asked[pod]))
	}
	return nil
}

// restartsWithin checks that pod's container restarted at least done and
// at most asked times.
func (s *soak) restartsWithin(ctx context.Context, pod string, done, asked int) error {
	var last int32
	err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		p, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		last = p.Status.ContainerStatuses[0].RestartCount
		return int(last) >= done, nil
	})
	switch {
	case int(last) > asked:
		return fmt.Errorf("%s's container restarted %d times; CRRs asked %d", pod, last, asked)
	case err != nil && ctx.Err() == nil:
		return fmt.Errorf("%s's container restarted %d times; %d CRRs completed", pod, last, done)
	}
	return nil
}

// ---- CloneSet in-place updates ----

// cloneSetImages copies testserver:latest in the cluster's registry under
// n new tags, one per CloneSet update. Every update then names an image
// the kubelet has not run in that pod: it doubles the delay of each
// restart of a container spec it restarted before (up to 5 minutes), so
// switching between two images would soon wait minutes per update.
func (s *soak) cloneSetImages(n int) []string {
	src := s.f.Image("testserver:latest")
	from, err := name.ParseReference(src, name.Insecure)
	require.NoError(s.t, err)
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*time.Minute)
	defer cancel()
	desc, err := remote.Get(from, remote.WithContext(ctx))
	require.NoError(s.t, err, "read %s", src)
	repo := strings.TrimSuffix(src, ":latest")
	var out []string
	for i := range n {
		ref := fmt.Sprintf("%s:%s-u%d", repo, s.f.Namespace, i)
		to, err := name.NewTag(ref, name.Insecure)
		require.NoError(s.t, err)
		if desc.MediaType.IsIndex() {
			idx, err := desc.ImageIndex()
			require.NoError(s.t, err)
			require.NoError(s.t, remote.WriteIndex(to, idx, remote.WithContext(ctx)), "tag %s", ref)
		} else {
			img, err := desc.Image()
			require.NoError(s.t, err)
			require.NoError(s.t, remote.Write(to, img, remote.WithContext(ctx)), "tag %s", ref)
		}
		out = append(out, ref)
	}
	return out
}

// startCloneSet runs a CloneSet of 3 updated in place.
func (s *soak) startCloneSet(ctx context.Context) string {
	const name = "soak-web"
	s.csImages = s.cloneSetImages(int(s.p.d/(30*time.Second)) + 2)
	cs := inPlaceCloneSet(s.f, name, 3, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType)
	_, err := s.f.Shoal.AppsV1beta1().CloneSets(s.f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(s.t, err)
	waitCloneSet(ctx, s.t, s.f, name, "3 pods ready", settled(3, 3))
	return name
}

// rollouts switches the CloneSet's image back and forth and checks that
// every update rolls out to the same pods.
func (s *soak) rollouts(ctx context.Context, name string) error {
	sets := s.f.Shoal.AppsV1beta1().CloneSets(s.f.Namespace)
	images := s.csImages
	for i := 0; time.Now().Before(s.until) && i < len(images); i++ {
		before, err := s.cloneSetPodUIDs(ctx, name)
		if err != nil {
			return err
		}
		image := images[i]
		err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			cs, err := sets.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			cs.Spec.Template.Spec.Containers[0].Image = image
			_, err = sets.Update(ctx, cs, metav1.UpdateOptions{})
			return err == nil, nil
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("update CloneSet %s: %w", name, err)
		}
		s.rep.op("CloneSet updates")
		var last *v1beta1.CloneSet
		err = framework.WaitFor(ctx, soakOpTimeout, func(ctx context.Context) (bool, error) {
			cs, err := sets.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = cs
			return cs.Status.ObservedGeneration == cs.Generation && cs.Status.UpdatedReadyReplicas == 3 &&
				cs.Status.ReadyReplicas == 3 && cs.Status.CurrentRevision == cs.Status.UpdateRevision, nil
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			var st any
			if last != nil {
				st = last.Status
			}
			s.rep.check(invInPlace, fmt.Errorf("update %d to %s did not roll out: %+v", i, image, st))
			continue
		}
		after, err := s.cloneSetPodUIDs(ctx, name)
		if err != nil {
			return err
		}
		var changed error
		if !slices.Equal(before, after) {
			changed = fmt.Errorf("update %d recreated pods: %v -> %v", i, before, after)
		}
		s.rep.check(invInPlace, changed)
		s.rep.op("CloneSet updates rolled out")
	}
	return nil
}

func (s *soak) cloneSetPodUIDs(ctx context.Context, name string) ([]types.UID, error) {
	var uids []types.UID
	err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		list, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, nil
		}
		uids = uids[:0]
		for _, p := range list.Items {
			uids = append(uids, p.UID)
		}
		slices.Sort(uids)
		return true, nil
	})
	return uids, err
}

// ---- PodProbeMarker flips ----

const (
	soakProbeCondition = "soak.shoal.io/ok"
	soakProbeLabel     = "soak.shoal.io/state"
)

// startProbePods runs a busybox pod per node and a PodProbeMarker whose
// exec probe succeeds while /tmp/ok exists.
func (s *soak) startProbePods(ctx context.Context) []string {
	var names []string
	for i, n := range s.nodes {
		pod := busyboxPod(s.f, fmt.Sprintf("soak-probe-%d", i), n.Name, "touch /tmp/ok; exec sleep 1000000")
		pod.Labels["app"] = "soak-probe"
		_, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(s.t, err)
		names = append(names, pod.Name)
	}
	_, err := s.f.WaitForPodsReady(ctx, s.f.Namespace, "app=soak-probe", len(names), podStartTimeout)
	require.NoError(s.t, err)
	probe := execProbe("test", "-f", "/tmp/ok")
	probe.Probe.PeriodSeconds = 1
	createPPM(ctx, s.t, s.f, newPPM("soak-probe", "soak-probe", v1alpha1.PodContainerProbe{
		Name: "ok", ContainerName: "busybox", Probe: probe, PodConditionType: soakProbeCondition,
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
			{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{soakProbeLabel: "ok"}},
			{State: v1alpha1.ProbeFailed, Labels: map[string]string{soakProbeLabel: "failing"}},
		},
	}))
	waitProbedPods(ctx, s.t, s.f, "soak-probe", len(names), soakProbeTimeout, "probes succeed",
		conditionIs(soakProbeCondition, corev1.ConditionTrue, ""), labelIs(soakProbeLabel, "ok"))
	return names
}

// probeFlips makes every probe fail, then succeed, and so on, and checks
// that each pod's condition and label follow.
func (s *soak) probeFlips(ctx context.Context, pods []string) error {
	ok := true
	for time.Now().Before(s.until) {
		ok = !ok
		cmd, status, label := []string{"rm", "-f", "/tmp/ok"}, corev1.ConditionFalse, "failing"
		if ok {
			cmd, status, label = []string{"touch", "/tmp/ok"}, corev1.ConditionTrue, "ok"
		}
		var flipped []string
		for _, pod := range pods {
			// An exec goes through the node's kubelet: not while the node
			// is cut off or its runtime restarts. The pod skips this flip.
			if _, _, err := s.f.ExecInPod(ctx, pod, "busybox", cmd); err != nil {
				s.rep.op("probe flips skipped (exec failed under a fault)")
				continue
			}
			flipped = append(flipped, pod)
		}
		for _, pod := range flipped {
			s.rep.op("probe flips")
			var last *corev1.Pod
			err := framework.WaitFor(ctx, soakProbeTimeout, func(ctx context.Context) (bool, error) {
				p, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).Get(ctx, pod, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				last = p
				return conditionIs(soakProbeCondition, status, "")(p) == "" && labelIs(soakProbeLabel, label)(p) == "", nil
			})
			if ctx.Err() != nil {
				return nil
			}
			var missed error
			if err != nil {
				seen := "pod not read"
				if last != nil {
					seen = conditionIs(soakProbeCondition, status, "")(last) + " " + labelIs(soakProbeLabel, label)(last)
				}
				missed = fmt.Errorf("%s: want %s=%s and %s=%s within %s; %s", pod, soakProbeCondition, status, soakProbeLabel, label,
					soakProbeTimeout, seen)
			}
			s.rep.check(invProbeFlip, missed)
		}
		if sleepCtx(ctx, 10*time.Second) != nil {
			return nil
		}
	}
	return nil
}
