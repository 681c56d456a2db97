//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/yaml"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// applySidecarSetSeed creates the v1alpha1 SidecarSet of
// testdata/seeds/file, with REGISTRY/, NAMESPACE and SUFFIX filled in,
// deletes it when the test ends, and returns its name.
func applySidecarSetSeed(ctx context.Context, t *testing.T, s *scsTester, file string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "seeds", file))
	require.NoError(t, err)
	text := strings.NewReplacer("REGISTRY/", strings.TrimSuffix(s.f.Image("x"), "x"),
		"NAMESPACE", s.f.Namespace, "SUFFIX", utilrand.String(5)).Replace(string(raw))
	var set v1alpha1.SidecarSet
	require.NoError(t, yaml.UnmarshalStrict([]byte(text), &set), file)
	_, err = s.f.Shoal.AppsV1alpha1().SidecarSets().Create(ctx, &set, metav1.CreateOptions{})
	require.NoError(t, err, "apply %s", file)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.f.Shoal.AppsV1alpha1().SidecarSets().Delete(ctx, set.Name, metav1.DeleteOptions{})
	})
	return set.Name
}

// seedDeployment is a one-replica Deployment of busybox pods labelled
// app=app, with the given pod annotations.
func seedDeployment(s *scsTester, app string, annotations map[string]string) *appsv1.Deployment {
	d := s.baseDeployment(1)
	d.Name = app
	d.Spec.Selector.MatchLabels = map[string]string{"app": app}
	d.Spec.Template.Labels = map[string]string{"app": app}
	d.Spec.Template.Annotations = annotations
	return d
}

// TestSidecarSetSeedManifests applies the SidecarSet and sidecar
// terminator YAMLs of the seeds (OpenKruise's release notes), completed
// only where a fragment cannot apply, and checks that each does what its
// seed says. (Seed 000's injectionStrategy.customVersion and
// .revisionName sit directly under injectionStrategy in the notes; the
// API, OpenKruise's included, has them under injectionStrategy.revision,
// which TestSidecarSetUpgrade covers.)
func TestSidecarSetSeedManifests(t *testing.T) {
	t.Parallel()

	t.Run("patchPodMetadata", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		for _, key := range []string{"oom-score", "custom.example.com/sidecar-configuration", wellknown.AnnotationContainerLaunchPriority} {
			allowPatchPodMetadata(ctx, t, s.f, key, nil)
		}
		applySidecarSetSeed(ctx, t, s, "sidecarset-patch-pod-metadata.yaml")
		s.createDeployment(ctx, seedDeployment(s, "seed-patch-metadata", map[string]string{"oom-score": `{"main": 2}`}))
		pod := s.pods(ctx, "app=seed-patch-metadata")[0]
		require.JSONEq(t, `{"log-agent": 1, "main": 2}`, pod.Annotations["oom-score"])
		require.Equal(t, `{"command": "/home/admin/bin/start.sh", "log-level": "3"}`, pod.Annotations["custom.example.com/sidecar-configuration"])
		require.Equal(t, wellknown.ContainerLaunchPriorityOrdered, pod.Annotations[wellknown.AnnotationContainerLaunchPriority])
		require.Equal(t, "log-agent", pod.Spec.Containers[0].Name)
		for _, c := range pod.Spec.Containers {
			_, ok := envValue(&c, wellknown.EnvContainerBarrier)
			require.True(t, ok, "container %s has the launch barrier the patched annotation asks for", c.Name)
		}
	})

	t.Run("hot upgrade", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		name := applySidecarSetSeed(ctx, t, s, "sidecarset-hot-upgrade.yaml")
		s.createDeployment(ctx, seedDeployment(s, "seed-hot-upgrade", nil))
		pod := s.pods(ctx, "app=seed-hot-upgrade")[0]
		requireHotPair(t, s, pod, "nginx-sidecar", "nginx-sidecar-1", s.f.Image("testserver:latest"))

		set := s.get(ctx, name)
		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		s.waitStatus(ctx, name, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 1, ReadyPods: 1, UpdatedReadyPods: 1})
		pod = s.pods(ctx, "app=seed-hot-upgrade")[0]
		requireHotPair(t, s, pod, "nginx-sidecar", "nginx-sidecar-2", s.f.Image("testserver:v2"))
		require.Equal(t, "nginx-sidecar-2", sidecarcontrol.WorkingHotUpgradeContainers(pod)["nginx-sidecar"])
	})

	t.Run("job sidecar terminator", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		var job batchv1.Job
		readSeed(t, f, "job-sidecar-terminator.yaml", &job)
		_, err := f.Kube.BatchV1().Jobs(f.Namespace).Create(ctx, &job, metav1.CreateOptions{})
		require.NoError(t, err)
		err = framework.WaitFor(ctx, sidecarJobTimeout, func(ctx context.Context) (bool, error) {
			j, err := f.Kube.BatchV1().Jobs(f.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return j.Status.Succeeded == 1, nil
		})
		require.NoError(t, err, "the seed's Job completes once main exits; its pods: %s", describeJobPods(ctx, t, f, job.Name))
	})
}
