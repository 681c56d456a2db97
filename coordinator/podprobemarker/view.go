package podprobemarker

import (
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/shoal-io/shoal/coordinator/podprobemarker/probeview"
	"github.com/shoal-io/shoal/internal/httpserve"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Pods returns the per-pod view of the marker namespace/name, false when
// the marker does not exist.
func (c *Controller) Pods(namespace, name string) (*probeview.MarkerPods, bool) {
	obj, exists, err := c.o.Markers.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	m := obj.(*v1alpha1.PodProbeMarker)
	view := &probeview.MarkerPods{Namespace: namespace, Name: name, Pods: []probeview.PodProbes{}}
	pods, _ := c.o.Pods.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	for _, o := range pods {
		pod := o.(*corev1.Pod)
		if !eligible(pod) || !selects(m, pod) {
			continue
		}
		results := map[string]*nodeworkv1.ProbeResult{}
		if _, rep := c.o.Store.Item(pod.Spec.NodeName, nodework.ProbeID(namespace, pod.Name)); rep.GetProbe().GetPodUid() == string(pod.UID) {
			for _, r := range rep.GetProbe().GetProbes() {
				results[r.GetName()] = r
			}
		}
		p := probeview.PodProbes{Name: pod.Name, UID: string(pod.UID), Node: pod.Spec.NodeName}
		for _, probe := range m.Spec.Probes {
			s := probeview.ProbeState{Name: probe.Name, State: probeview.StateUnknown}
			if r := results[probeName(m.Name, probe.Name)]; r != nil {
				s.State, s.Message = string(stateOf(r.GetState())), r.GetMessage()
				if ns := r.GetLastProbeUnixNanos(); ns > 0 {
					s.LastProbeTime = time.Unix(0, ns).UTC()
				}
				if ns := r.GetLastTransitionUnixNanos(); ns > 0 {
					s.LastTransitionTime = time.Unix(0, ns).UTC()
				}
			}
			p.Probes = append(p.Probes, s)
		}
		view.Pods = append(view.Pods, p)
	}
	slices.SortFunc(view.Pods, func(a, b probeview.PodProbes) int { return strings.Compare(a.Name, b.Name) })
	return view, true
}

// PodsHandler serves GET probeview.PodsPathPrefix + "<namespace>/<name>":
// the marker's probeview.MarkerPods as JSON, 404 for a marker that does
// not exist, 503 on a replica that is not the leader (only the leader
// hears the agents).
func (c *Controller) PodsHandler() http.Handler {
	return httpserve.ObjectView(probeview.PodsPathPrefix, "PodProbeMarker", c.o.IsLeader, func(ns, name string) (any, bool) {
		return c.Pods(ns, name)
	})
}
