package framework

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/shoal-io/shoal/coordinator/podprobemarker/probeview"
)

// PodProbeMarkerPods reads the coordinator's per-pod view of the
// PodProbeMarker ns/name through the apiserver's service proxy (as kubectl
// kruise get podprobemarker NAME --pods does): each pod the marker's probes
// run on, with the probe states its node's agent last reported. Shoal has
// no NodePodProbe objects; this view is where the e2e tests look instead.
// A marker the coordinator does not know (not seen yet, or deleted and
// gone) is an error for which apierrors.IsNotFound is true.
func (c *Clients) PodProbeMarkerPods(ctx context.Context, ns, name string) (*probeview.MarkerPods, error) {
	body, err := c.Kube.CoreV1().Services(ShoalNamespace).
		ProxyGet("http", CoordinatorService, "http", probeview.PodsPathPrefix+ns+"/"+name, nil).
		DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("per-pod view of podprobemarker %s/%s: %w", ns, name, err)
	}
	var view probeview.MarkerPods
	if err := json.Unmarshal(body, &view); err != nil {
		return nil, fmt.Errorf("decode per-pod view of podprobemarker %s/%s: %w (body %.200q)", ns, name, err, body)
	}
	return &view, nil
}
