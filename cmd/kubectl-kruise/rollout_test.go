package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
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
	return ownedRevision(t, "CloneSet", "cs-uid", number, name, image, cause)
}

// ownedRevision is a ControllerRevision of the workload of kind and uid
// (named web) holding image. A StatefulSet's revision holds the template
// as the upstream controller stores it, as a patch that replaces it.
func ownedRevision(t *testing.T, kind, uid string, number int64, name, image, cause string) *appsv1.ControllerRevision {
	t.Helper()
	tmpl, err := asMap(corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	})
	require.NoError(t, err)
	if kind == "StatefulSet" {
		tmpl["$patch"] = "replace"
	}
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
	require.NoError(t, err)
	r := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: kind, Name: "web", UID: types.UID(uid), Controller: ptr.To(true)}}},
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

// webTemplate is the pod template of the test workloads named web.
func webTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.26"}}},
	}
}

// testStatefulSet is the Advanced StatefulSet ns/web with 3 replicas and
// no update strategy set, as edit leaves it.
func testStatefulSet(edit func(*v1beta1.StatefulSet)) *v1beta1.StatefulSet {
	s := &v1beta1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "sts-uid", Generation: 3},
		Spec: v1beta1.StatefulSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate(),
		},
		Status: v1beta1.StatefulSetStatus{ObservedGeneration: 3},
	}
	if edit != nil {
		edit(s)
	}
	return s
}

// testDaemonSet is the Advanced DaemonSet ns/web with no update strategy
// set, as edit leaves it.
func testDaemonSet(edit func(*v1beta1.DaemonSet)) *v1beta1.DaemonSet {
	d := &v1beta1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "ds-uid", Generation: 3},
		Spec: v1beta1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate(),
		},
		Status: v1beta1.DaemonSetStatus{ObservedGeneration: 3},
	}
	if edit != nil {
		edit(d)
	}
	return d
}

// getStatefulSet reads ns/web from the fake cluster.
func getStatefulSet(t *testing.T, f *fakeCluster) *v1beta1.StatefulSet {
	t.Helper()
	s, err := f.shoal.AppsV1beta1().StatefulSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

// getDaemonSet reads ns/web from the fake cluster.
func getDaemonSet(t *testing.T, f *fakeCluster) *v1beta1.DaemonSet {
	t.Helper()
	d, err := f.shoal.AppsV1beta1().DaemonSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

// kindCase is what the tests of every workload kind need of one: the
// object, and how to read back its template and paused.
type kindCase struct {
	name     string // the kind as the command line and messages name it
	resource string
	obj      func() runtime.Object
	template func(*testing.T, *fakeCluster) corev1.PodTemplateSpec
	paused   func(*testing.T, *fakeCluster) bool
}

var kindCases = []kindCase{
	{"cloneset", "cloneset.apps.kruise.io",
		func() runtime.Object { return rolloutCloneSet(v1beta1.CloneSetStatus{}) },
		func(t *testing.T, f *fakeCluster) corev1.PodTemplateSpec {
			cs, err := f.shoal.AppsV1beta1().CloneSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
			require.NoError(t, err)
			return cs.Spec.Template
		},
		func(t *testing.T, f *fakeCluster) bool {
			cs, err := f.shoal.AppsV1beta1().CloneSets("ns").Get(context.Background(), "web", metav1.GetOptions{})
			require.NoError(t, err)
			return cs.Spec.UpdateStrategy.RollingUpdate.Paused
		}},
	{"statefulset", "statefulset.apps.kruise.io",
		func() runtime.Object { return testStatefulSet(nil) },
		func(t *testing.T, f *fakeCluster) corev1.PodTemplateSpec { return getStatefulSet(t, f).Spec.Template },
		func(t *testing.T, f *fakeCluster) bool {
			s := getStatefulSet(t, f)
			require.Equal(t, appsv1.RollingUpdateStatefulSetStrategyType, s.Spec.UpdateStrategy.Type, "rollingUpdate goes with type RollingUpdate")
			return s.Spec.UpdateStrategy.RollingUpdate.Paused
		}},
	{"daemonset", "daemonset.apps.kruise.io",
		func() runtime.Object { return testDaemonSet(nil) },
		func(t *testing.T, f *fakeCluster) corev1.PodTemplateSpec { return getDaemonSet(t, f).Spec.Template },
		func(t *testing.T, f *fakeCluster) bool {
			return *getDaemonSet(t, f).Spec.UpdateStrategy.RollingUpdate.Paused
		}},
}

func TestRolloutKindAliases(t *testing.T) {
	for _, tc := range []struct{ alias, resource string }{
		{"cloneset", "cloneset.apps.kruise.io"}, {"cs", "cloneset.apps.kruise.io"}, {"clonesets.apps.kruise.io", "cloneset.apps.kruise.io"},
		{"statefulset", "statefulset.apps.kruise.io"}, {"statefulsets", "statefulset.apps.kruise.io"}, {"sts", "statefulset.apps.kruise.io"},
		{"asts", "statefulset.apps.kruise.io"}, {"statefulset.apps.kruise.io", "statefulset.apps.kruise.io"},
		{"statefulsets.apps.kruise.io", "statefulset.apps.kruise.io"}, {"AdvancedStatefulSet", "statefulset.apps.kruise.io"},
		{"daemonset", "daemonset.apps.kruise.io"}, {"daemonsets", "daemonset.apps.kruise.io"}, {"ds", "daemonset.apps.kruise.io"},
		{"daemonset.apps.kruise.io", "daemonset.apps.kruise.io"}, {"daemonsets.apps.kruise.io", "daemonset.apps.kruise.io"},
		{"advanceddaemonset", "daemonset.apps.kruise.io"},
	} {
		t.Run(tc.alias, func(t *testing.T) {
			f := newFakeCluster(rolloutCloneSet(v1beta1.CloneSetStatus{}), testStatefulSet(nil), testDaemonSet(nil))
			code, stdout, stderr := f.run(t, "rollout", "pause", tc.alias+"/web")
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, tc.resource+"/web paused\n", stdout)
			code, stdout, stderr = f.run(t, "rollout", "resume", tc.alias, "web", "-o", "name")
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, tc.resource+"/web\n", stdout)
		})
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"deployment", []string{"rollout", "pause", "deployment/web"}, "use kubectl rollout for deployment"},
		{"deploy", []string{"rollout", "undo", "deploy", "web"}, "use kubectl rollout for deploy"},
		{"upstream statefulset", []string{"rollout", "restart", "statefulsets.apps/web"}, "use kubectl rollout for statefulsets.apps"},
		{"set deployment", []string{"set", "image", "deployment/web", "app=x:1"}, "use kubectl set for deployment"},
		{"unknown", []string{"rollout", "status", "job/web"}, "works on CloneSets, Advanced StatefulSets and Advanced DaemonSets (cloneset/NAME, statefulset/NAME or daemonset/NAME)"},
		{"scaledown", []string{"scaledown", "sts/web", "--pods", "web-0"}, "scaledown works on CloneSets (cloneset/NAME)"},
		{"no name", []string{"rollout", "pause", "ds/"}, "the workload's name is empty: use daemonset/NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(testStatefulSet(nil))
			code, _, stderr := f.run(t, tc.args...)
			require.Equal(t, exitUsage, code)
			require.Contains(t, stderr, tc.want)
		})
	}

	t.Run("missing", func(t *testing.T) {
		f := newFakeCluster()
		code, _, stderr := f.run(t, "rollout", "status", "sts/db")
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, `get statefulset ns/db: statefulsets.apps.kruise.io "db" not found`)
		require.Contains(t, stderr, "kubectl kruise migrate statefulset/db", "an upstream StatefulSet of that name gets a hint")
	})
}

func TestRolloutPauseResumeRestartKinds(t *testing.T) {
	for _, kc := range kindCases {
		t.Run(kc.name, func(t *testing.T) {
			f := newFakeCluster(kc.obj())
			arg := kc.name + "/web"
			code, stdout, stderr := f.run(t, "rollout", "pause", arg, "--dry-run=client")
			require.Equal(t, exitOK, code, stderr)
			require.Contains(t, stdout, kc.resource+"/web paused (dry run)\npatch: ")

			code, stdout, stderr = f.run(t, "rollout", "pause", arg)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, kc.resource+"/web paused\n", stdout)
			require.True(t, kc.paused(t, f))
			code, stdout, stderr = f.run(t, "rollout", "pause", arg)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, kc.resource+"/web already paused\n", stdout)

			code, stdout, stderr = f.run(t, "rollout", "resume", arg)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, kc.resource+"/web resumed\n", stdout)
			require.False(t, kc.paused(t, f))

			code, stdout, stderr = f.run(t, "rollout", "restart", arg, "-o", "yaml")
			require.Equal(t, exitOK, code, stderr)
			require.Contains(t, stdout, "apiVersion: apps.kruise.io/v1beta1\n")
			require.Equal(t, now.UTC().Format(time.RFC3339), kc.template(t, f).Annotations[annotationRestartedAt])
		})
	}

	t.Run("statefulset OnDelete", func(t *testing.T) {
		f := newFakeCluster(testStatefulSet(func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
		}))
		code, _, stderr := f.run(t, "rollout", "pause", "sts/web")
		require.Equal(t, exitError, code)
		require.Contains(t, stderr, `statefulset "web" updates OnDelete`)
		require.Nil(t, getStatefulSet(t, f).Spec.UpdateStrategy.RollingUpdate, "nothing was patched")
	})
}

func TestRolloutStatusKinds(t *testing.T) {
	sts := func(replicas int32, partition *int32, st v1beta1.StatefulSetStatus) runtime.Object {
		return testStatefulSet(func(s *v1beta1.StatefulSet) {
			s.Spec.Replicas = ptr.To(replicas)
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Partition: partition}
			s.Status = st
		})
	}
	ds := func(partition *intstr.IntOrString, paused bool, st v1beta1.DaemonSetStatus) runtime.Object {
		return testDaemonSet(func(d *v1beta1.DaemonSet) {
			d.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateDaemonSet{Partition: partition, Paused: ptr.To(paused)}
			d.Status = st
		})
	}
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		arg  string
		want string
		code int
	}{
		{"sts rolled out", sts(3, nil, v1beta1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, UpdateRevision: "web-2"}),
			"sts/web", "statefulset \"web\" successfully rolled out\n", exitOK},
		{"sts not observed", sts(3, nil, v1beta1.StatefulSetStatus{ObservedGeneration: 2}),
			"sts/web", "Waiting for the StatefulSet's spec update to be observed...\n", exitOK},
		{"sts updating", sts(3, nil, v1beta1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3}),
			"sts/web", "Waiting for statefulset \"web\" rollout to finish: 1 out of 3 new replicas have been updated...\n", exitOK},
		{"sts pending termination", sts(2, nil, v1beta1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 3, AvailableReplicas: 3}),
			"sts/web", "Waiting for statefulset \"web\" rollout to finish: 1 old replicas are pending termination...\n", exitOK},
		{"sts not ready", sts(3, nil, v1beta1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2}),
			"sts/web", "Waiting for statefulset \"web\" rollout to finish: 2 of 3 replicas are ready...\n", exitOK},
		{"sts not available", sts(3, nil, v1beta1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 1}),
			"sts/web", "Waiting for statefulset \"web\" rollout to finish: 1 of 3 replicas are available...\n", exitOK},
		{"sts partition", sts(3, ptr.To[int32](2), v1beta1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3, UpdateRevision: "web-2"}),
			"sts/web", "statefulset \"web\" partition rolled out: 1 of 3 replicas at revision web-2, 2 kept at the old one by the partition\n", exitOK},
		{"sts paused", testStatefulSet(func(s *v1beta1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = &v1beta1.RollingUpdateStatefulSetStrategy{Paused: true}
			s.Status = v1beta1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1}
		}), "sts/web", "statefulset \"web\" is paused at 1 of 3 updated replicas; resume it with 'kubectl kruise rollout resume statefulset/web'\n", exitOK},
		{"sts OnDelete", testStatefulSet(func(s *v1beta1.StatefulSet) { s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType }),
			"sts/web", "", exitError},
		{"ds rolled out", ds(nil, false, v1beta1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4, NumberAvailable: 4}),
			"ds/web", "daemonset \"web\" successfully rolled out\n", exitOK},
		{"ds updating", ds(nil, false, v1beta1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 4, UpdatedNumberScheduled: 1, NumberAvailable: 4}),
			"ds/web", "Waiting for daemonset \"web\" rollout to finish: 1 out of 4 new pods have been updated...\n", exitOK},
		{"ds not available", ds(nil, false, v1beta1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4, NumberAvailable: 3}),
			"ds/web", "Waiting for daemonset \"web\" rollout to finish: 3 of 4 pods are available...\n", exitOK},
		{"ds partition", ds(ptr.To(intstr.FromString("50%")), false, v1beta1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberAvailable: 3, UpdateRevision: "web-7"}),
			"ds/web", "daemonset \"web\" partition rolled out: 1 of 3 pods at revision web-7, 2 kept at the old one by the partition\n", exitOK},
		{"ds paused", ds(nil, true, v1beta1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 4, UpdatedNumberScheduled: 2, NumberAvailable: 4}),
			"ds/web", "daemonset \"web\" is paused at 2 of 4 updated pods; resume it with 'kubectl kruise rollout resume daemonset/web'\n", exitOK},
		{"ds OnDelete", testDaemonSet(func(d *v1beta1.DaemonSet) { d.Spec.UpdateStrategy.Type = v1beta1.OnDeleteDaemonSetStrategyType }),
			"ds/web", "", exitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(tc.obj)
			code, stdout, stderr := f.run(t, "rollout", "status", tc.arg, "--watch=false")
			require.Equal(t, tc.code, code, stderr)
			require.Equal(t, tc.want, stdout)
			if tc.code == exitError {
				require.Contains(t, stderr, "updates OnDelete")
			}
		})
	}

	t.Run("waits", func(t *testing.T) {
		f := newFakeCluster(testDaemonSet(func(d *v1beta1.DaemonSet) {
			d.Status = v1beta1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}
		}))
		// The second read finds the update done.
		reads := 0
		f.shoal.PrependReactor("get", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
			reads++
			if reads < 2 {
				return false, nil, nil
			}
			return true, testDaemonSet(func(d *v1beta1.DaemonSet) {
				d.Status = v1beta1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}
			}), nil
		})
		code, stdout, stderr := f.run(t, "rollout", "status", "daemonset/web", "--timeout", "5s")
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, "Waiting for daemonset \"web\" rollout to finish: 1 out of 2 new pods have been updated...\n"+
			"daemonset \"web\" successfully rolled out\n", stdout)
	})
}

func TestRolloutHistoryAndUndoKinds(t *testing.T) {
	for _, tc := range []struct {
		kc      kindCase
		kind    string
		uid     string
		status  func(runtime.Object)
		history string
	}{
		{kindCases[1], "StatefulSet", "sts-uid",
			func(o runtime.Object) {
				o.(*v1beta1.StatefulSet).Status = v1beta1.StatefulSetStatus{UpdateRevision: "web-3", CurrentRevision: "web-2", UpdatedReplicas: 1}
			}, "" +
				"statefulset.apps.kruise.io/web\n" +
				"REVISION   NAME    PODS         CHANGE-CAUSE\n" +
				"1          web-1   -            first\n" +
				"2          web-2   current      <none>\n" +
				"3          web-3   1 (update)   <none>\n"},
		{kindCases[2], "DaemonSet", "ds-uid",
			func(o runtime.Object) {
				o.(*v1beta1.DaemonSet).Status = v1beta1.DaemonSetStatus{UpdateRevision: "web-3", UpdatedNumberScheduled: 4}
			}, "" +
				"daemonset.apps.kruise.io/web\n" +
				"REVISION   NAME    PODS         CHANGE-CAUSE\n" +
				"1          web-1   -            first\n" +
				"2          web-2   -            <none>\n" +
				"3          web-3   4 (update)   <none>\n"},
	} {
		t.Run(tc.kc.name, func(t *testing.T) {
			obj := tc.kc.obj()
			tc.status(obj)
			f := newFakeCluster(obj)
			for _, r := range []*appsv1.ControllerRevision{
				ownedRevision(t, tc.kind, tc.uid, 1, "web-1", "nginx:1.24", "first"),
				ownedRevision(t, tc.kind, tc.uid, 2, "web-2", "nginx:1.25", ""),
				ownedRevision(t, tc.kind, tc.uid, 3, "web-3", "nginx:1.26", ""),
				ownedRevision(t, "CloneSet", "cs-uid", 4, "other-4", "nginx:9", "not this workload's"),
			} {
				_, err := f.kube.AppsV1().ControllerRevisions("ns").Create(context.Background(), r, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			arg := tc.kc.name + "/web"
			code, stdout, stderr := f.run(t, "rollout", "history", arg)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, tc.history, stdout)

			code, stdout, stderr = f.run(t, "rollout", "history", arg, "--revision", "1")
			require.Equal(t, exitOK, code, stderr)
			require.Contains(t, stdout, tc.kc.resource+"/web with revision #1 (web-1)")
			require.Contains(t, stdout, "image: nginx:1.24")
			require.NotContains(t, stdout, "$patch")

			code, stdout, stderr = f.run(t, "rollout", "undo", arg)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, tc.kc.resource+"/web rolled back to revision 2\n", stdout, "revision 3 is the current template")
			require.Equal(t, "nginx:1.25", tc.kc.template(t, f).Spec.Containers[0].Image)

			code, stdout, stderr = f.run(t, "rollout", "undo", arg, "--to-revision", "1", "--dry-run=server")
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, tc.kc.resource+"/web rolled back to revision 1 (server dry run)\n", stdout)

			code, _, stderr = f.run(t, "rollout", "undo", arg, "--to-revision", "4")
			require.Equal(t, exitError, code)
			require.Contains(t, stderr, tc.kc.name+` "web" has no revision 4`)
		})
	}
}

func TestSetImageKinds(t *testing.T) {
	for _, kc := range kindCases {
		t.Run(kc.name, func(t *testing.T) {
			f := newFakeCluster(kc.obj())
			arg := kc.name + "/web"
			code, stdout, stderr := f.run(t, "set", "image", arg, "app=nginx:1.27")
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, kc.resource+"/web image updated\n", stdout)
			require.Equal(t, "nginx:1.27", kc.template(t, f).Spec.Containers[0].Image)

			code, _, stderr = f.run(t, "set", "image", arg, "nope=x:1")
			require.Equal(t, exitError, code)
			require.Contains(t, stderr, kc.name+` "web" has no container "nope" (it has app)`)

			code, _, stderr = f.run(t, "set", "env", arg, "LOG=debug")
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, []corev1.EnvVar{{Name: "LOG", Value: "debug"}}, kc.template(t, f).Spec.Containers[0].Env)
		})
	}
}
