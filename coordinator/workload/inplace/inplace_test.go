package inplace

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// template is a pod template with the given containers (name=image) and
// labels.
func template(labels map[string]string, containers ...corev1.Container) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func container(name, image string, env ...corev1.EnvVar) corev1.Container {
	return corev1.Container{Name: name, Image: image, Env: env}
}

// fromLabel is an env var reading label key through the Downward API.
func fromLabel(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + key + "']"}}}
}

// barrier is the container launch priority env of priority p.
func barrier(p string) corev1.EnvVar {
	return corev1.EnvVar{Name: EnvContainerBarrier, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "web-barrier"}, Key: "p_" + p}}}
}

func TestCalculate(t *testing.T) {
	base := func() *corev1.PodTemplateSpec {
		return template(map[string]string{"app": "web", "version": "v1"},
			container("nginx", "nginx:1.25", fromLabel("VERSION", "version")),
			container("sidecar", "busybox:1.36"))
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.PodTemplateSpec)
		want   *Spec
		notIn  string // the NotInPlaceError's field
	}{
		{"nothing", func(*corev1.PodTemplateSpec) {}, &Spec{Revision: "r2"}, ""},
		{"one image", func(p *corev1.PodTemplateSpec) { p.Spec.Containers[1].Image = "busybox:1.37" },
			&Spec{Revision: "r2", Images: map[string]string{"sidecar": "busybox:1.37"}}, ""},
		{"a label no env reads", func(p *corev1.PodTemplateSpec) { p.Labels["team"] = "a" },
			&Spec{Revision: "r2", Labels: map[string]*string{"team": ptr.To("a")}}, ""},
		{"a label env reads (env from metadata)", func(p *corev1.PodTemplateSpec) { p.Labels["version"] = "v2" },
			&Spec{Revision: "r2", Labels: map[string]*string{"version": ptr.To("v2")},
				EnvFromMetadata: map[string]MetadataRefs{"nginx": {Labels: []string{"version"}}}}, ""},
		{"a removed label env reads", func(p *corev1.PodTemplateSpec) { delete(p.Labels, "version") },
			&Spec{Revision: "r2", Labels: map[string]*string{"version": nil},
				EnvFromMetadata: map[string]MetadataRefs{"nginx": {Labels: []string{"version"}}}}, ""},
		{"resources are not in place", func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, nil, "spec.containers[nginx].resources"},
		{"an image and a command: not in place", func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "nginx:1.26"
			p.Spec.Containers[0].Command = []string{"nginx"}
		}, nil, "spec.containers[nginx].command"},
		{"a pod spec field", func(p *corev1.PodTemplateSpec) { p.Spec.HostNetwork = true }, nil, "spec.hostNetwork"},
		{"an added container", func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers = append(p.Spec.Containers, container("log", "busybox"))
		}, nil, "spec.containers (added or removed)"},
		{"renamed containers", func(p *corev1.PodTemplateSpec) { p.Spec.Containers[1].Name = "helper" }, nil, "spec.containers[1].name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to := base()
			tc.change(to)
			got, err := Calculate(base(), to, "r2")
			if tc.notIn != "" {
				var e *NotInPlaceError
				require.ErrorAs(t, err, &e)
				require.Equal(t, tc.notIn, e.Field)
				require.Contains(t, err.Error(), "only container images and pod labels and annotations change in place")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// podFor is a running pod of tmpl whose containers report image IDs.
func podFor(tmpl *corev1.PodTemplateSpec) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", Labels: tmpl.Labels}, Spec: *tmpl.Spec.DeepCopy()}
	for _, c := range tmpl.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "sha256:" + c.Name + "-old", Ready: true,
		})
	}
	return pod
}

func TestSplitByPriority(t *testing.T) {
	// OpenKruise's e2e: redis priority 10, nginx 0 (both images change):
	// batches [redis], then [nginx].
	from := template(map[string]string{"app": "web"},
		container("nginx", "nginx:1.25", barrier("0")),
		container("redis", "redis:7.0", barrier("10")),
		container("plain", "busybox:1.36"))
	to := from.DeepCopy()
	to.Spec.Containers[0].Image = "nginx:1.26"
	to.Spec.Containers[1].Image = "redis:7.2"
	to.Spec.Containers[2].Image = "busybox:1.37"
	s, err := Calculate(from, to, "r2")
	require.NoError(t, err)
	now, next := Split(podFor(from), s)
	require.Equal(t, map[string]string{"redis": "redis:7.2"}, now.Images)
	require.Equal(t, map[string]string{"nginx": "nginx:1.26", "plain": "busybox:1.37"}, next.Images, "in a prioritized pod a container without a priority has 0")

	t.Run("KRUISE_CONTAINER_PRIORITY without the webhook's barrier (seed 000)", func(t *testing.T) {
		from := template(map[string]string{"app": "web"},
			container("sidecar", "x:1", corev1.EnvVar{Name: "KRUISE_CONTAINER_PRIORITY", Value: "10"}),
			container("main", "y:1"))
		to := from.DeepCopy()
		to.Spec.Containers[0].Image, to.Spec.Containers[1].Image = "x:2", "y:2"
		s, err := Calculate(from, to, "r2")
		require.NoError(t, err)
		now, next := Split(podFor(from), s)
		require.Equal(t, map[string]string{"sidecar": "x:2"}, now.Images)
		require.Equal(t, map[string]string{"main": "y:2"}, next.Images)
	})
	t.Run("container-launch-priority Ordered: the first container first", func(t *testing.T) {
		from := template(nil, container("first", "x:1"), container("second", "y:1"))
		to := from.DeepCopy()
		to.Spec.Containers[0].Image, to.Spec.Containers[1].Image = "x:2", "y:2"
		s, err := Calculate(from, to, "r2")
		require.NoError(t, err)
		pod := podFor(from)
		pod.Annotations = map[string]string{"apps.kruise.io/container-launch-priority": "Ordered"}
		now, next := Split(pod, s)
		require.Equal(t, map[string]string{"first": "x:2"}, now.Images)
		require.Equal(t, map[string]string{"second": "y:2"}, next.Images)
	})

	t.Run("no priorities: one batch", func(t *testing.T) {
		from := template(nil, container("a", "x:1"), container("b", "y:1"))
		to := from.DeepCopy()
		to.Spec.Containers[0].Image, to.Spec.Containers[1].Image = "x:2", "y:2"
		s, err := Calculate(from, to, "r2")
		require.NoError(t, err)
		now, next := Split(podFor(from), s)
		require.Equal(t, s, now)
		require.Nil(t, next)
	})
	t.Run("a shared label pulls a container into the batch", func(t *testing.T) {
		from := template(map[string]string{"v": "1", "w": "1"},
			container("high", "x:1", barrier("10"), fromLabel("V", "v")),
			container("low", "y:1", barrier("0"), fromLabel("V", "v")),
			container("lowest", "z:1", barrier("-1"), fromLabel("W", "w")))
		to := from.DeepCopy()
		to.Labels = map[string]string{"v": "2", "w": "2"}
		s, err := Calculate(from, to, "r2")
		require.NoError(t, err)
		now, next := Split(podFor(from), s)
		require.Equal(t, map[string]MetadataRefs{"high": {Labels: []string{"v"}}, "low": {Labels: []string{"v"}}}, now.EnvFromMetadata)
		require.Equal(t, map[string]*string{"v": ptr.To("2")}, now.Labels)
		require.Equal(t, map[string]MetadataRefs{"lowest": {Labels: []string{"w"}}}, next.EnvFromMetadata)
		require.Equal(t, map[string]*string{"w": ptr.To("2")}, next.Labels, "the key only a waiting container reads waits with it")
	})
}

func TestStateAndApply(t *testing.T) {
	from := template(map[string]string{"app": "web"},
		container("nginx", "nginx:1.25", barrier("0")),
		container("redis", "redis:7.0", barrier("10")))
	to := from.DeepCopy()
	to.Spec.Containers[0].Image = "nginx:1.26"
	to.Spec.Containers[1].Image = "redis:7.2"
	s, err := Calculate(from, to, "r2")
	require.NoError(t, err)
	pod := podFor(from)
	now, next := Split(pod, s)
	at := metav1.Unix(1_700_000_000, 0)
	st := NewState(pod, now, next, nil, at)
	require.Equal(t, "r2", st.Revision)
	require.True(t, st.UpdateImages)
	require.Equal(t, "sha256:redis-old", st.LastContainerStatuses["redis"].ImageID)
	require.Equal(t, map[string]string{"nginx": "nginx:1.26"}, st.NextContainerImages)
	require.Equal(t, []string{"redis"}, st.PreCheckBeforeNext.ContainersRequiredReady)
	require.Len(t, st.ContainerBatchesRecord, 1)

	updated := pod.DeepCopy()
	require.NoError(t, Apply(updated, now, st))
	require.Equal(t, "redis:7.2", updated.Spec.Containers[1].Image)
	require.Equal(t, "nginx:1.25", updated.Spec.Containers[0].Image, "the next batch waits")
	got, ok, err := ReadState(updated)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, st.Revision, got.Revision)
	require.Equal(t, st.NextContainerImages, got.NextContainerImages)

	done, pending := ImagesUpdated(updated, got)
	require.False(t, done)
	require.Equal(t, []string{"redis"}, pending, "the kubelet has not restarted redis yet")
	updated.Status.ContainerStatuses[1].ImageID = "sha256:redis-new"
	updated.Status.ContainerStatuses[1].Image = "docker.io/library/redis:7.2"
	done, pending = ImagesUpdated(updated, got)
	require.True(t, done, "pending %v", pending)

	// The second batch keeps the first's record.
	now2, next2 := Split(updated, &Spec{Revision: "r2", Images: st.NextContainerImages})
	require.Nil(t, next2)
	st2 := NewState(updated, now2, nil, got, metav1.Unix(1_700_000_010, 0))
	require.Len(t, st2.ContainerBatchesRecord, 2)
	require.Equal(t, []string{"redis"}, st2.ContainerBatchesRecord[0].Containers)
	require.Equal(t, []string{"nginx"}, st2.ContainerBatchesRecord[1].Containers)
	require.Nil(t, st2.PreCheckBeforeNext)

	t.Run("old annotation key and bad JSON", func(t *testing.T) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{wellknown.AnnotationInPlaceUpdateStateOld: `{"revision":"r1"}`}}}
		st, ok, err := ReadState(p)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "r1", st.Revision)
		p.Annotations = map[string]string{wellknown.AnnotationInPlaceUpdateState: "{"}
		_, _, err = ReadState(p)
		require.ErrorContains(t, err, wellknown.AnnotationInPlaceUpdateState)
	})
}
