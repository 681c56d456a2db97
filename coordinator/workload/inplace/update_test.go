package inplace

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalfake "github.com/shoal-io/shoal/protocol/client/clientset/versioned/fake"
)

// running is a pod running containers (name=image), each ready, with
// image IDs "<image>@old".
func running(containers ...corev1.Container) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{"app": "web", "version": "v1"}},
		Spec:       corev1.PodSpec{Containers: containers},
	}
	for _, c := range containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@old", ContainerID: "containerd://" + c.Name + "-1", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}},
		})
	}
	return pod
}

// kubeletRestarts does what the kubelet does to a container whose image or
// env changed: a new container with the spec's image, started at at.
func kubeletRestarts(pod *corev1.Pod, name string, at time.Time) {
	for i := range pod.Status.ContainerStatuses {
		s := &pod.Status.ContainerStatuses[i]
		if s.Name != name {
			continue
		}
		s.Image = containerSpec(pod, name).Image
		s.ImageID = s.Image + "@new"
		s.RestartCount++
		s.ContainerID = fmt.Sprintf("containerd://%s-%d", name, s.RestartCount+1)
		s.State.Running.StartedAt = metav1.NewTime(at)
	}
}

type updaterHarness struct {
	t      *testing.T
	client *kubefake.Clientset
	clock  *testingclock.FakeClock
	u      *Updater
}

func newUpdaterHarness(t *testing.T, pod *corev1.Pod) *updaterHarness {
	client := kubefake.NewClientset(pod)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	return &updaterHarness{t: t, client: client, clock: clk, u: &Updater{Client: client, Clock: clk}}
}

func (h *updaterHarness) get() *corev1.Pod {
	pod, err := h.client.CoreV1().Pods("ns").Get(h.t.Context(), "web-1", metav1.GetOptions{})
	require.NoError(h.t, err)
	return pod
}

// put writes the kubelet's view of the pod (its status).
func (h *updaterHarness) put(pod *corev1.Pod) {
	_, err := h.client.CoreV1().Pods("ns").UpdateStatus(h.t.Context(), pod, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

func (h *updaterHarness) refresh() Progress {
	p, err := h.u.Refresh(h.t.Context(), h.get())
	require.NoError(h.t, err)
	return p
}

func readyCondition(pod *corev1.Pod) corev1.ConditionStatus {
	if c := podstatus.Condition(pod, wellknown.ConditionInPlaceUpdateReady); c != nil {
		return c.Status
	}
	return ""
}

func TestUpdaterImageUpdate(t *testing.T) {
	h := newUpdaterHarness(t, running(container("nginx", "nginx:1.25"), container("sidecar", "busybox:1.36")))
	from := template(map[string]string{"app": "web"}, container("nginx", "nginx:1.25"), container("sidecar", "busybox:1.36"))
	to := template(map[string]string{"app": "web", "team": "a"}, container("nginx", "nginx:1.26"), container("sidecar", "busybox:1.36"))
	s, err := Calculate(from, to, "web-r2")
	require.NoError(t, err)

	require.True(t, h.refresh().Done, "no update started: done")
	require.NoError(t, h.u.Start(t.Context(), h.get(), s, func(p *corev1.Pod) { p.Labels[wellknown.LabelControllerRevisionHash] = "web-r2" }, 0))
	pod := h.get()
	require.True(t, InProgress(pod))
	require.Equal(t, corev1.ConditionFalse, readyCondition(pod))
	require.Equal(t, ReasonStartInPlaceUpdate, podstatus.Condition(pod, wellknown.ConditionInPlaceUpdateReady).Reason)
	require.Equal(t, "nginx:1.26", pod.Spec.Containers[0].Image)
	require.Equal(t, "busybox:1.36", pod.Spec.Containers[1].Image)
	require.Equal(t, "web-r2", pod.Labels[wellknown.LabelControllerRevisionHash])
	require.Equal(t, "a", pod.Labels["team"], "the template's new label")
	st, ok, err := ReadState(pod)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "web-r2", st.Revision)
	require.Equal(t, "nginx:1.25@old", st.LastContainerStatuses["nginx"].ImageID)

	p := h.refresh()
	require.False(t, p.Done)
	require.Contains(t, p.Waiting, "nginx")

	kubeletRestarts(pod, "nginx", h.clock.Now())
	h.put(pod)
	stale := h.get()
	p, err = h.u.Refresh(t.Context(), stale)
	require.NoError(t, err)
	require.True(t, p.Done)
	require.Equal(t, corev1.ConditionTrue, readyCondition(h.get()))
	require.True(t, h.refresh().Done, "refreshing a finished update changes nothing")

	writes := len(h.client.Actions())
	p, err = h.u.Refresh(t.Context(), stale)
	require.NoError(t, err)
	require.False(t, p.Done, "a sync on the copy before the write (the informer lags) waits")
	require.Len(t, h.client.Actions(), writes, "and writes nothing again")

	// The kubelet wrote status before our write landed: a newer copy,
	// still without the True, is the same update.
	kubeletCopy := stale.DeepCopy()
	kubeletCopy.ResourceVersion += "-kubelet"
	kubeletCopy.Status.ContainerStatuses[0].Ready = true
	p, err = h.u.Refresh(t.Context(), kubeletCopy)
	require.NoError(t, err)
	require.False(t, p.Done)
	require.Len(t, h.client.Actions(), writes, "no second True for the same update")
}

func TestUpdaterGracePeriod(t *testing.T) {
	h := newUpdaterHarness(t, running(container("nginx", "nginx:1.25")))
	s := &Spec{Revision: "web-r2", Images: map[string]string{"nginx": "nginx:1.26"}}
	require.NoError(t, h.u.Start(t.Context(), h.get(), s, nil, 10))
	pod := h.get()
	require.Equal(t, corev1.ConditionFalse, readyCondition(pod), "not ready during the grace period")
	require.Equal(t, "nginx:1.25", pod.Spec.Containers[0].Image, "the image waits for the grace period")
	require.Contains(t, pod.Annotations, wellknown.AnnotationInPlaceUpdateGrace)

	h.clock.Step(4 * time.Second)
	p := h.refresh()
	require.False(t, p.Done)
	require.Equal(t, 6*time.Second, p.RequeueAfter)

	h.clock.Step(6 * time.Second)
	require.False(t, h.refresh().Done)
	pod = h.get()
	require.Equal(t, "nginx:1.26", pod.Spec.Containers[0].Image, "applied when the grace period ended")
	require.NotContains(t, pod.Annotations, wellknown.AnnotationInPlaceUpdateGrace)
	kubeletRestarts(pod, "nginx", h.clock.Now())
	h.put(pod)
	require.True(t, h.refresh().Done)
}

func TestUpdaterBatchesByPriority(t *testing.T) {
	// redis (priority 10) first, nginx (priority 1) once redis runs and is
	// ready: OpenKruise's e2e records batches [["redis"], ["nginx"]].
	h := newUpdaterHarness(t, running(container("nginx", "nginx:1.25", barrier("1")), container("redis", "redis:6", barrier("10"))))
	s := &Spec{Revision: "r2", Images: map[string]string{"nginx": "nginx:1.26", "redis": "redis:7"}}
	require.NoError(t, h.u.Start(t.Context(), h.get(), s, nil, 0))
	pod := h.get()
	require.Equal(t, "nginx:1.25", pod.Spec.Containers[0].Image)
	require.Equal(t, "redis:7", pod.Spec.Containers[1].Image)

	kubeletRestarts(pod, "redis", h.clock.Now())
	pod.Status.ContainerStatuses[1].Ready = false
	h.put(pod)
	p := h.refresh()
	require.Contains(t, p.Waiting, "redis to be ready", "the next batch waits for the first to be ready")
	require.Equal(t, "nginx:1.25", h.get().Spec.Containers[0].Image)

	pod = h.get()
	pod.Status.ContainerStatuses[1].Ready = true
	h.put(pod)
	h.clock.Step(time.Second)
	require.False(t, h.refresh().Done)
	pod = h.get()
	require.Equal(t, "nginx:1.26", pod.Spec.Containers[0].Image, "the second batch")
	st, _, err := ReadState(pod)
	require.NoError(t, err)
	require.Len(t, st.ContainerBatchesRecord, 2)
	require.Equal(t, []string{"redis"}, st.ContainerBatchesRecord[0].Containers)
	require.Equal(t, []string{"nginx"}, st.ContainerBatchesRecord[1].Containers)

	kubeletRestarts(pod, "nginx", h.clock.Now())
	h.put(pod)
	require.True(t, h.refresh().Done)
}

func TestUpdaterEnvFromMetadataWaitsForARestart(t *testing.T) {
	from := template(map[string]string{"version": "v1"}, container("nginx", "nginx:1.25", fromLabel("VERSION", "version")))
	to := template(map[string]string{"version": "v2"}, container("nginx", "nginx:1.25", fromLabel("VERSION", "version")))
	s, err := Calculate(from, to, "r2")
	require.NoError(t, err)

	t.Run("without a restarter: done once the container started again", func(t *testing.T) {
		h := newUpdaterHarness(t, running(container("nginx", "nginx:1.25", fromLabel("VERSION", "version"))))
		require.NoError(t, h.u.Start(t.Context(), h.get(), s, nil, 0))
		pod := h.get()
		require.Equal(t, "v2", pod.Labels["version"])
		require.Contains(t, h.refresh().Waiting, "nginx", "the container still runs with the old env")
		h.clock.Step(time.Second)
		kubeletRestarts(pod, "nginx", h.clock.Now())
		h.put(pod)
		require.True(t, h.refresh().Done)
	})

	t.Run("with a restarter: done when it says so", func(t *testing.T) {
		h := newUpdaterHarness(t, running(container("nginx", "nginx:1.25", fromLabel("VERSION", "version"))))
		var asked [][]string
		done := false
		h.u.Restart = func(_ context.Context, pod *corev1.Pod, st *pub.InPlaceUpdateState, containers []string) (bool, error) {
			require.Equal(t, "r2", st.Revision)
			asked = append(asked, containers)
			return done, nil
		}
		require.NoError(t, h.u.Start(t.Context(), h.get(), s, nil, 0))
		p := h.refresh()
		require.Equal(t, EnvRestartDelay, p.RequeueAfter, "the kubelet gets time to see the new label first")
		require.Empty(t, asked)
		h.clock.Step(EnvRestartDelay)
		p = h.refresh()
		require.Contains(t, p.Waiting, "nginx")
		require.Equal(t, restartPoll, p.RequeueAfter, "the restart's progress is polled")
		pod := h.get()
		kubeletRestarts(pod, "nginx", h.clock.Now())
		h.put(pod)
		require.False(t, h.refresh().Done, "a restart alone is not enough: the restarter checks the env")
		done = true
		require.True(t, h.refresh().Done)
		require.Equal(t, [][]string{{"nginx"}, {"nginx"}, {"nginx"}}, asked)
	})
}

func TestUpdaterSameImageIDUnderAnotherName(t *testing.T) {
	// OpenKruise's "in-place update images with the same imageID": the
	// image moves to a digest reference of the same image; the kubelet
	// keeps reporting the old tag and image ID. The new container is the
	// sign that the update is done.
	h := newUpdaterHarness(t, running(container("app", "registry/testserver:latest")))
	s := &Spec{Revision: "r2", Images: map[string]string{"app": "registry/testserver@sha256:abc"}}
	require.NoError(t, h.u.Start(t.Context(), h.get(), s, nil, 0))
	require.False(t, h.refresh().Done)

	pod := h.get()
	st := &pod.Status.ContainerStatuses[0]
	st.ContainerID, st.RestartCount = "containerd://app-2", 1
	h.put(pod)
	require.True(t, h.refresh().Done, "a new container of the same image ID")
	require.Equal(t, "registry/testserver:latest", h.get().Status.ContainerStatuses[0].Image, "the kubelet's report is unchanged")
}

func TestRestartWithCRR(t *testing.T) {
	client := shoalfake.NewSimpleClientset()
	restart := RestartWithCRR(client)
	pod := running(container("nginx", "nginx:1.25"))
	pod.UID = "uid-1"
	st := &pub.InPlaceUpdateState{Revision: "r2", UpdateTimestamp: metav1.Unix(1_700_000_000, 0)}
	list := func() []v1alpha1.ContainerRecreateRequest {
		l, err := client.AppsV1alpha1().ContainerRecreateRequests("ns").List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		return l.Items
	}
	done, err := restart(t.Context(), pod, st, []string{"nginx"})
	require.NoError(t, err)
	require.False(t, done)
	done, err = restart(t.Context(), pod, st, []string{"nginx"})
	require.NoError(t, err)
	require.False(t, done, "asking again for the same batch reads the same request")
	require.Len(t, list(), 1)
	crr := list()[0]
	require.Equal(t, "web-1", crr.Spec.PodName)
	require.Equal(t, "nginx", crr.Spec.Containers[0].Name)
	require.Equal(t, types.UID("uid-1"), crr.OwnerReferences[0].UID, "removed with its pod")
	require.Equal(t, "true", crr.Annotations[wellknown.AnnotationCRRVerifyEnvFromMetadata], "the agent checks the new env")
	require.NotNil(t, crr.Spec.TTLSecondsAfterFinished)

	// The agent finished it.
	crr.Status = v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestCompleted,
		ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "nginx", Phase: v1alpha1.ContainerRecreateRequestSucceeded}}}
	_, err = client.AppsV1alpha1().ContainerRecreateRequests("ns").UpdateStatus(t.Context(), &crr, metav1.UpdateOptions{})
	require.NoError(t, err)
	done, err = restart(t.Context(), pod, st, []string{"nginx"})
	require.NoError(t, err)
	require.True(t, done)

	crr.Status.ContainerRecreateStates[0] = v1alpha1.ContainerRecreateRequestContainerRecreateState{Name: "nginx", Phase: v1alpha1.ContainerRecreateRequestFailed, Message: `env VERSION is "v1", want "v2"`}
	_, err = client.AppsV1alpha1().ContainerRecreateRequests("ns").UpdateStatus(t.Context(), &crr, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = restart(t.Context(), pod, st, []string{"nginx"})
	require.ErrorContains(t, err, `want "v2"`)

	st.UpdateTimestamp = metav1.Unix(1_700_000_100, 0)
	_, err = restart(t.Context(), pod, st, []string{"nginx"})
	require.NoError(t, err)
	require.Len(t, list(), 2, "a later batch gets its own request")
}

// TestUpdaterStartRetriesAConflictingWrite: the kubelet writes the pod's
// status as soon as it sees InPlaceUpdateReady False, so Start's second
// write often conflicts. Start retries it on a fresh copy; the pod never
// stays not ready without its update, which a Refresh would take for a
// finished one and turn ready again just before its containers restart.
func TestUpdaterStartRetriesAConflictingWrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		conflicts int
		reset     bool // the condition is reset between the writes
		wantErr   string
	}{
		{name: "one conflict", conflicts: 1},
		{name: "three conflicts", conflicts: 3},
		{name: "condition reset meanwhile: starts over", conflicts: 1, reset: true, wantErr: "starting over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newUpdaterHarness(t, running(container("nginx", "nginx:1.25")))
			from := template(map[string]string{"app": "web"}, container("nginx", "nginx:1.25"))
			to := template(map[string]string{"app": "web"}, container("nginx", "nginx:1.26"))
			s, err := Calculate(from, to, "web-r2")
			require.NoError(t, err)

			left := tc.conflicts
			h.client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "" || left == 0 {
					return false, nil, nil
				}
				left--
				if tc.reset {
					// Someone set the condition True between the writes
					// (through the tracker: the client's lock is held here).
					obj, err := h.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "ns", "web-1")
					require.NoError(t, err)
					p := obj.(*corev1.Pod).DeepCopy()
					podstatus.SetCondition(p, wellknown.ConditionInPlaceUpdateReady, corev1.ConditionTrue, "", "", h.clock.Now())
					require.NoError(t, h.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, "ns"))
				}
				return true, nil, apierrors.NewConflict(corev1.Resource("pods"), "web-1", fmt.Errorf("the object has been modified"))
			})
			err = h.u.Start(t.Context(), h.get(), s, func(p *corev1.Pod) { p.Labels[wellknown.LabelControllerRevisionHash] = "web-r2" }, 0)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Equal(t, "nginx:1.25", h.get().Spec.Containers[0].Image, "nothing applied")
				return
			}
			require.NoError(t, err)
			pod := h.get()
			require.Equal(t, corev1.ConditionFalse, readyCondition(pod))
			require.Equal(t, "nginx:1.26", pod.Spec.Containers[0].Image)
			require.Equal(t, "web-r2", pod.Labels[wellknown.LabelControllerRevisionHash])
			_, ok, err := ReadState(pod)
			require.NoError(t, err)
			require.True(t, ok)
			require.False(t, h.refresh().Done, "the update is on its way, not taken for a finished one")
			require.Equal(t, corev1.ConditionFalse, readyCondition(h.get()))
		})
	}
}
