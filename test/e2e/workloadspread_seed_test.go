//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// TestWorkloadSpreadSeed applies seed 000's workloadspread-demo
// (testdata/seeds/workloadspread-demo.yaml) over the cluster's zone
// labels: a Deployment of 10 spreads 3 pods (30%) to zone-a and 7 to
// zone-b.
func TestWorkloadSpreadSeed(t *testing.T) {
	t.Parallel()
	w := newWSTester(t)
	zoneOf := map[string]string{}
	for _, n := range requireSchedulableNodes(w.ctx, t, w.f, 2) {
		zoneOf[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	zones := map[string]bool{}
	for _, z := range zoneOf {
		zones[z] = true
	}
	if !zones["zone-a"] || !zones["zone-b"] {
		t.Skipf("the seed spreads over zone-a and zone-b; the schedulable nodes are in %v", zones)
	}

	var ws v1alpha1.WorkloadSpread
	readSeed(t, w.f, "workloadspread-demo.yaml", &ws)
	w.createWS(&ws)
	labels := map[string]string{"app": "workload-xxx"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workload-xxx"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(10)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: wsSleeperSpec(w.f)},
		},
	}
	_, err := w.f.Kube.AppsV1().Deployments(w.f.Namespace).Create(w.ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)

	w.waitPods("app=workload-xxx", 10, "3 pods in zone-a, 7 in zone-b", func(pods []corev1.Pod) error {
		count := map[string]int{}
		for _, p := range pods {
			raw := p.Annotations[wellknown.AnnotationMatchedWorkloadSpread]
			var m struct{ Name, Subset string }
			if err := json.Unmarshal([]byte(raw), &m); err != nil || m.Name != ws.Name {
				return fmt.Errorf("pod %s: annotation %q", p.Name, raw)
			}
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s is not scheduled yet", p.Name)
			}
			want := map[string]string{"subset-a": "zone-a", "subset-b": "zone-b"}[m.Subset]
			if zoneOf[p.Spec.NodeName] != want {
				return fmt.Errorf("pod %s of %s runs in %q", p.Name, m.Subset, zoneOf[p.Spec.NodeName])
			}
			count[m.Subset]++
		}
		if count["subset-a"] != 3 || count["subset-b"] != 7 {
			return fmt.Errorf("subsets hold %v", count)
		}
		return nil
	})
	w.waitWS(ws.Name, "3 pods in subset-a (30% of 10), 7 in subset-b", wsStatus(wsCount{3, 0}, wsCount{7, -1}))
}
