//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// TestCloneSetChangeResourcesRecreates ports OpenKruise's "change
// resource and qos -> succeed to recreate": under InPlaceIfPossible, a
// change of resources (BestEffort to Guaranteed) cannot be made in place,
// so the pod is recreated. Requests are 100m/64Mi instead of 1/1Gi to fit
// the local cluster's nodes.
func TestCloneSetChangeResourcesRecreates(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name = "qos"
	cs := inPlaceCloneSet(f, name, 1, v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType)
	cs.Spec.Template.Labels["test-env"] = "foo"
	cs.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TEST_ENV",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['test-env']"}}}}
	cs.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	waitCloneSet(ctx, t, f, name, "1 ready", settled(1, 1))
	waitProgressing(ctx, t, f, name, condAvailable)
	before := cloneSetPods(ctx, t, f, name)
	require.Len(t, before, 1)
	require.Equal(t, corev1.PodQOSBestEffort, before[0].Status.QOSClass)

	guaranteed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) {
		cs.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: guaranteed, Limits: guaranteed}
	})
	waitCloneSet(ctx, t, f, name, "updated and ready", func(cs *v1beta1.CloneSet) bool {
		return settled(1, 1)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
	})
	after := cloneSetPods(ctx, t, f, name)
	require.Len(t, after, 1)
	require.NotEqual(t, before[0].UID, after[0].UID, "recreated, not updated in place")
	require.Equal(t, corev1.PodQOSGuaranteed, after[0].Status.QOSClass)
	waitProgressing(ctx, t, f, name, condAvailable)
}

// TestCloneSetHostNetwork ports OpenKruise's "creates with hostNetwork
// pod, specified containerPort without specifying hostPort": the pod's
// hostPort defaults to its containerPort and the CloneSet becomes
// available. The port is 18081 (the test server listens on it in the
// node's network namespace).
func TestCloneSetHostNetwork(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	const name, port = "hostnet", 18081
	cs := testCloneSet(f, name, 1)
	cs.Spec.Template.Spec.HostNetwork = true
	c := &cs.Spec.Template.Spec.Containers[0]
	c.Args = []string{"serve", "--port", "18081"}
	c.Ports = []corev1.ContainerPort{{ContainerPort: port}}
	c.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(port)
	cs.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	created, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, cs, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Zero(t, created.Spec.Template.Spec.Containers[0].Ports[0].HostPort, "the template is not defaulted (DefaultHostNetworkHostPortsInPodTemplates is off)")
	waitCloneSet(ctx, t, f, name, "1 ready", settled(1, 1))
	for _, p := range cloneSetPods(ctx, t, f, name) {
		require.Equal(t, p.Spec.Containers[0].Ports[0].ContainerPort, p.Spec.Containers[0].Ports[0].HostPort, "hostPort defaults to containerPort")
	}
	waitProgressing(ctx, t, f, name, condAvailable)
}
