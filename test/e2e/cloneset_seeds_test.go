//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// readSeed decodes testdata/seeds/file into obj, with REGISTRY/ pointed
// at the local registry (strict: a field the type lacks fails).
func readSeed(t *testing.T, f *framework.Framework, file string, obj any) {
	t.Helper()
	readSeedFile(t, f, filepath.Join("testdata", "seeds", file), obj)
}

// readSeedExample decodes ../testdata/seed-examples/file, the seeds'
// examples as the dry run applies them (see its INDEX.md), into obj.
func readSeedExample(t *testing.T, f *framework.Framework, file string, obj any) {
	t.Helper()
	readSeedFile(t, f, filepath.Join("..", "testdata", "seed-examples", file), obj)
}

// readSeedFile decodes the YAML at path into obj, with REGISTRY/ pointed
// at the local registry (strict: a field the type lacks fails).
func readSeedFile(t *testing.T, f *framework.Framework, path string, obj any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	registry := strings.TrimSuffix(f.Image("x"), "x")
	require.NoError(t, yaml.UnmarshalStrict([]byte(strings.ReplaceAll(string(raw), "REGISTRY/", registry)), obj), path)
}

// applySeed creates the v1alpha1 CloneSet of testdata/seeds/file and
// returns its name.
func applySeed(ctx context.Context, t *testing.T, f *framework.Framework, file string) string {
	t.Helper()
	var cs v1alpha1.CloneSet
	readSeed(t, f, file, &cs)
	_, err := f.Shoal.AppsV1alpha1().CloneSets(f.Namespace).Create(ctx, &cs, metav1.CreateOptions{})
	require.NoError(t, err, "apply %s", file)
	return cs.Name
}

// TestCloneSetSeedManifests applies the CloneSet YAMLs of the seeds
// (OpenKruise's release notes) at apps.kruise.io/v1alpha1, completed only
// where a fragment cannot apply (selector, template, images), and checks
// that each does what its seed says.
func TestCloneSetSeedManifests(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	v2 := f.Image("testserver:v2")
	setImage := func(container string) func(*v1beta1.CloneSet) {
		return func(cs *v1beta1.CloneSet) {
			for i := range cs.Spec.Template.Spec.Containers {
				if cs.Spec.Template.Spec.Containers[i].Name == container {
					cs.Spec.Template.Spec.Containers[i].Image = v2
				}
			}
		}
	}

	t.Run("000 partition 90% of 8 updates one pod", func(t *testing.T) {
		t.Parallel()
		name := applySeed(ctx, t, f, "cloneset-partition-90.yaml")
		waitCloneSet(ctx, t, f, name, "8 ready", settled(8, 8))
		updateCloneSet(ctx, t, f, name, setImage("main"))
		cs := waitCloneSet(ctx, t, f, name, "one pod updated and ready", settled(8, 1))
		require.EqualValues(t, 8, cs.Status.Replicas)
		require.EqualValues(t, 1, cs.Status.ExpectedUpdatedReplicas)
		require.EqualValues(t, 1, cs.Status.UpdatedReplicas)
		require.EqualValues(t, 1, cs.Status.UpdatedReadyReplicas)
	})

	t.Run("000 and 003 two containers with priorities update in two batches", func(t *testing.T) {
		t.Parallel()
		name := applySeed(ctx, t, f, "cloneset-container-priority.yaml")
		waitCloneSet(ctx, t, f, name, "1 ready", settled(1, 1))
		before := cloneSetPods(ctx, t, f, name)
		require.Len(t, before, 1)
		updateCloneSet(ctx, t, f, name, func(cs *v1beta1.CloneSet) {
			cs.Spec.Template.Annotations["app-config"] = "... config v2 ..."
			setImage("main")(cs)
		})
		cs := waitCloneSet(ctx, t, f, name, "updated in place and ready", func(cs *v1beta1.CloneSet) bool {
			return settled(1, 1)(cs) && cs.Status.CurrentRevision == cs.Status.UpdateRevision
		})
		require.NotEmpty(t, cs.Status.UpdateRevision)
		after := cloneSetPods(ctx, t, f, name)
		require.Len(t, after, 1)
		pod := after[0]
		require.Equal(t, before[0].UID, pod.UID, "in place: the same pod")
		restarts := map[string]corev1.ContainerStatus{}
		for _, s := range pod.Status.ContainerStatuses {
			restarts[s.Name] = s
		}
		require.EqualValues(t, 1, restarts["sidecar"].RestartCount, "the sidecar restarted for its new env")
		require.EqualValues(t, 1, restarts["main"].RestartCount, "main restarted on its new image")
		require.Equal(t, v2, pod.Spec.Containers[1].Image)

		var state pub.InPlaceUpdateState
		require.NoError(t, json.Unmarshal([]byte(pod.Annotations[wellknown.AnnotationInPlaceUpdateState]), &state))
		require.Len(t, state.ContainerBatchesRecord, 2, "two batches: %+v", state.ContainerBatchesRecord)
		require.Equal(t, []string{"sidecar"}, state.ContainerBatchesRecord[0].Containers, "the higher priority first")
		require.Equal(t, []string{"main"}, state.ContainerBatchesRecord[1].Containers)
		main, sidecar := restarts["main"], restarts["sidecar"]
		require.NotNil(t, main.LastTerminationState.Terminated)
		require.NotNil(t, sidecar.State.Running)
		require.False(t, main.LastTerminationState.Terminated.FinishedAt.Before(&sidecar.State.Running.StartedAt),
			"main stopped (%s) after the new sidecar started (%s)", main.LastTerminationState.Terminated.FinishedAt, sidecar.State.Running.StartedAt)
	})

	t.Run("001 pre-download parallelism from the annotation", func(t *testing.T) {
		t.Parallel()
		name := applySeed(ctx, t, f, "cloneset-predownload-parallelism.yaml")
		waitCloneSet(ctx, t, f, name, "4 ready", settled(4, 4))
		updateCloneSet(ctx, t, f, name, setImage("main"))
		var job *v1alpha1.ImagePullJob
		err := framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			list, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i := range list.Items {
				if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.Name == name {
					job = &list.Items[i]
				}
			}
			return job != nil, nil
		})
		require.NoError(t, err, "the in-place update created an ImagePullJob")
		require.Equal(t, v2, job.Spec.Image)
		require.Equal(t, 5, job.Spec.Parallelism.IntValue(), "apps.kruise.io/image-predownload-parallelism")
	})

	t.Run("004 disablePVCReuse gives a deleted pod fresh PVCs", func(t *testing.T) {
		t.Parallel()
		name := applySeed(ctx, t, f, "cloneset-disable-pvc-reuse.yaml")
		waitCloneSet(ctx, t, f, name, "4 ready", settled(4, 4))
		pods := cloneSetPods(ctx, t, f, name)
		victim := pods[0]
		claim := "data-" + name + "-" + victim.Labels[wellknown.LabelCloneSetInstanceID]
		_, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).Get(ctx, claim, metav1.GetOptions{})
		require.NoError(t, err, "each pod has its PVC")
		require.NoError(t, f.Kube.CoreV1().Pods(f.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}))
		err = framework.WaitFor(ctx, cloneSetTimeout, func(ctx context.Context) (bool, error) {
			pods := cloneSetPods(ctx, t, f, name)
			if len(pods) != 4 {
				return false, nil
			}
			for _, p := range pods {
				if p.Name == victim.Name {
					return false, nil
				}
			}
			c, err := f.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).Get(ctx, claim, metav1.GetOptions{})
			return err != nil || c.DeletionTimestamp != nil, nil
		})
		require.NoError(t, err, "the replacement is a new instance and the old PVC %s is deleted", claim)
		waitCloneSet(ctx, t, f, name, "4 ready", settled(4, 4))
	})
}
