//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// statefulSetLikeTests is the test-only StatefulSet-like kind of
// OpenKruise's case (apps.kruise.io/v1beta1 StatefulSetLikeTest; not a
// Kruise API).
var statefulSetLikeTests = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1beta1", Resource: "statefulsetliketests"}

// TestPersistentPodStateStatefulSetLike ports OpenKruise's
// "PersistentPodState functionality statefulsetlike node topology"
// (test/e2e/apps/v1alpha1/persistent_pod_state.go): a custom
// StatefulSet-like workload white-listed in the kruise-configuration
// ConfigMap's PPS_Watch_Custom_Workload_WhiteList, with the auto-generate
// annotations (required kubernetes.io/os, preferred
// kubernetes.io/hostname, persisted annotation "name"), gets a
// PersistentPodState recording its 5 pods: their node, both node labels
// and their "name" annotation.
//
// As in OpenKruise the test plays the workload's controller (it creates
// the pods and writes the status), and the white list is written after
// the workload exists; Shoal reads the list as it changes, where
// OpenKruise reads it once at start. OpenKruise sleeps 10 s before it
// asserts; this waits for the records instead. Beyond OpenKruise, a pod
// created again under the same name gets its recorded placement from
// the pod webhook, which sees pods labelled
// statefulset.kubernetes.io/pod-name (docs/dev/persistentpodstate.md).
func TestPersistentPodStateStatefulSetLike(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	osKey := corev1.LabelOSStable
	const name, kind = "statefulsetlike", "StatefulSetLikeTest"
	installCustomKind(ctx, t, f, statefulSetLikeTests, kind)

	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "staticip"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name: "main", Image: f.Image("busybox:latest"), Command: []string{"/bin/sh", "-c", "sleep 10000000"},
			}},
		},
	}
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&template)
	require.NoError(t, err)
	like := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": statefulSetLikeTests.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "annotations": map[string]any{
			wellknown.AnnotationAutoGeneratePersistentPodState: "true",
			wellknown.AnnotationRequiredPersistentTopology:     osKey,
			wellknown.AnnotationPreferredPersistentTopology:    ppsHostname,
			wellknown.AnnotationPersistentPodAnnotations:       "name",
		}},
		"spec": map[string]any{
			"replicas": int64(5),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "staticip"}},
			"template": tmpl,
		},
	}}
	likes := f.Dynamic.Resource(statefulSetLikeTests).Namespace(f.Namespace)
	created, err := likes.Create(ctx, like, metav1.CreateOptions{})
	require.NoError(t, err)

	addWhiteListEntries(ctx, t, f, wellknown.ConfigPersistentPodStateWatchCustomWorkloadWhiteList,
		map[string]any{"Group": statefulSetLikeTests.Group, "Version": statefulSetLikeTests.Version, "Kind": kind})

	// The workload's pods, as its controller would make them.
	likePod := func(podName string, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: podName, Labels: labels, Annotations: map[string]string{"name": podName},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: created.GetAPIVersion(), Kind: kind, Name: name, UID: created.GetUID(), Controller: ptr.To(true),
				}},
			},
			Spec: *template.Spec.DeepCopy(),
		}
		for k, v := range template.Labels {
			p.Labels[k] = v
		}
		return p
	}
	for i := range 5 {
		_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, likePod(fmt.Sprintf("%s-%d", name, i), map[string]string{}), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pods := waitLikePods(ctx, t, f, 5)

	// OpenKruise's UpdateStatefulsetLikeStatus.
	got, err := likes.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedMap(got.Object, map[string]any{"replicas": int64(5), "readyReplicas": int64(len(pods))}, "status"))
	_, err = likes.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)

	pps := ppsGet(ctx, t, f, name, "the 5 pods recorded with 2 node labels and 1 annotation each", func(p *v1alpha1.PersistentPodState) bool {
		if p == nil || len(p.Status.PodStates) != 5 {
			return false
		}
		for _, st := range p.Status.PodStates {
			if len(st.NodeTopologyLabels) != 2 || len(st.Annotations) != 1 {
				return false
			}
		}
		return true
	})
	// OpenKruise's assertions.
	require.Len(t, pods, 5)
	nodeLabels := ppsNodeLabels(ctx, t, f)
	for _, p := range pods {
		st, ok := pps.Status.PodStates[p.Name]
		require.True(t, ok, "pod %s recorded", p.Name)
		require.Len(t, st.NodeTopologyLabels, 2)
		for k, v := range st.NodeTopologyLabels {
			require.Equal(t, nodeLabels[p.Spec.NodeName][k], v, "pod %s: node label %s", p.Name, k)
		}
		require.Equal(t, p.Spec.NodeName, st.NodeName)
		require.Equal(t, map[string]string{"name": p.Name}, st.Annotations)
	}
	// Generated for the workload, as for a StatefulSet.
	require.Equal(t, v1alpha1.TargetReference{APIVersion: created.GetAPIVersion(), Kind: kind, Name: name}, pps.Spec.TargetReference)
	require.Equal(t, []string{osKey}, pps.Spec.RequiredPersistentTopology.NodeTopologyKeys)
	ref := metav1.GetControllerOf(pps)
	require.NotNil(t, ref)
	require.Equal(t, created.GetUID(), ref.UID)

	// Beyond OpenKruise: the workload's controller makes pod 0 again, with
	// the pod-name label the pod webhook selects on.
	podName := name + "-0"
	require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, podName, metav1.DeleteOptions{}))
	err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := f.Kube.CoreV1().Pods(f.Namespace).Get(ctx, podName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "pod %s gone", podName)
	again, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx,
		likePod(podName, map[string]string{"statefulset.kubernetes.io/pod-name": podName}), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, pps.Status.PodStates[podName].NodeTopologyLabels[osKey], again.Spec.NodeSelector[osKey], "the required key is injected")
	for _, p := range waitLikePods(ctx, t, f, 5) {
		if p.Name == podName {
			requireInjected(t, &p, pps, pps.Status.PodStates[podName])
		}
	}
}

// waitLikePods waits until n pods labelled app=staticip, none being
// deleted, are Ready, and returns them.
func waitLikePods(ctx context.Context, t *testing.T, f *framework.Framework, n int) []corev1.Pod {
	t.Helper()
	var last []corev1.Pod
	err := framework.WaitFor(ctx, podStartTimeout, func(ctx context.Context) (bool, error) {
		list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=staticip"})
		if err != nil {
			return false, err
		}
		last = nil
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				last = append(last, p)
			}
		}
		if len(last) != n {
			return false, nil
		}
		for i := range last {
			if !framework.IsPodReady(&last[i]) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "%d pods app=staticip Ready; last seen %s", n, ppsDescribePods(last))
	return last
}
