//go:build bench

package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// stage is one step of a pod's in-place update, as the pod object shows
// it, in the order the steps happen.
type stage int

const (
	stageNotReady          stage = iota // Ready False
	stageNewSpec                        // the container's image is the new one
	stageNewContainerUp                 // the status shows a new container running
	stageNewContainerReady              // ... and ready (the kubelet's readiness probe)
	stageGateTrue                       // InPlaceUpdateReady True again (the coordinator)
	stageReady                          // Ready True
	numStages
)

var stageNames = [numStages]string{"not ready", "new spec", "new container running", "new container ready", "InPlaceUpdateReady True", "Ready"}

// stageWatch records, per pod, when each stage of an in-place update of
// container 0 to image was first seen in a watch of the pods labelled
// app=<app>: where a pod's unready time goes.
type stageWatch struct {
	image     string
	mu        sync.Mutex
	first     map[string]string                // pod UID: container 0's ID at the start
	seen      map[string]*[numStages]time.Time // pod UID: when each stage was first seen
	closed    map[string]bool                  // pod UID: InPlaceUpdateReady was seen False
	node      map[string]string                // pod UID: its node
	stopWatch func()
}

// watchStages starts recording the stages of the in-place updates to image
// of the pods labelled app=<app> that run now.
func watchStages(ctx context.Context, t *testing.T, f *framework.Framework, app, image string) *stageWatch {
	t.Helper()
	w := &stageWatch{image: image, first: map[string]string{}, seen: map[string]*[numStages]time.Time{}, closed: map[string]bool{}, node: map[string]string{}}
	w.stopWatch = watchAppPods(ctx, t, f, app,
		func(p *corev1.Pod) {
			if len(p.Status.ContainerStatuses) > 0 {
				w.first[string(p.UID)] = p.Status.ContainerStatuses[0].ContainerID
			}
		},
		func(_ watch.EventType, p *corev1.Pod) { w.observe(p, time.Now()) })
	return w
}

// observe records the stages p shows for the first time.
func (w *stageWatch) observe(p *corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	uid := string(p.UID)
	w.node[uid] = p.Spec.NodeName
	old, known := w.first[uid]
	if !known || len(p.Spec.Containers) == 0 || len(p.Status.ContainerStatuses) == 0 {
		return // a pod created during the update: not an in-place one
	}
	s := w.seen[uid]
	if s == nil {
		s = &[numStages]time.Time{}
		w.seen[uid] = s
	}
	mark := func(st stage, ok bool) {
		// Later stages count only once the pod went not ready, so that the
		// ready pod of before the update is not taken for the end.
		if ok && s[st].IsZero() && (st == stageNotReady || !s[stageNotReady].IsZero()) {
			s[st] = now
		}
	}
	cs := p.Status.ContainerStatuses[0]
	newUp := cs.ContainerID != old && cs.ContainerID != "" && cs.State.Running != nil
	ready, gate := conditionTrue(p, corev1.PodReady), conditionTrue(p, wellknown.ConditionInPlaceUpdateReady)
	if !gate {
		w.closed[uid] = true // the coordinator began the update
	}
	// Not ready counts from the update's start: the gate closed or the new
	// spec, not a readiness blip of the old container.
	mark(stageNotReady, !ready && (w.closed[uid] || p.Spec.Containers[0].Image == w.image))
	mark(stageNewSpec, p.Spec.Containers[0].Image == w.image)
	mark(stageNewContainerUp, newUp)
	mark(stageNewContainerReady, newUp && cs.Ready)
	mark(stageGateTrue, gate && w.closed[uid])
	mark(stageReady, ready)
}

func conditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podStages is one pod's in-place update: its node, and the time from the
// pod going not ready to each later stage.
type podStages struct {
	node  string
	after [numStages]time.Duration
}

// stop ends the watch and returns the stages of every pod that went
// through all of them, by node name.
func (w *stageWatch) stop() []podStages {
	w.stopWatch()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []podStages
	for uid, s := range w.seen {
		complete := true
		for _, at := range s {
			complete = complete && !at.IsZero()
		}
		if !complete {
			continue
		}
		ps := podStages{node: w.node[uid]}
		for st := stageNewSpec; st < numStages; st++ {
			ps.after[st] = s[st].Sub(s[stageNotReady])
		}
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node < out[j].node })
	return out
}

// formatStages prints, per pod, when each stage came after the pod went
// not ready.
func formatStages(pods []podStages) string {
	var b strings.Builder
	for _, ps := range pods {
		fmt.Fprintf(&b, "    %-22s after not ready:", ps.node)
		for st := stageNewSpec; st < numStages; st++ {
			fmt.Fprintf(&b, " %s %s;", stageNames[st], ps.after[st].Round(10*time.Millisecond))
		}
		b.WriteString("\n")
	}
	return b.String()
}
