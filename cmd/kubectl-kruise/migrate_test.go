package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func testDeployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "3", "owner": "ops"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}},
			},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%"))}},
		},
	}
}

func TestMigrateCreate(t *testing.T) {
	for _, copyReplicas := range []bool{false, true} {
		f := newFakeCluster()
		_, err := f.kube.AppsV1().Deployments("ns").Create(context.Background(), testDeployment(5), metav1.CreateOptions{})
		require.NoError(t, err)
		args := []string{"migrate", "cloneset", "--from", "deployment", "--src-name", "web", "--dst-name", "web-cs", "--create"}
		want := int32(0)
		if copyReplicas {
			args, want = append(args, "--copy"), 5
		}
		code, stdout, stderr := f.run(t, args...)
		require.Equal(t, exitOK, code, stderr)
		require.Contains(t, stdout, "cloneset.apps.kruise.io/web-cs created from deployment.apps/web")
		cs, err := f.shoal.AppsV1beta1().CloneSets("ns").Get(context.Background(), "web-cs", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, want, *cs.Spec.Replicas)
		require.Equal(t, "nginx:1.25", cs.Spec.Template.Spec.Containers[0].Image)
		require.Equal(t, map[string]string{"app": "web"}, cs.Spec.Selector.MatchLabels)
		require.Equal(t, map[string]string{"owner": "ops"}, cs.Annotations, "the Deployment controller's annotations stay behind")
		require.Equal(t, ptr.To(intstr.FromString("20%")), cs.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable, "the Deployment's defaults become the CloneSet's")
	}
}

func TestMigrateMovesReplicasStepByStep(t *testing.T) {
	f := newFakeCluster(cloneSetFromDeployment(testDeployment(5), "web", 0))
	_, err := f.kube.AppsV1().Deployments("ns").Create(context.Background(), testDeployment(5), metav1.CreateOptions{})
	require.NoError(t, err)
	// The CloneSet's pods become available as soon as it is scaled.
	f.shoal.PrependReactor("patch", "clonesets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := f.shoal.Tracker().Get(a.GetResource(), a.GetNamespace(), "web")
		if err != nil {
			return true, nil, err
		}
		cs := obj.(*v1beta1.CloneSet).DeepCopy()
		var patch struct {
			Spec struct {
				Replicas int32 `json:"replicas"`
			} `json:"spec"`
		}
		require.NoError(t, json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &patch))
		cs.Spec.Replicas = ptr.To(patch.Spec.Replicas)
		cs.Status.AvailableReplicas = patch.Spec.Replicas
		return true, cs, f.shoal.Tracker().Update(a.GetResource(), cs, "ns")
	})
	code, stdout, stderr := f.run(t, "migrate", "cloneset", "--from", "deployment", "--src-name", "web", "--max-surge", "2", "--replicas", "4")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, ""+
		"moved 2 of 4: cloneset.apps.kruise.io/web has 2 available, deployment.apps/web scaled to 3\n"+
		"moved 4 of 4: cloneset.apps.kruise.io/web has 4 available, deployment.apps/web scaled to 1\n"+
		"migrated 4 replicas from deployment.apps/web to cloneset.apps.kruise.io/web\n", stdout)
	d, err := f.kube.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 1, *d.Spec.Replicas)

	code, _, stderr = f.run(t, "migrate", "cloneset", "--from", "statefulset", "--src-name", "web")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "only deployment can be migrated from")
}

func TestMigrateStopsWhenTheCloneSetIsNotAvailable(t *testing.T) {
	f := newFakeCluster(cloneSetFromDeployment(testDeployment(2), "web", 0))
	_, err := f.kube.AppsV1().Deployments("ns").Create(context.Background(), testDeployment(2), metav1.CreateOptions{})
	require.NoError(t, err)
	code, _, stderr := f.run(t, "migrate", "cloneset", "--src-name", "web", "--timeout", "30ms")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "nothing was scaled down for this step")
	d, err := f.kube.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 2, *d.Spec.Replicas, "the Deployment keeps its pods")
}
