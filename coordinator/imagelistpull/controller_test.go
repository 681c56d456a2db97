package imagelistpull

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/statuswriter"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// syncWriter runs each write at once, as a Writer would later.
type syncWriter struct {
	t      *testing.T
	writes int
}

func (w *syncWriter) Enqueue(_ string, write statuswriter.WriteFunc) {
	w.writes++
	require.NoError(w.t, write(context.Background()))
}

func (w *syncWriter) EnqueueFinal(key string, write statuswriter.WriteFunc) { w.Enqueue(key, write) }

// harness is a controller over a fake clientset whose informers are never
// started: refresh copies the API's objects into their caches, and the
// test calls sync itself, so nothing waits.
type harness struct {
	c        *Controller
	shoal    *shoalfake.Clientset
	clock    *clocktesting.FakeClock
	recorder *events.FakeRecorder
	writer   *syncWriter
	leader   bool
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{shoal: shoalfake.NewSimpleClientset(), clock: clocktesting.NewFakeClock(t0),
		recorder: events.NewFakeRecorder(100), writer: &syncWriter{t: t}, leader: true}
	// Like the apiserver, an update of the status subresource changes the
	// status only (the fake would replace the whole object).
	h.shoal.PrependReactor("update", "imagelistpulljobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(clienttesting.UpdateAction)
		if !ok || u.GetSubresource() != "status" {
			return false, nil, nil
		}
		in := u.GetObject().(*v1alpha1.ImageListPullJob)
		cur, err := h.shoal.Tracker().Get(a.GetResource(), a.GetNamespace(), in.Name)
		if err != nil {
			return true, nil, err
		}
		out := cur.(*v1alpha1.ImageListPullJob).DeepCopy()
		out.Status = in.Status
		return true, out, h.shoal.Tracker().Update(a.GetResource(), out, a.GetNamespace())
	})
	for _, o := range objs {
		require.NoError(t, h.shoal.Tracker().Add(o))
	}
	f := shoalinformers.NewSharedInformerFactory(h.shoal, 0)
	c, err := New(Options{
		Shoal: h.shoal, Lists: f.Apps().V1alpha1().ImageListPullJobs().Informer(), Jobs: f.Apps().V1alpha1().ImagePullJobs().Informer(),
		Writer: h.writer, IsLeader: func() bool { return h.leader }, Recorder: h.recorder,
		Registerer: prometheus.NewRegistry(), Clock: h.clock,
	})
	require.NoError(t, err)
	h.c = c
	h.refresh(t)
	return h
}

// refresh makes the caches show what the API has, as the informers would.
func (h *harness) refresh(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	lists, err := h.shoal.AppsV1alpha1().ImageListPullJobs("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	jobs, err := h.shoal.AppsV1alpha1().ImagePullJobs("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var l, j []any
	for i := range lists.Items {
		l = append(l, &lists.Items[i])
	}
	for i := range jobs.Items {
		j = append(j, &jobs.Items[i])
	}
	require.NoError(t, h.c.lists.Replace(l, ""))
	require.NoError(t, h.c.jobs.Replace(j, ""))
	h.shoal.ClearActions()
}

// sync syncs ns/name and returns the requeue delay.
func (h *harness) sync(t *testing.T, name string) time.Duration {
	t.Helper()
	after, err := h.c.sync(context.Background(), "ns/"+name)
	require.NoError(t, err)
	return after
}

func (h *harness) list(t *testing.T, name string) *v1alpha1.ImageListPullJob {
	t.Helper()
	j, err := h.shoal.AppsV1alpha1().ImageListPullJobs("ns").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return j
}

func (h *harness) child(t *testing.T, parent, image string) *v1alpha1.ImagePullJob {
	t.Helper()
	j, err := h.shoal.AppsV1alpha1().ImagePullJobs("ns").Get(context.Background(), ChildName(parent, image), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return j
}

// setChildStatus sets a child's status in the API, as the ImagePullJob
// controller would.
func (h *harness) setChildStatus(t *testing.T, parent, image string, st v1alpha1.ImagePullJobStatus) {
	t.Helper()
	c := h.child(t, parent, image)
	require.NotNil(t, c, "child of %s for %s", parent, image)
	c.UID = types.UID("uid-" + c.Name)
	c.Status = st
	require.NoError(t, h.shoal.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("imagepulljobs"), c, "ns"))
}

// verbs lists the writes the controller made, as "verb resource[/sub] name".
func (h *harness) verbs() []string {
	var out []string
	for _, a := range h.shoal.Actions() {
		switch a.GetVerb() {
		case "create":
			out = append(out, "create "+a.GetResource().Resource+" "+a.(clienttesting.CreateAction).GetObject().(metav1.Object).GetName())
		case "update":
			out = append(out, "update "+a.GetResource().Resource+"/"+a.GetSubresource()+" "+a.(clienttesting.UpdateAction).GetObject().(metav1.Object).GetName())
		case "delete":
			out = append(out, "delete "+a.GetResource().Resource+" "+a.(clienttesting.DeleteAction).GetName())
		}
	}
	return out
}

// events drains the recorded Events.
func (h *harness) events() []string {
	var out []string
	for len(h.recorder.Events) > 0 {
		out = append(out, <-h.recorder.Events)
	}
	return out
}

func listJob(name string, images ...string) *v1alpha1.ImageListPullJob {
	return &v1alpha1.ImageListPullJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.ImageListPullJobSpec{Images: images, ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{
			PullSecrets:      []string{"regcred"},
			Selector:         &v1alpha1.ImagePullJobNodeSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}}},
			Parallelism:      ptr.To(intstr.FromInt32(4)),
			PullPolicy:       &v1alpha1.PullPolicy{TimeoutSeconds: ptr.To[int32](300), BackoffLimit: ptr.To[int32](2)},
			CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always, ActiveDeadlineSeconds: ptr.To[int64](1200), TTLSecondsAfterFinished: ptr.To[int32](60)},
			SandboxConfig:    &v1alpha1.SandboxConfig{Labels: map[string]string{"team": "ml"}, Annotations: map[string]string{"trace": "1"}},
			ImagePullPolicy:  v1alpha1.PullAlways,
		}},
	}
}

func TestCreatesChildren(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.ImageListPullJob)
	}{
		{name: "node selector", mutate: func(*v1alpha1.ImageListPullJob) {}},
		{name: "pod selector", mutate: func(j *v1alpha1.ImageListPullJob) {
			j.Spec.Selector = nil
			j.Spec.PodSelector = &v1alpha1.ImagePullJobPodSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
		}},
		{name: "never", mutate: func(j *v1alpha1.ImageListPullJob) {
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never}
			j.Spec.ImagePullPolicy = v1alpha1.PullIfNotPresent
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := listJob("warm", "docker.io/library/nginx:1.25", "docker.io/library/redis:7")
			tc.mutate(parent)
			h := newHarness(t, parent)

			require.Zero(t, h.sync(t, "warm"))
			a, b := ChildName("warm", "docker.io/library/nginx:1.25"), ChildName("warm", "docker.io/library/redis:7")
			require.Equal(t, []string{"create imagepulljobs " + a, "create imagepulljobs " + b, "update imagelistpulljobs/status warm"}, h.verbs())

			wantTemplate := *parent.Spec.ImagePullJobTemplate.DeepCopy()
			wantTemplate.CompletionPolicy.TTLSecondsAfterFinished = nil // the parent's TTL governs
			for _, img := range parent.Spec.Images {
				c := h.child(t, "warm", img)
				require.NotNil(t, c)
				require.Equal(t, "ns", c.Namespace)
				require.Equal(t, img, c.Spec.Image)
				require.Equal(t, wantTemplate, c.Spec.ImagePullJobTemplate)
				require.Equal(t, map[string]string{LabelListJob: "warm"}, c.Labels)
				require.Equal(t, img, c.Annotations[AnnotationImage])
				require.NotEmpty(t, c.Annotations[AnnotationTemplateHash])
				require.Equal(t, []metav1.OwnerReference{{
					APIVersion: "apps.kruise.io/v1alpha1", Kind: "ImageListPullJob", Name: "warm", UID: "uid-warm",
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
				}}, c.OwnerReferences)
			}
			got := h.list(t, "warm").Status
			require.Equal(t, int32(2), got.Desired)
			require.Equal(t, t0, got.StartTime.Time)
			require.Nil(t, got.CompletionTime)
			require.Zero(t, got.Active, "children not started yet")
			require.Equal(t, []string{
				"Normal Created Created ImagePullJob " + a + " for image docker.io/library/nginx:1.25",
				"Normal Created Created ImagePullJob " + b + " for image docker.io/library/redis:7",
			}, h.events())

			// Once the caches show the children, nothing more to do.
			h.refresh(t)
			require.Zero(t, h.sync(t, "warm"))
			require.Empty(t, h.verbs())
			require.Empty(t, h.events())
		})
	}
}

func TestStaleCacheCreatesNoDuplicate(t *testing.T) {
	h := newHarness(t, listJob("warm", "nginx:1"))
	h.sync(t, "warm")
	h.shoal.ClearActions()
	// The cache does not show the child (nor the status) yet: creating it
	// again is a no-op.
	h.sync(t, "warm")
	require.Equal(t, []string{"create imagepulljobs " + ChildName("warm", "nginx:1"), "update imagelistpulljobs/status warm"}, h.verbs())
	jobs, err := h.shoal.AppsV1alpha1().ImagePullJobs("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, jobs.Items, 1)
	require.Len(t, h.events(), 1, "one Created event")
}

func TestNameTakenByAnotherJob(t *testing.T) {
	other := &v1alpha1.ImagePullJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: ChildName("warm", "nginx:1")}}
	h := newHarness(t, listJob("warm", "nginx:1"), other)
	after, err := h.c.sync(context.Background(), "ns/warm")
	require.NoError(t, err, "not retried hot")
	require.Equal(t, conflictRetry, after)
	ev := h.events()
	require.Len(t, ev, 1)
	require.Contains(t, ev[0], "Warning NameConflict Cannot create ImagePullJob "+other.Name+" for image nginx:1: an ImagePullJob of that name exists and is not owned")
}

func TestImagesRemovedAndAdded(t *testing.T) {
	h := newHarness(t, listJob("warm", "a:1", "b:1"))
	h.sync(t, "warm")
	h.refresh(t)
	h.events()

	j := h.list(t, "warm")
	j.Spec.Images = []string{"a:1", "c:1"}
	_, err := h.shoal.AppsV1alpha1().ImageListPullJobs("ns").Update(context.Background(), j, metav1.UpdateOptions{})
	require.NoError(t, err)
	h.refresh(t)

	h.sync(t, "warm")
	require.Equal(t, []string{"delete imagepulljobs " + ChildName("warm", "b:1"), "create imagepulljobs " + ChildName("warm", "c:1")}, h.verbs())
	require.Nil(t, h.child(t, "warm", "b:1"))
	require.NotNil(t, h.child(t, "warm", "a:1"))
	require.NotNil(t, h.child(t, "warm", "c:1"))
	require.Equal(t, []string{
		"Normal Deleted Deleted ImagePullJob " + ChildName("warm", "b:1") + " for image b:1: the image is no longer in spec.images",
		"Normal Created Created ImagePullJob " + ChildName("warm", "c:1") + " for image c:1",
	}, h.events())
}

func TestTemplateChangeRecreatesChildren(t *testing.T) {
	h := newHarness(t, listJob("warm", "a:1"))
	h.sync(t, "warm")
	h.refresh(t)
	oldHash := h.child(t, "warm", "a:1").Annotations[AnnotationTemplateHash]

	// A changed TTL alone is not the children's business.
	j := h.list(t, "warm")
	j.Spec.CompletionPolicy.TTLSecondsAfterFinished = ptr.To[int32](5)
	_, err := h.shoal.AppsV1alpha1().ImageListPullJobs("ns").Update(context.Background(), j, metav1.UpdateOptions{})
	require.NoError(t, err)
	h.refresh(t)
	h.sync(t, "warm")
	require.Empty(t, h.verbs())

	j = h.list(t, "warm")
	j.Spec.Parallelism = ptr.To(intstr.FromInt32(10))
	_, err = h.shoal.AppsV1alpha1().ImageListPullJobs("ns").Update(context.Background(), j, metav1.UpdateOptions{})
	require.NoError(t, err)
	h.refresh(t)
	h.events()

	h.sync(t, "warm")
	name := ChildName("warm", "a:1")
	require.Equal(t, []string{"delete imagepulljobs " + name}, h.verbs(), "the new child waits until the old one is gone")
	require.Equal(t, []string{"Normal Deleted Deleted ImagePullJob " + name + " for image a:1: the template changed; it is created again"}, h.events())

	h.refresh(t)
	h.sync(t, "warm")
	require.Equal(t, []string{"create imagepulljobs " + name}, h.verbs())
	c := h.child(t, "warm", "a:1")
	require.Equal(t, intstr.FromInt32(10), *c.Spec.Parallelism)
	require.NotEqual(t, oldHash, c.Annotations[AnnotationTemplateHash])
}

func TestStatusAggregation(t *testing.T) {
	started := &metav1.Time{Time: t0}
	running := v1alpha1.ImagePullJobStatus{StartTime: started, Desired: 3, Active: 1, Succeeded: 1, Message: "job is running, progress 33.3%"}
	succeeded := v1alpha1.ImagePullJobStatus{StartTime: started, CompletionTime: started, Desired: 3, Succeeded: 3, Message: "job has completed"}
	failed := v1alpha1.ImagePullJobStatus{StartTime: started, CompletionTime: started, Desired: 3, Succeeded: 1, Failed: 2,
		FailedNodes: []string{"node-1", "node-2"}, Message: "job has completed"}
	neverDone := v1alpha1.ImagePullJobStatus{StartTime: started, Desired: 3, Succeeded: 3, Message: "job is running, progress 100.0%"}
	failedMsg := func(child string) string {
		return "failed on 2 of 3 nodes (node-1, node-2); see kubectl kruise get imagepulljob " + child + " -n ns --nodes"
	}
	for _, tc := range []struct {
		name     string
		never    bool
		children map[string]v1alpha1.ImagePullJobStatus // by image; a missing image has no status yet
		want     v1alpha1.ImageListPullJobStatus
	}{
		{
			name:     "nothing started",
			children: map[string]v1alpha1.ImagePullJobStatus{},
			want:     v1alpha1.ImageListPullJobStatus{Desired: 3},
		},
		{
			name:     "running",
			children: map[string]v1alpha1.ImagePullJobStatus{"a:1": running, "b:1": succeeded},
			want:     v1alpha1.ImageListPullJobStatus{Desired: 3, Active: 1, Completed: 1, Succeeded: 1},
		},
		{
			name:     "a failure is listed while others run",
			children: map[string]v1alpha1.ImagePullJobStatus{"a:1": running, "b:1": failed, "c:1": succeeded},
			want: v1alpha1.ImageListPullJobStatus{Desired: 3, Active: 1, Completed: 2, Succeeded: 1, FailedImageStatuses: []*v1alpha1.FailedImageStatus{
				{ImagePullJob: ChildName("warm", "b:1"), Name: "b:1", Message: failedMsg(ChildName("warm", "b:1"))},
			}},
		},
		{
			name:     "all done completes an Always job",
			children: map[string]v1alpha1.ImagePullJobStatus{"a:1": succeeded, "b:1": failed, "c:1": failed},
			want: v1alpha1.ImageListPullJobStatus{Desired: 3, Completed: 3, Succeeded: 1, CompletionTime: &metav1.Time{Time: t0},
				FailedImageStatuses: []*v1alpha1.FailedImageStatus{
					{ImagePullJob: ChildName("warm", "b:1"), Name: "b:1", Message: failedMsg(ChildName("warm", "b:1"))},
					{ImagePullJob: ChildName("warm", "c:1"), Name: "c:1", Message: failedMsg(ChildName("warm", "c:1"))},
				}},
		},
		{
			name:     "a Never job never completes",
			never:    true,
			children: map[string]v1alpha1.ImagePullJobStatus{"a:1": neverDone, "b:1": neverDone, "c:1": neverDone},
			want:     v1alpha1.ImageListPullJobStatus{Desired: 3, Completed: 3, Succeeded: 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := listJob("warm", "a:1", "b:1", "c:1")
			if tc.never {
				parent.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never}
			}
			h := newHarness(t, parent)
			h.sync(t, "warm")
			for img, st := range tc.children {
				h.setChildStatus(t, "warm", img, st)
			}
			h.refresh(t)
			h.sync(t, "warm")
			got := h.list(t, "warm").Status
			require.Equal(t, t0, got.StartTime.Time)
			got.StartTime = nil
			require.Equal(t, tc.want, got)
		})
	}
}

func TestWarnsOncePerFailure(t *testing.T) {
	h := newHarness(t, listJob("warm", "a:1"))
	h.sync(t, "warm")
	st := v1alpha1.ImagePullJobStatus{StartTime: &metav1.Time{Time: t0}, Desired: 3, Active: 1, Failed: 1, FailedNodes: []string{"node-1"}}
	h.setChildStatus(t, "warm", "a:1", st)
	h.refresh(t)
	h.events()

	h.sync(t, "warm")
	name := ChildName("warm", "a:1")
	want := "Warning ImagePullFailed Image a:1 (ImagePullJob " + name + ") failed on 1 of 3 nodes (node-1); see kubectl kruise get imagepulljob " + name + " -n ns --nodes"
	require.Equal(t, []string{want}, h.events())
	h.refresh(t)
	h.sync(t, "warm")
	require.Empty(t, h.events(), "the same failure is not reported again")

	st.Failed, st.FailedNodes = 2, []string{"node-1", "node-2"}
	h.setChildStatus(t, "warm", "a:1", st)
	h.refresh(t)
	h.sync(t, "warm")
	ev := h.events()
	require.Len(t, ev, 1)
	require.Contains(t, ev[0], "failed on 2 of 3 nodes (node-1, node-2)")

	// A new leader (which remembers nothing) does not repeat a failure
	// the status already shows.
	h.c.forget("ns/warm")
	h.refresh(t)
	h.sync(t, "warm")
	require.Empty(t, h.events())
}

func TestCompletionAndTTL(t *testing.T) {
	h := newHarness(t, listJob("warm", "a:1", "b:1"))
	h.sync(t, "warm")
	done := v1alpha1.ImagePullJobStatus{StartTime: &metav1.Time{Time: t0}, CompletionTime: &metav1.Time{Time: t0}, Desired: 2, Succeeded: 2}
	h.setChildStatus(t, "warm", "a:1", done)
	h.refresh(t)
	h.sync(t, "warm")
	require.Nil(t, h.list(t, "warm").Status.CompletionTime, "b:1 still runs")

	h.clock.Step(10 * time.Second)
	h.setChildStatus(t, "warm", "b:1", done)
	h.refresh(t)
	h.events()
	require.Zero(t, h.sync(t, "warm"), "the status write's event brings the job back for its TTL")
	st := h.list(t, "warm").Status
	require.Equal(t, t0.Add(10*time.Second), st.CompletionTime.Time)
	require.Equal(t, int32(2), st.Completed)
	require.Equal(t, int32(2), st.Succeeded)
	require.Equal(t, []string{"Normal Completed All 2 ImagePullJobs completed, 2 of them on every node"}, h.events())

	// Completed is final: a child going away changes nothing.
	h.refresh(t)
	require.NoError(t, h.shoal.AppsV1alpha1().ImagePullJobs("ns").Delete(context.Background(), ChildName("warm", "a:1"), metav1.DeleteOptions{}))
	h.refresh(t)
	h.clock.Step(45 * time.Second)
	require.Equal(t, 15*time.Second, h.sync(t, "warm"))
	require.Empty(t, h.verbs())

	h.clock.Step(15 * time.Second)
	require.Zero(t, h.sync(t, "warm"))
	require.Equal(t, []string{"delete imagelistpulljobs warm"}, h.verbs())
	require.Nil(t, h.list(t, "warm"))
	del := h.shoal.Actions()[0].(clienttesting.DeleteAction)
	require.Equal(t, types.UID("uid-warm"), *del.GetDeleteOptions().Preconditions.UID)
	require.Equal(t, metav1.DeletePropagationBackground, *del.GetDeleteOptions().PropagationPolicy)
	// The garbage collector deletes the children: they name the parent as
	// their controller, and block its foreground deletion.
	left := h.child(t, "warm", "b:1")
	require.Equal(t, types.UID("uid-warm"), metav1.GetControllerOf(left).UID)
	require.True(t, *metav1.GetControllerOf(left).BlockOwnerDeletion)
	h.refresh(t)
	require.Zero(t, h.sync(t, "warm"))
	require.Empty(t, h.verbs())
}

func TestCompletedWithoutTTLIsKept(t *testing.T) {
	parent := listJob("warm", "a:1")
	parent.Spec.CompletionPolicy.TTLSecondsAfterFinished = nil
	parent.Status = v1alpha1.ImageListPullJobStatus{Desired: 1, Completed: 1, StartTime: &metav1.Time{Time: t0}, CompletionTime: &metav1.Time{Time: t0}}
	h := newHarness(t, parent)
	h.clock.Step(time.Hour)
	require.Zero(t, h.sync(t, "warm"))
	require.Empty(t, h.verbs())
}

func TestStandbyWritesNothing(t *testing.T) {
	expired := listJob("old", "a:1")
	expired.Status = v1alpha1.ImageListPullJobStatus{Desired: 1, Completed: 1, StartTime: &metav1.Time{Time: t0}, CompletionTime: &metav1.Time{Time: t0.Add(-time.Hour)}}
	h := newHarness(t, listJob("warm", "a:1", "b:1"), expired)
	h.leader = false
	h.sync(t, "warm")
	h.sync(t, "old")
	require.Empty(t, h.shoal.Actions())
	require.Zero(t, h.writer.writes)
	require.Empty(t, h.events())

	// Leading: Resync queues every list job.
	h.leader = true
	h.c.Resync()
	require.Equal(t, 2, h.c.queue.Len())
	for h.c.queue.Len() > 0 {
		key, _ := h.c.queue.Get()
		_, err := h.c.sync(context.Background(), key)
		require.NoError(t, err)
		h.c.queue.Done(key)
	}
	require.NotNil(t, h.child(t, "warm", "a:1"))
	require.Nil(t, h.list(t, "old"), "deleted after its TTL")
}

func TestChildEventsQueueTheParent(t *testing.T) {
	h := newHarness(t, listJob("warm", "a:1"))
	h.sync(t, "warm")
	h.refresh(t)
	child := h.child(t, "warm", "a:1")
	orphan := &v1alpha1.ImagePullJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "solo"}}
	foreign := orphan.DeepCopy()
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet", Name: "web", UID: "u", Controller: ptr.To(true)}}

	h.c.enqueueOwner(orphan)
	h.c.enqueueOwner(foreign)
	require.Zero(t, h.c.queue.Len())
	h.c.enqueueOwner(child)
	h.c.enqueueOwner(cache.DeletedFinalStateUnknown{Key: "ns/" + child.Name, Obj: child})
	require.Equal(t, 1, h.c.queue.Len())
	key, _ := h.c.queue.Get()
	require.Equal(t, "ns/warm", key)
	h.c.queue.Done(key)

	owned, err := h.c.jobs.ByIndex(byOwnerUID, "uid-warm")
	require.NoError(t, err)
	require.Len(t, owned, 1)
}

func TestChildName(t *testing.T) {
	long := strings.Repeat("a", 51) + "-x" + strings.Repeat("b", 200)
	for _, tc := range []struct{ name, parent, image, prefix string }{
		{name: "short", parent: "warm", image: "nginx:1", prefix: "warm-"},
		{name: "long parent is cut", parent: long, image: "nginx:1", prefix: strings.Repeat("a", 51) + "-"},
		{name: "no dot or dash before the hash", parent: strings.Repeat("c", 51) + ".d" + strings.Repeat("e", 20), image: "x", prefix: strings.Repeat("c", 51) + "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := ChildName(tc.parent, tc.image)
			require.LessOrEqual(t, len(n), 63)
			require.True(t, strings.HasPrefix(n, tc.prefix), n)
			require.Empty(t, validation.IsDNS1123Subdomain(n))
			require.Empty(t, validation.IsValidLabelValue(n))
			require.Equal(t, n, ChildName(tc.parent, tc.image), "deterministic")
			require.NotEqual(t, n, ChildName(tc.parent, tc.image+"x"), "per image")
			require.NotEqual(t, n, ChildName(tc.parent+"z", tc.image), "per parent, even when cut")
		})
	}
	require.Equal(t, "warm", ListLabelValue("warm"))
	lv := ListLabelValue(long)
	require.Empty(t, validation.IsValidLabelValue(lv))
	require.NotEqual(t, lv, ListLabelValue(long+"z"))
}
