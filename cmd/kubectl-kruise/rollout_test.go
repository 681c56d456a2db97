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
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

func rolloutCloneSet(st v1beta1.CloneSetStatus) *v1beta1.CloneSet {
	return &v1beta1.CloneSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "cs-uid", Generation: 3},
		Spec: v1beta1.CloneSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.26"}}},
			},
			UpdateStrategy: v1beta1.CloneSetUpdateStrategy{Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
				RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{}},
		},
		Status: st,
	}
}

// revisionOf is a ControllerRevision of the CloneSet holding image.
func revisionOf(t *testing.T, number int64, name, image, cause string) *appsv1.ControllerRevision {
	t.Helper()
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
	require.NoError(t, err)
	r := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "CloneSet", Name: "web", UID: "cs-uid", Controller: ptr.To(true)}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: number,
	}
	if cause != "" {
		r.Annotations = map[string]string{"kubernetes.io/change-cause": cause}
	}
	return r
}

func TestRolloutStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   v1beta1.CloneSetStatus
		want string
		code int
	}{
		{"rolled out", v1beta1.CloneSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, UpdatedAvailableReplicas: 3, ExpectedUpdatedReplicas: 3},
			"cloneset \"web\" successfully rolled out\n", exitOK},
		{"partition", v1beta1.CloneSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, UpdatedAvailableReplicas: 1, ExpectedUpdatedReplicas: 1, UpdateRevision: "web-2"},
			"cloneset \"web\" partition rolled out: 1 of 3 replicas at revision web-2, 2 kept at the old one by the partition\n", exitOK},
		{"deadline", v1beta1.CloneSetStatus{ObservedGeneration: 3, Replicas: 3, ExpectedUpdatedReplicas: 3, Conditions: []v1beta1.CloneSetCondition{{
			Type: v1beta1.CloneSetConditionTypeProgressing, Status: corev1.ConditionFalse, Reason: string(v1beta1.CloneSetProgressDeadlineExceeded),
			Message: "CloneSet revision web-2 has timed out progressing"}}},
			"cloneset \"web\" exceeded its progress deadline: CloneSet revision web-2 has timed out progressing\n", exitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(rolloutCloneSet(tc.st))
			code, stdout, stderr := f.run(t, "rollout", "status", "cloneset/web")
			require.Equal(t, tc.code, code, stderr)
			require.Equal(t, tc.want, stdout)
		})
	}

	t.Run("no wait", func(t *testing.T) {
		f := newFakeCluster(rolloutCloneSet(v1beta1.CloneSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, ExpectedUpdatedReplicas: 3}))
		code, stdout, _ := f.run(t, "rollout", "status", "cloneset", "web", "--watch=false")
		require.Equal(t, exitOK, code)
		require.Equal(t, "Waiting for cloneset \"web\" rollout to finish: 1 out of 3 new replicas have been updated...\n", stdout)
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFakeCluster(rolloutCloneSet(v1beta1.CloneSetStatus{ObservedGeneration: 2}))
		code, stdout, stderr := f.run(t, "rollout", "status", "cloneset/web", "--timeout", "20ms")
		require.Equal(t, exitError, code)
		require.Equal(t, "Waiting for the CloneSet's spec update to be observed...\n", stdout)
		require.Contains(t, stderr, "timed out waiting for cloneset \"web\"")
	})
	t.Run("other kinds", func(t *testing.T) {
		f := newFakeCluster()
		code, _, stderr := f.run(t, "rollout", "status", "deployment/web")
		require.Equal(t, exitUsage, code)
		require.Contains(t, stderr, "use kubectl rollout for deployment")
	})
}

func TestRolloutPauseResumeRestart(t *testing.T) {
	f := newFakeCluster(rolloutCloneSet(v1beta1.CloneSetStatus{}))
	get := func() *v1beta1.CloneSet {
		cs, err := f.shoal.AppsV1beta1().CloneSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		return cs
	}
	code, stdout, stderr := f.run(t, "rollout", "pause", "cloneset/web", "--dry-run=client")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "cloneset.apps.kruise.io/web paused (dry run)")
	require.False(t, get().Spec.UpdateStrategy.RollingUpdate.Paused, "a client dry run changes nothing")

	code, stdout, stderr = f.run(t, "rollout", "pause", "cloneset/web")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "cloneset.apps.kruise.io/web paused\n", stdout)
	require.True(t, get().Spec.UpdateStrategy.RollingUpdate.Paused)
	code, stdout, _ = f.run(t, "rollout", "pause", "cloneset/web")
	require.Equal(t, exitOK, code)
	require.Equal(t, "cloneset.apps.kruise.io/web already paused\n", stdout)

	code, stdout, stderr = f.run(t, "rollout", "resume", "cloneset/web", "-o", "name")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "cloneset.apps.kruise.io/web\n", stdout)
	require.False(t, get().Spec.UpdateStrategy.RollingUpdate.Paused)

	code, stdout, stderr = f.run(t, "rollout", "restart", "cloneset/web", "-o", "json")
	require.Equal(t, exitOK, code, stderr)
	var printed v1beta1.CloneSet
	require.NoError(t, json.Unmarshal([]byte(stdout), &printed))
	require.Equal(t, "CloneSet", printed.Kind)
	require.Equal(t, now.UTC().Format("2006-01-02T15:04:05Z"), get().Spec.Template.Annotations[annotationRestartedAt])

	code, _, stderr = f.run(t, "rollout", "restart", "cloneset/web", "--dry-run=maybe")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, `--dry-run "maybe": use none, client or server`)
}

func TestRolloutHistoryAndUndo(t *testing.T) {
	cs := rolloutCloneSet(v1beta1.CloneSetStatus{UpdateRevision: "web-3", CurrentRevision: "web-2", UpdatedReplicas: 1})
	cs.Spec.Template.Labels["extra"] = "yes" // only the current template has it
	f := newFakeCluster(cs)
	for _, r := range []*appsv1.ControllerRevision{
		revisionOf(t, 1, "web-1", "nginx:1.24", "first"),
		revisionOf(t, 2, "web-2", "nginx:1.25", ""),
		revisionOf(t, 3, "web-3", "nginx:1.26", "bump to 1.26"),
	} {
		_, err := f.kube.AppsV1().ControllerRevisions("ns").Create(context.Background(), r, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	code, stdout, stderr := f.run(t, "rollout", "history", "cloneset/web")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, ""+
		"cloneset.apps.kruise.io/web\n"+
		"REVISION   NAME    PODS         CHANGE-CAUSE\n"+
		"1          web-1   -            first\n"+
		"2          web-2   current      <none>\n"+
		"3          web-3   1 (update)   bump to 1.26\n", stdout)

	code, stdout, stderr = f.run(t, "rollout", "history", "cloneset/web", "--revision", "1")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "cloneset.apps.kruise.io/web with revision #1 (web-1)")
	require.Contains(t, stdout, "image: nginx:1.24")
	code, _, stderr = f.run(t, "rollout", "history", "cloneset/web", "--revision", "9")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, "has no revision 9")

	code, stdout, stderr = f.run(t, "rollout", "undo", "cloneset/web")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "cloneset.apps.kruise.io/web rolled back to revision 3\n", stdout)
	got, err := f.shoal.AppsV1beta1().CloneSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "nginx:1.26", got.Spec.Template.Spec.Containers[0].Image)
	require.NotContains(t, got.Spec.Template.Labels, "extra", "keys only the current template had are gone")

	code, _, stderr = f.run(t, "rollout", "undo", "cloneset/web", "--to-revision", "1")
	require.Equal(t, exitOK, code, stderr)
	got, err = f.shoal.AppsV1beta1().CloneSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "nginx:1.24", got.Spec.Template.Spec.Containers[0].Image)
}

func TestSetImageEnvAndScaleDown(t *testing.T) {
	cs := rolloutCloneSet(v1beta1.CloneSetStatus{})
	cs.Spec.Template.Spec.Containers = append(cs.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox:1"})
	f := newFakeCluster(cs)
	get := func() *v1beta1.CloneSet {
		got, err := f.shoal.AppsV1beta1().CloneSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		return got
	}
	code, stdout, stderr := f.run(t, "set", "image", "cloneset/web", "app=nginx:1.27")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "cloneset.apps.kruise.io/web image updated\n", stdout)
	require.Equal(t, "nginx:1.27", get().Spec.Template.Spec.Containers[0].Image)
	require.Equal(t, "busybox:1", get().Spec.Template.Spec.Containers[1].Image, "other containers keep theirs")
	code, _, stderr = f.run(t, "set", "image", "cloneset/web", "nope=x:1")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, `has no container "nope" (it has app, sidecar)`)
	code, _, stderr = f.run(t, "set", "image", "cloneset/web", "app")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "use CONTAINER=IMAGE")

	code, _, stderr = f.run(t, "set", "env", "cloneset/web", "-c", "app", "LOG=debug", "MODE=a")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, []corev1.EnvVar{{Name: "LOG", Value: "debug"}, {Name: "MODE", Value: "a"}}, get().Spec.Template.Spec.Containers[0].Env)
	require.Empty(t, get().Spec.Template.Spec.Containers[1].Env)
	code, _, stderr = f.run(t, "set", "env", "cloneset/web", "-c", "app", "LOG-", "MODE=b")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, []corev1.EnvVar{{Name: "MODE", Value: "b"}}, get().Spec.Template.Spec.Containers[0].Env)

	for _, name := range []string{"web-a", "web-b"} {
		_, err := f.kube.CoreV1().Pods("ns").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "CloneSet", Name: "web", UID: "cs-uid", Controller: ptr.To(true)}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := f.kube.CoreV1().Pods("ns").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stranger"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	code, _, stderr = f.run(t, "scaledown", "cloneset/web", "--pods", "stranger")
	require.Equal(t, exitError, code)
	require.Contains(t, stderr, `pod "stranger" is not a pod of cloneset "web"`)
	code, stdout, stderr = f.run(t, "scaledown", "cloneset/web", "--pods", "web-a,web-b")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "cloneset.apps.kruise.io/web scaled down to 1 replicas\n", stdout)
	require.EqualValues(t, 1, *get().Spec.Replicas)
	require.Equal(t, []string{"web-a", "web-b"}, get().Spec.ScaleStrategy.PodsToDelete)
	code, _, stderr = f.run(t, "scaledown", "cloneset/web")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--pods: name at least one pod")
}
