package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	require.Contains(t, stderr, "only a deployment moves to a CloneSet")
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

// upstreamStatefulSet is the apps/v1 StatefulSet ns/web with 3 pods, as
// edit leaves it.
func upstreamStatefulSet(edit func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "upstream-sts-uid", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "owner": "ops"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](3),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template:    webTemplate(),
			ServiceName: "web-headless",
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1), MaxUnavailable: ptr.To(intstr.FromString("50%"))}},
			RevisionHistoryLimit: ptr.To[int32](5),
			MinReadySeconds:      10,
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
			Ordinals: &appsv1.StatefulSetOrdinals{Start: 1},
		},
		Status: appsv1.StatefulSetStatus{Replicas: 3},
	}
	if edit != nil {
		edit(s)
	}
	return s
}

// upstreamDaemonSet is the apps/v1 DaemonSet ns/web on 4 nodes.
func upstreamDaemonSet() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "upstream-ds-uid", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"deprecated.daemonset.template.generation": "4", "owner": "ops"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate(),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("25%"))}},
			MinReadySeconds:      5,
			RevisionHistoryLimit: ptr.To[int32](4),
		},
		Status: appsv1.DaemonSetStatus{CurrentNumberScheduled: 4},
	}
}

// deletesOf are the options of the deletes of resource the fake saw.
func deletesOf(f *fakeCluster, resource string) []metav1.DeleteOptions {
	var out []metav1.DeleteOptions
	for _, a := range f.kube.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok && a.GetResource().Resource == resource {
			out = append(out, d.GetDeleteOptions())
		}
	}
	return out
}

func TestMigrateInPlace(t *testing.T) {
	for _, tc := range []struct {
		name, arg, resource string
		upstream            runtime.Object
		uid                 string
		want                string
		check               func(*testing.T, *fakeCluster)
		gone                func(*fakeCluster) error
	}{
		{"statefulset", "statefulset/web", "statefulsets", upstreamStatefulSet(nil), "upstream-sts-uid", "" +
			"statefulset.apps.kruise.io/web created from statefulset.apps/web\n" +
			"statefulset.apps/web deleted with propagationPolicy Orphan: its 3 pods keep running, for statefulset.apps.kruise.io/web to adopt\n",
			func(t *testing.T, f *fakeCluster) {
				s := getStatefulSet(t, f)
				require.Equal(t, map[string]string{"team": "a"}, s.Labels)
				require.Equal(t, map[string]string{"owner": "ops"}, s.Annotations, "kubectl's last-applied configuration stays behind")
				require.EqualValues(t, 3, *s.Spec.Replicas)
				require.Equal(t, map[string]string{"app": "web"}, s.Spec.Selector.MatchLabels)
				require.Equal(t, "nginx:1.26", s.Spec.Template.Spec.Containers[0].Image)
				require.Equal(t, "web-headless", s.Spec.ServiceName)
				require.Equal(t, "data", s.Spec.VolumeClaimTemplates[0].Name)
				require.Equal(t, appsv1.ParallelPodManagement, s.Spec.PodManagementPolicy)
				require.EqualValues(t, 5, *s.Spec.RevisionHistoryLimit)
				require.Equal(t, &v1beta1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenDeleted: v1beta1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: v1beta1.RetainPersistentVolumeClaimRetentionPolicyType},
					s.Spec.PersistentVolumeClaimRetentionPolicy)
				require.Equal(t, &v1beta1.StatefulSetOrdinals{Start: 1}, s.Spec.Ordinals)
				require.Equal(t, v1beta1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
					RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1), MaxUnavailable: ptr.To(intstr.FromString("50%")),
						PodUpdatePolicy: v1beta1.RecreatePodUpdateStrategyType, MinReadySeconds: ptr.To[int32](10)}}, s.Spec.UpdateStrategy)
			},
			func(f *fakeCluster) error {
				_, err := f.kube.AppsV1().StatefulSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
				return err
			}},
		{"daemonset", "ds/web", "daemonsets", upstreamDaemonSet(), "upstream-ds-uid", "" +
			"daemonset.apps.kruise.io/web created from daemonset.apps/web\n" +
			"daemonset.apps/web deleted with propagationPolicy Orphan: its 4 pods keep running, for daemonset.apps.kruise.io/web to adopt\n",
			func(t *testing.T, f *fakeCluster) {
				d := getDaemonSet(t, f)
				require.Equal(t, map[string]string{"team": "a"}, d.Labels)
				require.Equal(t, map[string]string{"owner": "ops"}, d.Annotations, "the DaemonSet controller's annotation stays behind")
				require.Equal(t, map[string]string{"app": "web"}, d.Spec.Selector.MatchLabels)
				require.Equal(t, "nginx:1.26", d.Spec.Template.Spec.Containers[0].Image)
				require.EqualValues(t, 5, d.Spec.MinReadySeconds)
				require.EqualValues(t, 4, *d.Spec.RevisionHistoryLimit)
				require.Equal(t, v1beta1.DaemonSetUpdateStrategy{Type: v1beta1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &v1beta1.RollingUpdateDaemonSet{Type: v1beta1.StandardRollingUpdateType,
						MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("25%"))}}, d.Spec.UpdateStrategy)
			},
			func(f *fakeCluster) error {
				_, err := f.kube.AppsV1().DaemonSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster()
			require.NoError(t, f.kube.Tracker().Add(tc.upstream))

			code, stdout, stderr := f.run(t, "migrate", tc.arg, "--dry-run=client")
			require.Equal(t, exitOK, code, stderr)
			require.Contains(t, stdout, strings.ReplaceAll(tc.want, "\n", " (dry run)\n"))
			require.Contains(t, stdout, "    apiVersion: apps.kruise.io/v1beta1\n")
			require.NotContains(t, stdout, "\n    status:", "the manifest has no status")
			require.NoError(t, tc.gone(f), "a client dry run deletes nothing")
			require.Empty(t, f.shoal.Actions(), "a client dry run creates nothing")

			code, stdout, stderr = f.run(t, "migrate", tc.arg, "--dry-run=server")
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, strings.ReplaceAll(tc.want, "\n", " (server dry run)\n"), stdout)
			require.Equal(t, []string{metav1.DryRunAll}, deletesOf(f, tc.resource)[0].DryRun)
			create := f.shoal.Actions()[0].(clienttesting.CreateActionImpl)
			require.Equal(t, []string{metav1.DryRunAll}, create.GetCreateOptions().DryRun)

			// The fake stores dry runs: start again, with dry-run creates
			// (the check before the upstream object goes) not stored.
			f = newFakeCluster()
			honourDryRunCreates(f)
			require.NoError(t, f.kube.Tracker().Add(tc.upstream))
			code, stdout, stderr = f.run(t, "migrate", tc.arg)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, tc.want, stdout)
			tc.check(t, f)
			require.True(t, apierrors.IsNotFound(tc.gone(f)), "the upstream object is gone")
			deletes := deletesOf(f, tc.resource)
			require.Len(t, deletes, 1)
			require.Equal(t, ptr.To(metav1.DeletePropagationOrphan), deletes[0].PropagationPolicy, "its pods stay")
			require.Equal(t, types.UID(tc.uid), *deletes[0].Preconditions.UID, "only the object read is deleted")
			require.Empty(t, deletes[0].DryRun)
		})
	}
}

// honourDryRunCreates makes f's Shoal clientset answer a dry-run create
// without storing the object, as the apiserver does.
func honourDryRunCreates(f *fakeCluster) {
	f.shoal.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		c, ok := a.(clienttesting.CreateActionImpl)
		if !ok || len(c.GetCreateOptions().DryRun) == 0 {
			return false, nil, nil
		}
		return true, c.GetObject(), nil
	})
}

func TestMigrateInPlaceErrors(t *testing.T) {
	t.Run("already migrated", func(t *testing.T) {
		f := newFakeCluster(testStatefulSet(nil))
		require.NoError(t, f.kube.Tracker().Add(upstreamStatefulSet(nil)))
		code, _, stderr := f.run(t, "migrate", "sts", "web")
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, "create statefulset.apps.kruise.io ns/web (checked with a dry run; statefulset.apps/web is left as it was)")
		_, err := f.kube.AppsV1().StatefulSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, deletesOf(f, "statefulsets"))
	})
	t.Run("missing", func(t *testing.T) {
		f := newFakeCluster()
		code, _, stderr := f.run(t, "migrate", "daemonset/agent", "-n", "kube-system")
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, `get daemonset.apps kube-system/agent: daemonsets.apps "agent" not found`)
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no name", []string{"migrate", "statefulset"}, "name the StatefulSet to migrate: kubectl kruise migrate statefulset/NAME"},
		{"cloneset flags", []string{"migrate", "sts/web", "--create"}, "--create: only for 'migrate cloneset --from deployment'"},
		{"dst-name", []string{"migrate", "ds/web", "--dst-name", "other"}, "--dst-name: only for 'migrate cloneset --from deployment'; migrate daemonset/web moves every pod at once, keeping the name"},
		{"dry-run value", []string{"migrate", "ds/web", "--dry-run", "maybe"}, `--dry-run "maybe": use none, client or server`},
		{"dry-run for deployments", []string{"migrate", "cloneset", "--src-name", "web", "--dry-run=client"}, "--dry-run: only for migrate statefulset/NAME and daemonset/NAME"},
		{"other kind", []string{"migrate", "job/web"}, "or a StatefulSet or DaemonSet to the Advanced kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster()
			code, _, stderr := f.run(t, tc.args...)
			require.Equal(t, exitUsage, code)
			require.Contains(t, stderr, tc.want)
		})
	}
}

func TestStatefulSetFromUpstream(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*appsv1.StatefulSet)
		want    v1beta1.StatefulSetUpdateStrategy
		wantErr string
	}{
		{"OrderedReady drops maxUnavailable", func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement },
			v1beta1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{
				Partition: ptr.To[int32](1), PodUpdatePolicy: v1beta1.RecreatePodUpdateStrategyType, MinReadySeconds: ptr.To[int32](10)}}, ""},
		{"OrderedReady keeps maxUnavailable 1", func(s *appsv1.StatefulSet) {
			s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
			s.Spec.MinReadySeconds = 0
		}, v1beta1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{
			Partition: ptr.To[int32](1), MaxUnavailable: ptr.To(intstr.FromInt32(1)), PodUpdatePolicy: v1beta1.RecreatePodUpdateStrategyType}}, ""},
		{"type unset", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{}
			s.Spec.MinReadySeconds = 0
		},
			v1beta1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &v1beta1.RollingUpdateStatefulSetStrategy{
				PodUpdatePolicy: v1beta1.RecreatePodUpdateStrategyType}}, ""},
		{"OnDelete", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			s.Spec.MinReadySeconds = 0
		}, v1beta1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}, ""},
		{"OnDelete with minReadySeconds", func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		}, v1beta1.StatefulSetUpdateStrategy{}, "statefulset.apps ns/web: minReadySeconds 10 cannot be carried over"},
		{"minReadySeconds too long", func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 301 },
			v1beta1.StatefulSetUpdateStrategy{}, "statefulset.apps ns/web: minReadySeconds 301 is above the Advanced StatefulSet's maximum, 300"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, pods, err := statefulSetFromUpstream(upstreamStatefulSet(tc.edit))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, 3, pods)
			require.Equal(t, tc.want, got.Spec.UpdateStrategy)
		})
	}
}
