//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// hotSidecarSet is the base set with one hot-upgrade sidecar: the
// testserver on 8081, sharing the port between the two containers of its
// pair; the empty image is the pause image (which ignores the args).
func hotSidecarSet(s *scsTester) *v1beta1.SidecarSet {
	set := s.baseSidecarSet()
	set.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.RollingUpdateSidecarSetStrategyType}
	set.Spec.Containers = set.Spec.Containers[:1]
	set.Spec.Containers[0].Args = []string{"serve", "--port", "8081", "--reuse-port"}
	set.Spec.Containers[0].UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{
		UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: s.f.Image("pause:3.10"),
	}
	return set
}

// requireHotPair checks that pod's sidecar works in container working at
// image and the other container of the pair holds the empty image.
func requireHotPair(t *testing.T, s *scsTester, pod *corev1.Pod, sidecar, working, image string) {
	t.Helper()
	got := sidecarcontrol.WorkingHotUpgradeContainers(pod)[sidecar]
	require.Equal(t, working, got, "pod %s: working container", pod.Name)
	require.Equal(t, image, containerImage(pod, working), "pod %s: image of %s", pod.Name, working)
	idle := sidecar + "-1"
	if working == idle {
		idle = sidecar + "-2"
	}
	require.Equal(t, s.f.Image("pause:3.10"), containerImage(pod, idle), "pod %s: %s holds the empty image", pod.Name, idle)
}

func containerImage(pod *corev1.Pod, name string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// TestSidecarSetHotUpgrade ports OpenKruise's "SidecarSet HotUpgrade
// functionality [SidecarSetHotUpgrade]" cases, with their assertions, and
// measures a hot upgrade under load.
func TestSidecarSetHotUpgrade(t *testing.T) {
	t.Parallel()

	t.Run("sidecarSet inject pod hot upgrade sidecar container", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, hotSidecarSet(s))
		name := set.Spec.Containers[0].Name
		d := s.baseDeployment(1)
		s.createDeployment(ctx, d)
		pod := s.pods(ctx, "app=sidecarset")[0]
		require.Len(t, pod.Spec.Containers, len(set.Spec.Containers)+len(d.Spec.Template.Spec.Containers)+1)
		for annotation, want := range map[string]string{
			wellknown.AnnotationSidecarSetVersionPrefix + name + "-1":    "1",
			wellknown.AnnotationSidecarSetVersionAltPrefix + name + "-1": "0",
			wellknown.AnnotationSidecarSetVersionPrefix + name + "-2":    "0",
			wellknown.AnnotationSidecarSetVersionAltPrefix + name + "-2": "1",
		} {
			require.Equal(t, want, pod.Annotations[annotation], annotation)
		}
		require.Equal(t, s.f.Image("testserver:latest"), containerImage(pod, name+"-1"))
		require.Equal(t, s.f.Image("pause:3.10"), containerImage(pod, name+"-2"))
	})

	t.Run("sidecarSet upgrade hot sidecar container image", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, hotSidecarSet(s))
		name := set.Spec.Containers[0].Name
		s.createDeployment(ctx, s.baseDeployment(1))
		pod := s.pods(ctx, "app=sidecarset")[0]
		requireHotPair(t, s, pod, name, name+"-1", s.f.Image("testserver:latest"))

		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 1, UpdatedReadyPods: 1, ReadyPods: 1})
		requireHotPair(t, s, s.pods(ctx, "app=sidecarset")[0], name, name+"-2", s.f.Image("testserver:v2"))

		set.Spec.Containers[0].Image = s.f.Image("testserver:latest")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 1, UpdatedReadyPods: 1, ReadyPods: 1})
		requireHotPair(t, s, s.pods(ctx, "app=sidecarset")[0], name, name+"-1", s.f.Image("testserver:latest"))

		// Another field than the image: no upgrade.
		set.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PROXY", Value: "127.0.0.1"}}
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 0, UpdatedReadyPods: 0, ReadyPods: 1})
	})

	t.Run("sidecarSet upgrade hot sidecar container failed image", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, hotSidecarSet(s))
		name := set.Spec.Containers[0].Name
		s.createDeployment(ctx, s.baseDeployment(2))
		requireHotPair(t, s, s.pods(ctx, "app=sidecarset")[0], name, name+"-1", s.f.Image("testserver:latest"))

		set.Spec.Containers[0].Image = s.f.Image("testserver:no-such-tag")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 1, UpdatedReadyPods: 0, ReadyPods: 1})

		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 2, UpdatedReadyPods: 2, ReadyPods: 2})
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			requireHotPair(t, s, pod, name, name+"-2", s.f.Image("testserver:v2"))
		}
	})

	// Shoal's must-show: a client requests the pod through its sidecar at
	// 20 requests per second during an image bump; no request fails and
	// the pod never turns unready.
	t.Run("hot upgrade under load", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, hotSidecarSet(s))
		name := set.Spec.Containers[0].Name
		s.createDeployment(ctx, s.baseDeployment(1))
		pod := s.pods(ctx, "app=sidecarset")[0]
		before := sidecarcontrol.WorkingHotUpgradeContainers(pod)[name]

		client := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "load", Labels: map[string]string{"app": "load"}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: new(int64(1)),
				Containers: []corev1.Container{{
					Name: "load", Image: s.f.Image("testserver:latest"),
					Args: []string{"poll", "--interval", "50ms", "http://" + net.JoinHostPort(pod.Status.PodIP, "8081") + "/healthz"},
				}},
			},
		}
		_, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).Create(ctx, client, metav1.CreateOptions{})
		require.NoError(t, err)
		counts := func() loadCounts {
			log, err := s.f.PodLogs(ctx, "load", "load")
			require.NoError(t, err)
			return lastLoadCounts(t, log)
		}
		require.NoError(t, framework.WaitFor(ctx, podStartTimeout, func(ctx context.Context) (bool, error) {
			log, err := s.f.PodLogs(ctx, "load", "load")
			return err == nil && strings.Contains(log, `"ok"`) && lastLoadCounts(t, log).OK > 20, nil
		}), "the load client answers")
		start := counts()

		unready := watchUnready(ctx, t, s, pod.Name)
		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 1, UpdatedReadyPods: 1, ReadyPods: 1})
		// Keep the load on for 3 s after the flip.
		after := s.pods(ctx, "app=sidecarset")[0]
		waitCounts := counts().OK + 60
		require.NoError(t, framework.WaitFor(ctx, 30*time.Second, func(context.Context) (bool, error) { return counts().OK >= waitCounts, nil }))
		end := counts()
		working := sidecarcontrol.WorkingHotUpgradeContainers(after)[name]
		requireHotPair(t, s, after, name, working, s.f.Image("testserver:v2"))
		drops := unready()
		t.Logf("hot upgrade under load: %d requests during the bump, %d failed (last error %q); working container %s -> %s; pod unready %d times",
			end.OK+end.Failed-start.OK-start.Failed, end.Failed-start.Failed, end.LastError, before, working, len(drops))
		require.NotEqual(t, before, working)
		require.Zero(t, end.Failed-start.Failed, "no request fails during a hot upgrade (last error %q)", end.LastError)
		require.Empty(t, drops, "the pod stays ready during a hot upgrade")
	})
}

// loadCounts are the running counts testserver poll prints.
type loadCounts struct {
	OK        int    `json:"ok"`
	Failed    int    `json:"failed"`
	LastError string `json:"lastError"`
}

// lastLoadCounts reads the last counts line of a testserver poll log.
func lastLoadCounts(t *testing.T, log string) loadCounts {
	t.Helper()
	var c loadCounts
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if json.Unmarshal([]byte(lines[i]), &c) == nil {
			return c
		}
	}
	return c
}

// watchUnready records each time the pod's Ready condition turns False
// until the returned function is called; it returns the times seen.
func watchUnready(ctx context.Context, t *testing.T, s *scsTester, pod string) func() []string {
	t.Helper()
	w, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod).String()})
	require.NoError(t, err)
	var mu sync.Mutex
	var drops []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if c := condition(p, corev1.PodReady); c != nil && c.Status != corev1.ConditionTrue {
				mu.Lock()
				drops = append(drops, fmt.Sprintf("%s (%s)", time.Now().Format(time.TimeOnly), c.Reason))
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return drops
	}
}
