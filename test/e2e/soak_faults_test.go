//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The soak's faults (soak_test.go), the agents' resumption check and the
// defect run.

// faults runs the seeded schedule: one fault at a time, each kind in turn
// in a shuffled order, with a random pause after each recovery.
func (s *soak) faults(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(uint64(s.p.seed), 2))
	if sleepCtx(ctx, 10*time.Second) != nil {
		return nil
	}
	var order []string
	for time.Now().Before(s.until) {
		if len(order) == 0 {
			order = slices.Clone(s.p.faults)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		kind := order[0]
		order = order[1:]
		node := s.nodes[rng.IntN(len(s.nodes))].Name
		start := time.Now()
		target, err := s.inject(ctx, kind, node)
		if ctx.Err() != nil {
			return nil
		}
		s.rep.fault(kind, target, time.Since(start), err)
		if err != nil {
			return fmt.Errorf("fault %s on %s: %w", kind, target, err)
		}
		if sleepCtx(ctx, time.Duration(10+rng.IntN(15))*time.Second) != nil {
			return nil
		}
	}
	return nil
}

// inject runs one fault and waits for its target to recover; it returns
// what it hit.
func (s *soak) inject(ctx context.Context, kind, node string) (string, error) {
	switch kind {
	case faultAgentKill:
		return node, s.killAgent(ctx, node)
	case faultLeaderKill:
		return s.killLeader(ctx)
	case faultNodeCut:
		if err := cluster.CutNode(ctx, node); err != nil {
			return node, err
		}
		_ = sleepCtx(ctx, soakCutFor)
		if err := cluster.RestoreNode(context.WithoutCancel(ctx), node); err != nil {
			return node, err
		}
		_, err := s.f.WaitForNodeCondition(ctx, node, corev1.NodeReady, corev1.ConditionTrue, soakRecoverWithin)
		return node, err
	case faultRegistryBurst:
		s.reg.FailWith(503)
		_ = sleepCtx(ctx, 10*time.Second)
		s.reg.FailWith(429)
		_ = sleepCtx(ctx, 10*time.Second)
		s.reg.FailWith(0)
		return "registry", nil
	case faultContainerdRestart:
		if _, err := cluster.NodeCommand(ctx, s.cfg, node, "kill containerd"); err != nil {
			return node, err
		}
		if _, err := cluster.NodeCommand(context.WithoutCancel(ctx), s.cfg, node, "start containerd"); err != nil {
			return node, err
		}
		_, err := s.f.WaitForNodeCondition(ctx, node, corev1.NodeReady, corev1.ConditionTrue, soakRecoverWithin)
		return node, err
	}
	return "", fmt.Errorf("unknown fault kind %q", kind)
}

// killAgent deletes node's agent pod at once and checks that its
// successor resumes the work items the killed one held: the probes of the
// node's probed pods never end, so there is always some.
func (s *soak) killAgent(ctx context.Context, node string) error {
	agents, err := s.f.AgentPods(ctx)
	if err != nil {
		return err
	}
	old, ok := agents[node]
	if !ok {
		return fmt.Errorf("no agent on %s", node)
	}
	m, err := framework.Scrape(ctx, framework.AgentURL(old))
	if err != nil {
		return fmt.Errorf("scrape agent %s: %w", old.Name, err)
	}
	held, _ := m.Value("shoal_agent_work_items", map[string]string{"kind": "probe"})
	s.rep.kill(old.Name)
	if err := s.f.Kube.CoreV1().Pods(framework.ShoalNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		return fmt.Errorf("delete agent %s: %w", old.Name, err)
	}
	var fresh corev1.Pod
	err = framework.WaitFor(ctx, soakRecoverWithin, func(ctx context.Context) (bool, error) {
		agents, err := s.f.AgentPods(ctx)
		if err != nil {
			return false, nil
		}
		fresh = agents[node]
		return fresh.UID != "" && fresh.UID != old.UID && framework.IsPodReady(&fresh), nil
	})
	if err != nil {
		return fmt.Errorf("no ready agent on %s after killing %s: %w", node, old.Name, err)
	}
	m, err = framework.Scrape(ctx, framework.AgentURL(fresh))
	if err != nil {
		return fmt.Errorf("scrape agent %s: %w", fresh.Name, err)
	}
	loaded, _ := m.Value("shoal_agent_work_items_loaded", map[string]string{"kind": "probe"})
	var lost error
	if loaded < held {
		lost = fmt.Errorf("agent %s on %s held %.0f probe work items; its successor %s found %.0f in its state dir", old.Name, node, held, fresh.Name, loaded)
	}
	s.rep.check(invAgentResumes, lost)
	return nil
}

// killLeader deletes the coordinator leader's pod at once and waits for a
// new leader.
func (s *soak) killLeader(ctx context.Context) (string, error) {
	old, err := s.f.CoordinatorLeader(ctx)
	if err != nil {
		return "coordinator", err
	}
	s.rep.kill(old.Name)
	if err := s.f.Kube.CoreV1().Pods(framework.ShoalNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		return old.Name, fmt.Errorf("delete leader %s: %w", old.Name, err)
	}
	err = framework.WaitFor(ctx, soakRecoverWithin, func(ctx context.Context) (bool, error) {
		leader, err := s.f.CoordinatorLeader(ctx)
		return err == nil && leader.Name != old.Name && framework.IsPodReady(leader), nil
	})
	return old.Name, err
}

// ---- Shoal's own pods ----

// shoalPods lists shoal-system's pods by name.
func (s *soak) shoalPods(ctx context.Context) map[string]corev1.Pod {
	list, err := s.f.Kube.CoreV1().Pods(framework.ShoalNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(s.t, err)
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// checkShoalPods checks that every Shoal pod of the start is still there
// with the same restart counts, unless the schedule killed it, and that
// no more pods are new than were killed.
func (s *soak) checkShoalPods(ctx context.Context, before map[string]corev1.Pod) {
	// Let the last replacements appear first.
	var after map[string]corev1.Pod
	_ = framework.WaitFor(ctx, soakRecoverWithin, func(ctx context.Context) (bool, error) {
		after = s.shoalPods(ctx)
		return len(after) >= len(before), nil
	})
	s.rep.mu.Lock()
	killed := maps.Clone(s.rep.killed)
	s.rep.mu.Unlock()
	var errs []error
	for name, b := range before {
		a, ok := after[name]
		switch {
		case killed[name]:
		case !ok:
			errs = append(errs, fmt.Errorf("%s is gone, and the schedule did not kill it", name))
		case a.UID != b.UID:
			errs = append(errs, fmt.Errorf("%s was replaced, and the schedule did not kill it", name))
		default:
			for i, cs := range a.Status.ContainerStatuses {
				if i < len(b.Status.ContainerStatuses) && cs.RestartCount != b.Status.ContainerStatuses[i].RestartCount {
					errs = append(errs, fmt.Errorf("%s container %s restarted (%d times before, %d now)", name, cs.Name,
						b.Status.ContainerStatuses[i].RestartCount, cs.RestartCount))
				}
			}
		}
	}
	newPods := 0
	for name, a := range after {
		if _, ok := before[name]; !ok {
			newPods++
			for _, cs := range a.Status.ContainerStatuses {
				if cs.RestartCount > 0 {
					errs = append(errs, fmt.Errorf("%s (a replacement) container %s restarted %d times", name, cs.Name, cs.RestartCount))
				}
			}
		}
	}
	if newPods > len(killed) {
		errs = append(errs, fmt.Errorf("%d new Shoal pods, %d killed", newPods, len(killed)))
	}
	s.rep.check(invShoalPods, errors.Join(errs...))
}

// ---- the defect ----

// forgetAgentState moves every agent's state dir to an emptyDir, which a
// new agent pod gets empty: an agent that forgets its work when it
// restarts. The agents are put back as they were when the test ends.
func (s *soak) forgetAgentState(ctx context.Context) {
	dss := s.f.Kube.AppsV1().DaemonSets(framework.ShoalNamespace)
	ds, err := dss.Get(ctx, "shoal-agent", metav1.GetOptions{})
	require.NoError(s.t, err)
	orig := ds.Spec.Template.Spec.Volumes
	vols := slices.Clone(orig)
	i := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == "state" })
	require.GreaterOrEqual(s.t, i, 0, "the agent has no volume named state")
	vols[i] = corev1.Volume{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	setVolumes := func(ctx context.Context, v []corev1.Volume) error {
		return framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			ds, err := dss.Get(ctx, "shoal-agent", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			ds.Spec.Template.Spec.Volumes = v
			_, err = dss.Update(ctx, ds, metav1.UpdateOptions{})
			return err == nil, nil
		})
	}
	require.NoError(s.t, setVolumes(ctx, vols))
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := setVolumes(ctx, orig); err != nil {
			s.t.Errorf("put the agents' state dir back: %v", err)
			return
		}
		if _, err := s.f.WaitForDaemonSetReady(ctx, framework.ShoalNamespace, "shoal-agent", 4*time.Minute); err != nil {
			s.t.Errorf("agents not ready again after the defect: %v", err)
		}
	})
	_, err = s.f.WaitForDaemonSetReady(ctx, framework.ShoalNamespace, "shoal-agent", 4*time.Minute)
	require.NoError(s.t, err)
	s.t.Logf("defect %s: the agents keep their state dir in an emptyDir", soakDefectNoState)
}
