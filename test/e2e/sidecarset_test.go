//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// sidecarSetTimeout bounds a wait for a SidecarSet's status (OpenKruise's
// tester waits 5 minutes; our pods start in seconds).
const sidecarSetTimeout = 2 * time.Minute

// shoalNamespace is where the coordinator runs and keeps SidecarSet
// revisions and its kruise-configuration ConfigMap.
const shoalNamespace = "shoal-system"

// scsTester carries one test's SidecarSets and Deployments, as
// OpenKruise's SidecarSetTester does. Its SidecarSets, cluster-scoped,
// select only the test's namespace and are deleted when the test ends.
type scsTester struct {
	f *framework.Framework
	t *testing.T
}

func newSCSTester(t *testing.T) *scsTester {
	return &scsTester{f: newFramework(t), t: t}
}

// baseSidecarSet is OpenKruise's NewBaseSidecarSet with local images: an
// init container, a "nginx" sidecar (the testserver, sharing the app's
// volumes) before the app and a busybox sidecar after it, selecting
// app=sidecarset pods of the test's namespace.
func (s *scsTester) baseSidecarSet() *v1beta1.SidecarSet {
	suffix := utilrand.String(5)
	return &v1beta1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{
			// A SidecarSet's name goes into label values (63 characters):
			// OpenKruise's "test-sidecarset-<ns>-<rand>" with the namespace
			// left out (the set selects the test's namespace alone).
			Name:   "test-sidecarset-" + suffix,
			Labels: map[string]string{"app": "sidecar"},
		},
		Spec: v1beta1.SidecarSetSpec{
			InitContainers: []v1beta1.SidecarContainer{{Container: corev1.Container{
				Name: "init-sidecar-" + suffix, Image: s.f.Image("busybox:latest"), Command: []string{"/bin/sh", "-c", "sleep 1"},
			}}},
			Containers: []v1beta1.SidecarContainer{
				{
					Container: corev1.Container{
						Name: "nginx-sidecar-" + suffix, Image: s.f.Image("testserver:latest"), ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{"serve", "--port", "8081"},
					},
					PodInjectPolicy:   v1beta1.BeforeAppContainerType,
					ShareVolumePolicy: v1beta1.ShareVolumePolicy{Type: v1beta1.ShareVolumePolicyEnabled},
				},
				{
					Container: corev1.Container{
						Name: "busybox-sidecar-" + suffix, Image: s.f.Image("busybox:latest"), Command: []string{"/bin/sh", "-c", "sleep 10000000"},
					},
					PodInjectPolicy: v1beta1.AfterAppContainerType,
				},
			},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sidecarset"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": s.f.Namespace}},
		},
	}
}

// baseDeployment is OpenKruise's NewBaseDeployment: one busybox "main".
func (s *scsTester) baseDeployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "sidecarset"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "deployment-test", Namespace: s.f.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: new(int64(1)),
					Containers: []corev1.Container{{
						Name: "main", Image: s.f.Image("busybox:latest"), Command: []string{"/bin/sh", "-c", "sleep 10000000"},
					}},
				},
			},
		},
	}
}

// create creates the SidecarSet, deletes it when the test ends, and
// returns it as stored (defaulted).
func (s *scsTester) create(ctx context.Context, set *v1beta1.SidecarSet) *v1beta1.SidecarSet {
	s.t.Helper()
	_, err := s.f.Shoal.AppsV1beta1().SidecarSets().Create(ctx, set, metav1.CreateOptions{})
	require.NoError(s.t, err, "create SidecarSet %s", set.Name)
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.f.Shoal.AppsV1beta1().SidecarSets().Delete(ctx, set.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.t.Logf("delete SidecarSet %s: %v", set.Name, err)
		}
	})
	// The injection webhook reads SidecarSets from its informer: a pod
	// created within milliseconds of the SidecarSet can miss it (seen once
	// in CI: one of two pods not injected). The status the controller
	// writes for the new generation shows the coordinators have it.
	return waitObject(ctx, s.t, s.f.Shoal.AppsV1beta1().SidecarSets(), time.Minute, set.Name, "seen by the coordinator",
		func(got *v1beta1.SidecarSet) bool { return got.Status.ObservedGeneration >= got.Generation },
		func(got *v1beta1.SidecarSet) any { return got.Status })
}

// update writes the spec (and labels and annotations) of set, retrying on
// conflicts, as the tester's UpdateSidecarSet does.
func (s *scsTester) update(ctx context.Context, set *v1beta1.SidecarSet) {
	s.t.Helper()
	updateObject(ctx, s.t, s.f.Shoal.AppsV1beta1().SidecarSets(), set.Name, func(cur *v1beta1.SidecarSet) {
		cur.Spec = set.Spec
		cur.Labels = set.Labels
	})
}

// get reads the SidecarSet.
func (s *scsTester) get(ctx context.Context, name string) *v1beta1.SidecarSet {
	s.t.Helper()
	out, err := s.f.Shoal.AppsV1beta1().SidecarSets().Get(ctx, name, metav1.GetOptions{})
	require.NoError(s.t, err)
	return out
}

// createDeployment creates d and waits until all its replicas run ready,
// as the tester's CreateDeployment does.
func (s *scsTester) createDeployment(ctx context.Context, d *appsv1.Deployment) {
	s.t.Helper()
	_, err := s.f.Kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(s.t, err)
	s.waitDeployment(ctx, d.Name)
}

// waitDeployment waits until the Deployment's replicas are all updated,
// ready and current.
func (s *scsTester) waitDeployment(ctx context.Context, name string) {
	s.t.Helper()
	waitObject(ctx, s.t, s.f.Kube.AppsV1().Deployments(s.f.Namespace), podStartTimeout, name, "all replicas ready",
		func(d *appsv1.Deployment) bool {
			r := *d.Spec.Replicas
			return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == r && d.Status.ReadyReplicas == r && d.Status.Replicas == r
		}, func(d *appsv1.Deployment) any { return d.Status })
}

// pods lists the live pods matching selector.
func (s *scsTester) pods(ctx context.Context, selector string) []*corev1.Pod {
	s.t.Helper()
	list, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(s.t, err)
	var out []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, &list.Items[i])
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// waitStatus waits for the SidecarSet's counts, observed at its current
// generation, as the tester's WaitForSidecarSetUpgradeComplete does.
func (s *scsTester) waitStatus(ctx context.Context, name string, want v1beta1.SidecarSetStatus) *v1beta1.SidecarSet {
	s.t.Helper()
	return waitObject(ctx, s.t, s.f.Shoal.AppsV1beta1().SidecarSets(), sidecarSetTimeout, name,
		fmt.Sprintf("matched %d updated %d ready %d updatedReady %d", want.MatchedPods, want.UpdatedPods, want.ReadyPods, want.UpdatedReadyPods),
		func(set *v1beta1.SidecarSet) bool {
			st := set.Status
			return st.MatchedPods == want.MatchedPods && st.UpdatedPods == want.UpdatedPods && st.ReadyPods == want.ReadyPods &&
				st.UpdatedReadyPods == want.UpdatedReadyPods && st.ObservedGeneration == set.Generation
		}, func(set *v1beta1.SidecarSet) any { return set.Status })
}

// waitObserved waits until the controller observed the SidecarSet's
// generation.
func (s *scsTester) waitObserved(ctx context.Context, name string) {
	s.t.Helper()
	waitObject(ctx, s.t, s.f.Shoal.AppsV1beta1().SidecarSets(), 30*time.Second, name, "generation observed",
		func(set *v1beta1.SidecarSet) bool { return set.Status.ObservedGeneration == set.Generation },
		func(set *v1beta1.SidecarSet) any { return set.Status })
}

// revisions lists the SidecarSet's ControllerRevisions, oldest first.
func (s *scsTester) revisions(ctx context.Context, name string) []appsv1.ControllerRevision {
	s.t.Helper()
	list, err := s.f.Kube.AppsV1().ControllerRevisions(shoalNamespace).List(ctx, metav1.ListOptions{LabelSelector: wellknown.LabelSidecarSetName + "=" + name})
	if err != nil {
		s.t.Logf("list revisions of %s: %v", name, err)
		return nil
	}
	slices.SortFunc(list.Items, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return list.Items
}

func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func hasMount(c *corev1.Container, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path })
}

func hasVolume(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
}

// TestSidecarSetInject ports OpenKruise's "SidecarSet Injecting
// functionality [SidecarSetInject]" cases, with their assertions.
func TestSidecarSetInject(t *testing.T) {
	t.Parallel()

	t.Run("pods don't have matched sidecarSet", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.baseSidecarSet()
		set.Spec.Selector.MatchLabels["app"] = "nomatched"
		s.create(ctx, set)
		d := s.baseDeployment(1)
		s.createDeployment(ctx, d)
		pods := s.pods(ctx, "app=sidecarset")
		require.Len(t, pods, 1)
		require.Len(t, pods[0].Spec.Containers, len(d.Spec.Template.Spec.Containers))
	})

	t.Run("sidecarset with volumes.downwardAPI", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		set := s.baseSidecarSet()
		set.Spec.Volumes = []corev1.Volume{{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
			},
		}}}}
		set.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "podinfo", MountPath: "/etc/podinfo"}}
		s.create(t.Context(), set)
	})

	t.Run("sidecarSet inject pod sidecar container", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, s.baseSidecarSet())
		d := s.baseDeployment(1)
		s.createDeployment(ctx, d)
		pod := s.pods(ctx, "app=sidecarset")[0]
		require.Len(t, pod.Spec.Containers, len(d.Spec.Template.Spec.Containers)+len(set.Spec.Containers))
		require.Len(t, pod.Spec.InitContainers, len(d.Spec.Template.Spec.InitContainers)+len(set.Spec.InitContainers))
		want := []string{set.Spec.Containers[0].Name, "main", set.Spec.Containers[1].Name}
		for i, name := range want {
			require.Equal(t, name, pod.Spec.Containers[i].Name)
		}
		require.Equal(t, set.Name, pod.Annotations[wellknown.AnnotationSidecarSetInjectedList])
		v, ok := envValue(&pod.Spec.Containers[0], "IS_INJECTED")
		require.True(t, ok && v == "true", "injected containers carry IS_INJECTED=true")
	})

	t.Run("sidecarSet inject pod sidecar container volumeMounts", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.baseSidecarSet()
		set.Spec.Containers = set.Spec.Containers[:1]
		set.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nginx-volume", MountPath: "/nginx-volume"}}
		set.Spec.Volumes = []corev1.Volume{{Name: "nginx-volume", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		s.create(ctx, set)
		d := s.baseDeployment(1)
		d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "main-volume", MountPath: "/main-volume"}}
		d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "main-volume", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		s.createDeployment(ctx, d)
		pod := s.pods(ctx, "app=sidecarset")[0]
		for _, v := range []string{"main-volume", "nginx-volume"} {
			require.True(t, hasVolume(pod, v), "volume %s", v)
		}
		for _, m := range []string{"/main-volume", "/nginx-volume"} {
			require.True(t, hasMount(&pod.Spec.Containers[0], m), "sidecar mount %s", m)
		}
	})

	t.Run("sidecarSet inject pod sidecar container volumeMounts, SubPathExpr with expanded subpath", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.baseSidecarSet()
		set.Spec.Containers = set.Spec.Containers[:1]
		set.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nginx-volume", MountPath: "/nginx-volume"}}
		set.Spec.Volumes = []corev1.Volume{{Name: "nginx-volume", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		s.create(ctx, set)
		d := s.baseDeployment(1)
		d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "main-volume", MountPath: "/main-volume", SubPathExpr: "foo/$(POD_NAME)/$(OD_NAME)/conf"}}
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "POD_NAME", Value: "bar"}, {Name: "OD_NAME", Value: "od_name"}}
		d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "main-volume", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		s.createDeployment(ctx, d)
		pod := s.pods(ctx, "app=sidecarset")[0]
		for _, v := range []string{"main-volume", "nginx-volume"} {
			require.True(t, hasVolume(pod, v), "volume %s", v)
		}
		sidecar := &pod.Spec.Containers[0]
		for _, m := range []string{"/main-volume", "/nginx-volume"} {
			require.True(t, hasMount(sidecar, m), "sidecar mount %s", m)
		}
		for _, e := range []string{"POD_NAME", "OD_NAME"} {
			_, ok := envValue(sidecar, e)
			require.True(t, ok, "the sidecar gets env %s that its subPathExpr expands", e)
		}
	})

	transferCase := func(t *testing.T, how string) {
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.baseSidecarSet()
		set.Spec.Containers = set.Spec.Containers[:1]
		set.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OD_NAME", Value: "sidecar_name"}, {Name: "SidecarName", Value: "nginx-sidecar"}}
		d := s.baseDeployment(1)
		switch how {
		case "name":
			set.Spec.Containers[0].TransferEnv = []v1beta1.TransferEnvVar{
				{SourceContainerName: "main", EnvName: "POD_NAME"},
				{SourceContainerName: "main", EnvName: "OD_NAME"},
				{SourceContainerName: "main", EnvName: "PROXY_IP"},
			}
		case "labels", "annotations":
			set.Spec.Containers[0].TransferEnv = []v1beta1.TransferEnvVar{{
				SourceContainerNameFrom: &v1beta1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata." + how + "['biz']"}},
				EnvNames:                []string{"POD_NAME", "OD_NAME", "PROXY_IP"},
			}}
			if how == "labels" {
				d.Spec.Template.Labels["biz"] = "main"
			} else {
				d.Spec.Template.Annotations = map[string]string{"biz": "main"}
			}
		}
		s.create(ctx, set)
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "POD_NAME", Value: "bar"}, {Name: "OD_NAME", Value: "od_name"}, {Name: "PROXY_IP", Value: "127.0.0.1"}}
		s.createDeployment(ctx, d)
		pod := s.pods(ctx, "app=sidecarset")[0]
		require.Len(t, pod.Spec.Containers, 2)
		for name, want := range map[string]string{"POD_NAME": "bar", "OD_NAME": "sidecar_name", "PROXY_IP": "127.0.0.1", "SidecarName": "nginx-sidecar"} {
			got, _ := envValue(&pod.Spec.Containers[0], name)
			require.Equal(t, want, got, "sidecar env %s", name)
		}
	}
	t.Run("sidecarSet inject pod sidecar container transfer Envs", func(t *testing.T) {
		t.Parallel()
		transferCase(t, "name")
	})
	t.Run("sidecarSet inject pod sidecar container transfer Envs with downward API by metadata.labels", func(t *testing.T) {
		t.Parallel()
		transferCase(t, "labels")
	})
	t.Run("sidecarSet inject pod sidecar container transfer Envs with downward API by metadata.annotations", func(t *testing.T) {
		t.Parallel()
		transferCase(t, "annotations")
	})
}

// TestSidecarSetUpgrade ports OpenKruise's "SidecarSet Upgrade
// functionality [SidecarSetUpgrade]" cases, with their assertions. The
// "nginx" sidecar moves between testserver:latest and testserver:v2
// (OpenKruise: nginx and busybox images); the failed image is a tag that
// does not exist.
func TestSidecarSetUpgrade(t *testing.T) {
	t.Parallel()

	// oneSidecar is the base set with only the "nginx" sidecar, rolling.
	oneSidecar := func(s *scsTester) *v1beta1.SidecarSet {
		set := s.baseSidecarSet()
		set.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.RollingUpdateSidecarSetStrategyType}
		set.Spec.Containers = set.Spec.Containers[:1]
		return set
	}
	all := func(n int32) v1beta1.SidecarSetStatus {
		return v1beta1.SidecarSetStatus{MatchedPods: n, UpdatedPods: n, ReadyPods: n, UpdatedReadyPods: n}
	}

	t.Run("sidecarSet patch pod metadata", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		allowPatchPodMetadata(ctx, t, s.f, "key", map[string]string{"app": "sidecar"})
		set := s.baseSidecarSet()
		set.Spec.Containers = set.Spec.Containers[:1]
		set.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{
			PatchPolicy: v1beta1.SidecarSetMergePatchJsonPatchPolicy, Annotations: map[string]string{"key": `{"nginx-sidecar":1}`},
		}}
		set = s.create(ctx, set)
		s.createDeployment(ctx, s.baseDeployment(2))
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			require.Equal(t, set.Spec.Containers[0].Image, pod.Spec.Containers[0].Image)
			require.Equal(t, `{"nginx-sidecar":1}`, pod.Annotations["key"])
		}
		// Only the metadata patch changes: no in-place update.
		set.Spec.PatchPodMetadata[0].Annotations["key"] = `{"nginx-sidecar":2}`
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(2))
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			require.Equal(t, set.Spec.Containers[0].Image, pod.Spec.Containers[0].Image)
			require.Equal(t, `{"nginx-sidecar":1}`, pod.Annotations["key"])
		}
		// An image update brings the new patch along.
		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(2))
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			require.Equal(t, s.f.Image("testserver:v2"), pod.Spec.Containers[0].Image)
			require.Equal(t, `{"nginx-sidecar":2}`, pod.Annotations["key"])
		}
	})

	t.Run("sidecarSet upgrade cold sidecar container image only", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := oneSidecar(s)
		set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromInt32(2))
		set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"inject": "sidecar", "kubernetes.io/metadata.name": s.f.Namespace}}
		set = s.create(ctx, set)
		s.createDeployment(ctx, s.baseDeployment(2))
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			require.Len(t, pod.Spec.Containers, 1, "the namespace is not selected yet")
		}
		updateObject(ctx, t, s.f.Kube.CoreV1().Namespaces(), s.f.Namespace, func(ns *corev1.Namespace) { ns.Labels["inject"] = "sidecar" })
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			require.NoError(t, s.f.Kube.CoreV1().Pods(s.f.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
		}
		s.waitDeployment(ctx, "deployment-test")
		waitPods(ctx, t, s, "app=sidecarset", 2, func(pods []*corev1.Pod) bool {
			for _, pod := range pods {
				if len(pod.Spec.Containers) != 2 || pod.Spec.Containers[0].Image != set.Spec.Containers[0].Image {
					return false
				}
			}
			return true
		})
		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(2))
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			require.Equal(t, s.f.Image("testserver:v2"), pod.Spec.Containers[0].Image)
			c := condition(pod, wellknown.ConditionSidecarSetUpgradable)
			require.NotNil(t, c)
			require.Equal(t, corev1.ConditionTrue, c.Status)
		}
	})

	// upgradeSpecsMatch checks the pods' hash annotations against set, as
	// OpenKruise's case reads them.
	upgradeSpecsMatch := func(t *testing.T, s *scsTester, ctx context.Context, name string) {
		set := s.get(ctx, name)
		hash, withoutImage, err := sidecarcontrol.Hashes(set)
		require.NoError(t, err)
		require.Equal(t, hash, set.Annotations[wellknown.AnnotationSidecarSetHash])
		var want []string
		for _, c := range set.Spec.Containers {
			want = append(want, c.Name)
		}
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			for annotation, h := range map[string]string{wellknown.AnnotationSidecarSetHash: hash, wellknown.AnnotationSidecarSetHashWithoutImage: withoutImage} {
				spec := sidecarcontrol.PodUpgradeSpecs(pod, annotation)[name]
				require.Equal(t, name, spec.SidecarSetName, annotation)
				require.Equal(t, h, spec.Hash, annotation)
				got := slices.Clone(spec.SidecarList)
				slices.Sort(got)
				require.Equal(t, want, got, annotation)
			}
		}
	}

	t.Run("sidecarSet upgrade cold sidecar container failed image, and only update one pod", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, oneSidecar(s))
		s.createDeployment(ctx, s.baseDeployment(2))
		s.waitStatus(ctx, set.Name, all(2))
		upgradeSpecsMatch(t, s, ctx, set.Name)

		set.Spec.Containers[0].Image = s.f.Image("testserver:no-such-tag")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 1, UpdatedReadyPods: 0, ReadyPods: 1})

		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(2))
		upgradeSpecsMatch(t, s, ctx, set.Name)
	})

	t.Run("sidecarSet upgrade sidecar container (more than image field), no pod should be updated", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := oneSidecar(s)
		set.Spec.InitContainers = nil
		set = s.create(ctx, set)
		d := s.baseDeployment(1)
		s.createDeployment(ctx, d)
		s.waitStatus(ctx, set.Name, all(1))

		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		set.Spec.Containers[0].Args = []string{"serve", "--port", "8082"}
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 0, UpdatedReadyPods: 0, ReadyPods: 1})
		waitPods(ctx, t, s, "app=sidecarset", 1, func(pods []*corev1.Pod) bool {
			c := condition(pods[0], wellknown.ConditionSidecarSetUpgradable)
			return c != nil && c.Status == corev1.ConditionFalse
		})

		// A new pod gets the new sidecar; the old one is left.
		updateObject(ctx, t, s.f.Kube.AppsV1().Deployments(s.f.Namespace), d.Name, func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(2)) })
		s.waitDeployment(ctx, d.Name)
		set.Spec.Containers[0].Image = s.f.Image("testserver:latest")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 1, UpdatedReadyPods: 1, ReadyPods: 2})
	})

	t.Run("multi sidecarSet upgrade sidecar container, check pod condition", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set1 := oneSidecar(s)
		set2 := s.baseSidecarSet()
		set2.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.RollingUpdateSidecarSetStrategyType}
		set2.Spec.InitContainers = nil
		set2.Spec.Containers = set2.Spec.Containers[1:2]
		set2.Spec.Containers[0].Image = s.f.Image("testserver:latest")
		set2.Spec.Containers[0].Command = nil
		set2.Spec.Containers[0].Args = []string{"serve", "--port", "8082"}
		set1 = s.create(ctx, set1)
		set2 = s.create(ctx, set2)
		s.createDeployment(ctx, s.baseDeployment(2))

		set1.Spec.Containers[0].Args = []string{"serve", "--port", "8083"}
		s.update(ctx, set1)
		s.waitStatus(ctx, set1.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 0, UpdatedReadyPods: 0, ReadyPods: 2})

		set2.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set2)
		s.waitStatus(ctx, set2.Name, all(2))
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			c := condition(pod, wellknown.ConditionSidecarSetUpgradable)
			require.NotNil(t, c)
			require.Equal(t, corev1.ConditionFalse, c.Status, "set %s still cannot update the pod", set1.Name)
		}
		// Back to the injected spec but a new image: both can update.
		set1.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		set1.Spec.Containers[0].Args = []string{"serve", "--port", "8081"}
		s.update(ctx, set1)
		s.waitStatus(ctx, set1.Name, all(2))
		waitPods(ctx, t, s, "app=sidecarset", 2, func(pods []*corev1.Pod) bool {
			for _, pod := range pods {
				if c := condition(pod, wellknown.ConditionSidecarSetUpgradable); c == nil || c.Status != corev1.ConditionTrue {
					return false
				}
			}
			return true
		})
	})

	t.Run("sidecarSet upgrade cold sidecar container image, and paused", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := oneSidecar(s)
		// The sidecar turns ready 8 s after it starts: OpenKruise pauses 5 s
		// after the image update, while its first updated pod restarts;
		// this window makes the same moment certain here.
		set.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8081)}},
			InitialDelaySeconds: 8, PeriodSeconds: 1,
		}
		set = s.create(ctx, set)
		s.createDeployment(ctx, s.baseDeployment(2))
		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		waitObject(ctx, t, s.f.Shoal.AppsV1beta1().SidecarSets(), sidecarSetTimeout, set.Name, "one pod updated",
			func(set *v1beta1.SidecarSet) bool { return set.Status.UpdatedPods == 1 }, func(set *v1beta1.SidecarSet) any { return set.Status })
		set.Spec.UpdateStrategy.Paused = true
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 1, UpdatedReadyPods: 1, ReadyPods: 2})
		set.Spec.UpdateStrategy.Paused = false
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(2))
	})

	t.Run("sidecarSet upgrade cold sidecar container image, and selector", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, oneSidecar(s))
		s.createDeployment(ctx, s.baseDeployment(2))
		canary := s.pods(ctx, "app=sidecarset")[0]
		updateObject(ctx, t, s.f.Kube.CoreV1().Pods(s.f.Namespace), canary.Name, func(p *corev1.Pod) { p.Labels["canary.release"] = "true" })
		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		set.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary.release": "true"}}
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 1, UpdatedReadyPods: 1, ReadyPods: 2})
		for _, pod := range s.pods(ctx, "app=sidecarset") {
			want := s.f.Image("testserver:latest")
			if _, ok := pod.Labels["canary.release"]; ok {
				want = s.f.Image("testserver:v2")
			}
			require.Equal(t, want, pod.Spec.Containers[0].Image, pod.Name)
		}
		set.Spec.UpdateStrategy.Selector = nil
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(2))
	})

	t.Run("sidecarSet upgrade cold sidecar container image, and partition", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, oneSidecar(s))
		s.createDeployment(ctx, s.baseDeployment(2))
		s.waitStatus(ctx, set.Name, all(2))
		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		set.Spec.UpdateStrategy.Partition = new(intstr.FromString("50%"))
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 1, UpdatedReadyPods: 1, ReadyPods: 2})
		set.Spec.UpdateStrategy.Partition = nil
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(2))
	})

	t.Run("sidecarSet upgrade cold sidecar container image, and maxUnavailable", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, oneSidecar(s))
		s.createDeployment(ctx, s.baseDeployment(4))
		set.Spec.Containers[0].Image = s.f.Image("testserver:no-such-tag")
		set.Spec.UpdateStrategy.MaxUnavailable = new(intstr.FromString("50%"))
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 4, UpdatedPods: 2, UpdatedReadyPods: 0, ReadyPods: 2})
		set.Spec.Containers[0].Image = s.f.Image("testserver:v2")
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(4))
	})

	t.Run("sidecarSet update init sidecar container, and don't upgrade", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.create(ctx, oneSidecar(s))
		require.Equal(t, v1beta1.AfterAppContainerType, set.Spec.InitContainers[0].PodInjectPolicy)
		require.Equal(t, v1beta1.BeforeAppContainerType, set.Spec.Containers[0].PodInjectPolicy)
		s.createDeployment(ctx, s.baseDeployment(1))
		set = s.waitStatus(ctx, set.Name, all(1))
		hash1 := set.Annotations[wellknown.AnnotationSidecarSetHash]
		require.NotEmpty(t, hash1)
		set.Spec.InitContainers[0].Image = s.f.Image("testserver:no-such-tag")
		s.update(ctx, set)
		s.waitObserved(ctx, set.Name)
		require.Equal(t, hash1, s.get(ctx, set.Name).Annotations[wellknown.AnnotationSidecarSetHash], "an init container change leaves the hash")
		s.waitStatus(ctx, set.Name, all(1))
	})

	// revisionSpec decodes a revision's data and checks it carries the
	// fields OpenKruise's checker wants.
	revisionSpec := func(t *testing.T, r appsv1.ControllerRevision, keys ...string) map[string]any {
		data := map[string]any{}
		require.NoError(t, json.Unmarshal(r.Data.Raw, &data))
		spec, ok := data["spec"].(map[string]any)
		require.True(t, ok, "revision %s has a spec", r.Name)
		for _, k := range keys {
			_, ok := spec[k]
			require.True(t, ok, "revision %s spec has %s", r.Name, k)
		}
		return spec
	}

	t.Run("sidecarSet history revision checker", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		set := s.baseSidecarSet()
		set.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "secret-1"}}
		set = s.create(ctx, set)
		s.waitObserved(ctx, set.Name)
		check := func(count int, order []int64) {
			t.Helper()
			var list []appsv1.ControllerRevision
			err := framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				list = s.revisions(ctx, set.Name)
				return len(list) == count, nil
			})
			require.NoError(t, err, "%d revisions, have %d", count, len(list))
			var got []int64
			for _, r := range list {
				revisionSpec(t, r, "volumes", "containers", "initContainers", "imagePullSecrets")
				got = append(got, r.Revision)
			}
			if order != nil {
				require.Equal(t, order, got)
			}
		}
		check(1, nil)
		for i := 2; i <= 15; i++ {
			set.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: fmt.Sprintf("secret-%d", i)}}
			s.update(ctx, set)
			s.waitObserved(ctx, set.Name)
		}
		check(10, []int64{6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
		set.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "secret-12"}}
		s.update(ctx, set)
		s.waitObserved(ctx, set.Name)
		check(10, []int64{6, 7, 8, 9, 10, 11, 13, 14, 15, 16})
	})

	t.Run("sidecarSet history revision data checker", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		allowPatchPodMetadata(ctx, t, s.f, "sidecarset.kruise.io/test", map[string]string{"app": "sidecar"})
		set := s.baseSidecarSet()
		set.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "secret-1"}}
		set.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{PatchPolicy: v1beta1.SidecarSetRetainPatchPolicy,
			Annotations: map[string]string{"sidecarset.kruise.io/test": "version-1"}}}
		set = s.create(ctx, set)
		s.waitObserved(ctx, set.Name)
		set.Spec.PatchPodMetadata[0].Annotations["sidecarset.kruise.io/test"] = "version-2"
		s.update(ctx, set)
		s.waitObserved(ctx, set.Name)
		var list []appsv1.ControllerRevision
		require.NoError(t, framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			list = s.revisions(ctx, set.Name)
			return len(list) == 2, nil
		}))
		for i, want := range []string{"version-1", "version-2"} {
			spec := revisionSpec(t, list[i], "volumes", "containers", "initContainers", "imagePullSecrets", "patchPodMetadata")
			b, err := json.Marshal(spec["patchPodMetadata"])
			require.NoError(t, err)
			var patch []v1beta1.SidecarSetPatchPodMetadata
			require.NoError(t, json.Unmarshal(b, &patch))
			require.Equal(t, want, patch[0].Annotations["sidecarset.kruise.io/test"])
		}
	})

	t.Run("sidecarSet InjectionStrategy.Revision checker", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		// Six versions of the sidecar; the picked one and the last run.
		images := []string{"testserver:v-0", "testserver:v-1", "testserver:v-2", "testserver:latest", "testserver:v-4", "testserver:v2"}
		const pick = 3
		set := s.baseSidecarSet()
		set.Spec.CustomVersion = "0"
		set.Spec.UpdateStrategy.Paused = true
		set.Spec.Containers[0].Image = s.f.Image(images[0])
		set = s.create(ctx, set)
		for i := 1; i < len(images); i++ {
			set.Spec.Containers[0].Image = s.f.Image(images[i])
			set.Spec.CustomVersion = strconv.Itoa(i)
			s.update(ctx, set)
			require.NoError(t, framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
				return len(s.revisions(ctx, set.Name)) == i+1, nil
			}), "revision %d recorded", i+1)
		}
		list := s.revisions(ctx, set.Name)
		require.Len(t, list, len(images))
		set.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: new(strconv.Itoa(pick)), Policy: v1beta1.AlwaysSidecarSetInjectRevisionPolicy}
		s.update(ctx, set)
		s.waitObserved(ctx, set.Name)

		s.createDeployment(ctx, s.baseDeployment(1))
		pods := s.pods(ctx, "app=sidecarset")
		require.Len(t, pods, 1)
		require.Equal(t, s.f.Image(images[pick]), pods[0].Spec.Containers[0].Image)
		require.Equal(t, list[pick].Name, sidecarcontrol.PodUpgradeSpecs(pods[0], wellknown.AnnotationSidecarSetHash)[set.Name].ControllerRevision)

		set.Spec.UpdateStrategy.Paused = false
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, all(1))
		pods = s.pods(ctx, "app=sidecarset")
		require.Len(t, pods, 1)
		require.Equal(t, s.f.Image(images[5]), pods[0].Spec.Containers[0].Image)
		require.Equal(t, list[5].Name, sidecarcontrol.PodUpgradeSpecs(pods[0], wellknown.AnnotationSidecarSetHash)[set.Name].ControllerRevision)
	})

	t.Run("sidecarSet inject pod sidecar during canary upgrades", func(t *testing.T) {
		t.Parallel()
		s := newSCSTester(t)
		ctx := t.Context()
		stable, canary := s.f.Image("testserver:latest"), s.f.Image("testserver:v2")
		set := s.baseSidecarSet()
		set.Spec.CustomVersion = "0"
		set.Spec.Containers[0].Image = stable
		set.Spec.UpdateStrategy.Type = v1beta1.RollingUpdateSidecarSetStrategyType
		set = s.create(ctx, set)

		deploy := func(version string) *appsv1.Deployment {
			d := s.baseDeployment(1)
			d.Name += "-" + version
			d.Spec.Template.Labels["version"] = version
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = new(int64(0))
			return d
		}
		dStable, dCanary := deploy("stable"), deploy("canary")
		s.createDeployment(ctx, dStable)
		s.createDeployment(ctx, dCanary)
		count := func(version string, want int) (stableN, canaryN int) {
			pods := s.pods(ctx, "app=sidecarset,version="+version)
			require.Len(t, pods, want)
			for _, pod := range pods {
				for _, c := range pod.Spec.Containers {
					switch c.Image {
					case stable:
						stableN++
					case canary:
						canaryN++
					}
				}
			}
			return stableN, canaryN
		}
		for _, v := range []string{"stable", "canary"} {
			st, ca := count(v, 1)
			require.Equal(t, 1, st, v)
			require.Equal(t, 0, ca, v)
		}

		set.Spec.Containers[0].Image = canary
		set.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SOME_ENV", Value: "SOME_VAL"}} // no in-place update
		set.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"version": "canary"}}
		set.Spec.InjectionStrategy.Revision = &v1beta1.SidecarSetInjectRevision{CustomVersion: new("0"), Policy: v1beta1.PartialSidecarSetInjectRevisionPolicy}
		set.Spec.CustomVersion = "1"
		s.update(ctx, set)
		s.waitStatus(ctx, set.Name, v1beta1.SidecarSetStatus{MatchedPods: 2, UpdatedPods: 0, UpdatedReadyPods: 0, ReadyPods: 2})

		for _, d := range []*appsv1.Deployment{dStable, dCanary} {
			updateObject(ctx, t, s.f.Kube.AppsV1().Deployments(s.f.Namespace), d.Name, func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(2)) })
			s.waitDeployment(ctx, d.Name)
		}
		st, ca := count("stable", 2)
		require.Equal(t, 2, st, "stable pods get the stable revision")
		require.Equal(t, 0, ca)
		st, ca = count("canary", 2)
		require.Equal(t, 1, st, "the old canary pod keeps its sidecar")
		require.Equal(t, 1, ca, "the new canary pod gets the canary sidecar")
	})
}

// TestSidecarSetCanary covers OpenKruise's "inject pod sidecar with canary
// sidecarSet" (v1beta1): a SidecarSet annotated as the canary of another
// (apps.kruise.io/sidecarset-canary, -base) injects its sidecars, in place
// of the base's, into the new pods it selects; the other pods get the
// base's, and neither SidecarSet's container names conflict.
func TestSidecarSetCanary(t *testing.T) {
	t.Parallel()
	s := newSCSTester(t)
	ctx := t.Context()
	base := s.baseSidecarSet()
	base.Spec.InitContainers = nil
	base.Spec.Containers = base.Spec.Containers[:1]
	base = s.create(ctx, base)
	canary := s.baseSidecarSet()
	canary.Annotations = map[string]string{wellknown.AnnotationSidecarSetCanary: "true", wellknown.AnnotationSidecarSetBase: base.Name}
	canary.Spec.InitContainers = nil
	canary.Spec.Containers = slices.Clone(base.Spec.Containers)
	canary.Spec.Containers[0].Image = s.f.Image("testserver:v2")
	canary.Spec.Selector.MatchLabels["version"] = "canary"
	canary.Spec.UpdateStrategy = v1beta1.SidecarSetUpdateStrategy{Type: v1beta1.NotUpdateSidecarSetStrategyType}
	canary = s.create(ctx, canary)

	stable, canaryDeploy := s.baseDeployment(1), s.baseDeployment(1)
	stable.Name, canaryDeploy.Name = "stable", "canary"
	stable.Spec.Template.Labels["version"], canaryDeploy.Spec.Template.Labels["version"] = "stable", "canary"
	s.createDeployment(ctx, stable)
	s.createDeployment(ctx, canaryDeploy)
	for version, want := range map[string]struct{ image, set string }{
		"stable": {s.f.Image("testserver:latest"), base.Name},
		"canary": {s.f.Image("testserver:v2"), canary.Name},
	} {
		pods := s.pods(ctx, "app=sidecarset,version="+version)
		require.Len(t, pods, 1)
		require.Equal(t, want.image, pods[0].Spec.Containers[0].Image, "%s pod's sidecar", version)
		require.Equal(t, want.set, pods[0].Annotations[wellknown.AnnotationSidecarSetInjectedList], "%s pod's SidecarSet", version)
	}
	s.waitStatus(ctx, base.Name, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 1, ReadyPods: 1, UpdatedReadyPods: 1})
	s.waitStatus(ctx, canary.Name, v1beta1.SidecarSetStatus{MatchedPods: 1, UpdatedPods: 1, ReadyPods: 1, UpdatedReadyPods: 1})
}

// waitPods waits until n pods match selector and done accepts them.
func waitPods(ctx context.Context, t *testing.T, s *scsTester, selector string, n int, done func([]*corev1.Pod) bool) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	err := framework.WaitFor(ctx, sidecarSetTimeout, func(ctx context.Context) (bool, error) {
		list, err := s.f.Kube.CoreV1().Pods(s.f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp == nil {
				pods = append(pods, &list.Items[i])
			}
		}
		return len(pods) == n && done(pods), nil
	})
	require.NoError(t, err, "%d pods %s", n, selector)
	return pods
}

// allowPatchPodMetadata adds a rule letting SidecarSets with setLabels
// (all SidecarSets when nil) patch the pod annotation key, to the
// coordinator's kruise-configuration ConfigMap (OpenKruise's whitelist, in
// Shoal's namespace). Rules of other tests stay; the rule is removed at
// the end.
func allowPatchPodMetadata(ctx context.Context, t *testing.T, f *framework.Framework, key string, setLabels map[string]string) {
	t.Helper()
	cms := f.Kube.CoreV1().ConfigMaps(shoalNamespace)
	type rule struct {
		AnnotationKeyExprs []string              `json:"allowedAnnotationKeyExprs"`
		Selector           *metav1.LabelSelector `json:"selector,omitempty"`
	}
	type whitelist struct {
		Rules []rule `json:"rules"`
	}
	edit := func(ctx context.Context, change func(*whitelist)) error {
		return framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			cm, err := cms.Get(ctx, wellknown.ConfigMapKruiseConfiguration, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wellknown.ConfigMapKruiseConfiguration, Namespace: shoalNamespace}}
				err = nil
			}
			if err != nil {
				return false, err
			}
			var w whitelist
			if v := cm.Data[wellknown.ConfigSidecarSetPatchPodMetadataWhiteList]; v != "" {
				if err := json.Unmarshal([]byte(v), &w); err != nil {
					return false, err
				}
			}
			change(&w)
			b, _ := json.Marshal(w)
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[wellknown.ConfigSidecarSetPatchPodMetadataWhiteList] = string(b)
			if cm.ResourceVersion == "" {
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			} else {
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			}
			return err == nil, nil
		})
	}
	mine := rule{AnnotationKeyExprs: []string{key}}
	if setLabels != nil {
		mine.Selector = &metav1.LabelSelector{MatchLabels: setLabels}
	}
	require.NoError(t, edit(ctx, func(w *whitelist) { w.Rules = append(w.Rules, mine) }))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := edit(ctx, func(w *whitelist) {
			for i, r := range w.Rules {
				if slices.Equal(r.AnnotationKeyExprs, mine.AnnotationKeyExprs) && (r.Selector == nil) == (mine.Selector == nil) {
					w.Rules = slices.Delete(w.Rules, i, i+1)
					return
				}
			}
		}); err != nil {
			t.Logf("remove the patchPodMetadata rule: %v", err)
		}
	})
}

// TestSidecarSetBadInput sends the bad SidecarSets through the
// apiserver: each is refused at admission with a message naming the
// field.
func TestSidecarSetBadInput(t *testing.T) {
	t.Parallel()
	s := newSCSTester(t)
	ctx := t.Context()
	sets := s.f.Shoal.AppsV1beta1().SidecarSets()
	for _, tc := range []struct {
		name   string
		change func(*v1beta1.SidecarSet)
		want   []string
	}{
		{"selector missing", func(set *v1beta1.SidecarSet) { set.Spec.Selector = nil }, []string{"spec.selector"}},
		{"patchPodMetadata outside the allow-list", func(set *v1beta1.SidecarSet) {
			set.Spec.PatchPodMetadata = []v1beta1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"not-allowed.example.com/key": "v"}}}
		}, []string{"spec.patchPodMetadata[0].annotations", "not-allowed.example.com/key", "allow-list"}},
		{"partition with selector", func(set *v1beta1.SidecarSet) {
			set.Spec.UpdateStrategy.Partition = new(intstr.FromInt32(1))
			set.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
		}, []string{"spec.updateStrategy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := s.baseSidecarSet()
			tc.change(set)
			_, err := sets.Create(ctx, set, metav1.CreateOptions{})
			require.Error(t, err, "the apiserver refuses the SidecarSet")
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}

	t.Run("upgradeType changed", func(t *testing.T) {
		name := s.create(ctx, s.baseSidecarSet()).Name
		var err error
		// Retry while the controller's own writes conflict.
		require.NoError(t, framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			set := s.get(ctx, name)
			set.Spec.Containers[0].UpgradeStrategy = v1beta1.SidecarContainerUpgradeStrategy{
				UpgradeType: v1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: s.f.Image("pause:3.10"),
			}
			_, err = sets.Update(ctx, set, metav1.UpdateOptions{})
			return !apierrors.IsConflict(err), nil
		}))
		require.Error(t, err)
		require.ErrorContains(t, err, "spec.containers[0].upgradeStrategy.upgradeType")
		require.ErrorContains(t, err, "immutable")
	})

	// The webhook finds the other SidecarSets in its informer, which may
	// not hold one created a moment ago (OpenKruise's reads its cache the
	// same way): the second is tried until refused, and removed again
	// whenever it got in first.
	t.Run("conflicting container names", func(t *testing.T) {
		first := s.create(ctx, s.baseSidecarSet())
		second := s.baseSidecarSet()
		second.Spec.Containers[0].Name = first.Spec.Containers[0].Name
		var err error
		attempt := 0
		require.NoError(t, framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
			try := second.DeepCopy()
			try.Name = fmt.Sprintf("%s-%d", second.Name, attempt)
			attempt++
			var got *v1beta1.SidecarSet
			if got, err = sets.Create(ctx, try, metav1.CreateOptions{}); err == nil {
				return false, sets.Delete(ctx, got.Name, metav1.DeleteOptions{})
			}
			return true, nil
		}), "the second SidecarSet is refused once the webhook knows the first")
		require.ErrorContains(t, err, first.Name, "the message names the other SidecarSet")
		require.ErrorContains(t, err, first.Spec.Containers[0].Name)
	})
}
