//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// TestImageListPullJob ports OpenKruise's ImageListPullJob e2e
// (imagelistpulljobs.go): a list of 2 images becomes 2 ImagePullJobs
// owned by the list job, which completes when both have; the list job's
// TTL deletes it and its children; deleting a list job deletes its
// children (garbage collection through the owner references). The two
// cases run in parallel against one registry with basic auth.
func TestImageListPullJob(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	users := map[string]string{"list-ttl": randomSecret(t), "list-cascade": randomSecret(t)}
	reg := framework.StartRegistry(t, framework.RegistryOptions{Users: users})

	t.Run("completes and is cleaned by its TTL", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		n := int32(len(nodes))
		images := pushListImages(t, reg, "list-ttl")
		createSecret(ctx, t, f, registrySecret(t, "pull-secret", reg.Host, "list-ttl", users["list-ttl"], false))
		list := createListJob(ctx, t, f, "list-ttl", images, func(tpl *v1alpha1.ImagePullJobTemplate) {
			tpl.PullSecrets = []string{"pull-secret"}
			setPull(tpl, int(n), 60, 2)
			tpl.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always, TTLSecondsAfterFinished: ptr.To[int32](20)}
		})
		children := waitListChildren(ctx, t, f, list, images)
		for _, c := range children {
			require.Equal(t, []string{"pull-secret"}, c.Spec.PullSecrets, "child %s", c.Name)
		}
		done := waitListJob(ctx, t, f, "list-ttl", pullJobTimeout, "completed", func(l *v1alpha1.ImageListPullJob) bool {
			return l.Status.CompletionTime != nil
		})
		require.Equal(t, int32(2), done.Status.Desired, listJobState(done))
		require.Equal(t, int32(2), done.Status.Completed, listJobState(done))
		require.Equal(t, int32(2), done.Status.Succeeded, listJobState(done))
		require.Empty(t, done.Status.FailedImageStatuses, listJobState(done))
		for _, c := range children {
			j, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue // its own TTL may already have removed it
			}
			require.NoError(t, err)
			require.Equal(t, n, j.Status.Succeeded, "child %s: %s", j.Name, pullJobState(j))
		}
		for _, img := range images {
			requirePulledBy(t, reg, img, nodes, nodeNames(nodes)...)
		}

		waitListJobGone(ctx, t, f, "list-ttl", pullJobTTLTimeout)
		waitChildrenGone(ctx, t, f, children, 30*time.Second)
		requireNoSecretCopies(ctx, t, f, []string{"pull-secret"}, users["list-ttl"])
	})

	t.Run("deleting it deletes its children", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		images := pushListImages(t, reg, "list-cascade")
		createSecret(ctx, t, f, registrySecret(t, "pull-secret", reg.Host, "list-cascade", users["list-cascade"], false))
		list := createListJob(ctx, t, f, "list-cascade", images, func(tpl *v1alpha1.ImagePullJobTemplate) {
			tpl.PullSecrets = []string{"pull-secret"}
			setPull(tpl, 1, 60, 2)
			tpl.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never}
		})
		children := waitListChildren(ctx, t, f, list, images)
		waitListJob(ctx, t, f, "list-cascade", 10*time.Second, "desired 2", func(l *v1alpha1.ImageListPullJob) bool {
			return l.Status.Desired == 2
		})
		require.NoError(t, f.Shoal.AppsV1alpha1().ImageListPullJobs(f.Namespace).Delete(ctx, "list-cascade", metav1.DeleteOptions{}))
		waitListJobGone(ctx, t, f, "list-cascade", 30*time.Second)
		waitChildrenGone(ctx, t, f, children, 30*time.Second)
	})
}

// pushListImages pushes the two images of a list case.
func pushListImages(t *testing.T, reg *framework.Registry, name string) []string {
	t.Helper()
	return []string{
		reg.Push(t, "list/"+name+"-a", "v1", 4, 2),
		reg.Push(t, "list/"+name+"-b", "v1", 4, 2),
	}
}

func createListJob(ctx context.Context, t *testing.T, f *framework.Framework, name string, images []string, mutate func(*v1alpha1.ImagePullJobTemplate)) *v1alpha1.ImageListPullJob {
	t.Helper()
	l := &v1alpha1.ImageListPullJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ImageListPullJobSpec{Images: images},
	}
	mutate(&l.Spec.ImagePullJobTemplate)
	created, err := f.Shoal.AppsV1alpha1().ImageListPullJobs(f.Namespace).Create(ctx, l, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

func listJobState(l *v1alpha1.ImageListPullJob) string {
	if l == nil {
		return "(not seen)"
	}
	s := l.Status
	var failed []string
	for _, fi := range s.FailedImageStatuses {
		if fi != nil {
			failed = append(failed, fmt.Sprintf("%s(%s): %s", fi.Name, fi.ImagePullJob, fi.Message))
		}
	}
	return fmt.Sprintf("desired %d active %d completed %d succeeded %d completion %v failed %v",
		s.Desired, s.Active, s.Completed, s.Succeeded, s.CompletionTime != nil, failed)
}

func waitListJob(ctx context.Context, t *testing.T, f *framework.Framework, name string, timeout time.Duration, what string, done func(*v1alpha1.ImageListPullJob) bool) *v1alpha1.ImageListPullJob {
	t.Helper()
	var last *v1alpha1.ImageListPullJob
	start := time.Now()
	err := framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		l, err := f.Shoal.AppsV1alpha1().ImageListPullJobs(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = l
		return done(l), nil
	})
	require.NoError(t, err, "imagelistpulljob %s: %s: last status %s", name, what, listJobState(last))
	t.Logf("imagelistpulljob %s: %s after %.1fs: %s", name, what, time.Since(start).Seconds(), listJobState(last))
	return last
}

// childrenOf lists the ImagePullJobs that list controls.
func childrenOf(ctx context.Context, f *framework.Framework, list *v1alpha1.ImageListPullJob) ([]v1alpha1.ImagePullJob, error) {
	all, err := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []v1alpha1.ImagePullJob
	for _, j := range all.Items {
		if c := metav1.GetControllerOf(&j); c != nil && c.UID == list.UID {
			out = append(out, j)
		}
	}
	return out, nil
}

// waitListChildren waits (3 s, as OpenKruise) for one child ImagePullJob
// per image, controlled by the list job (kind ImageListPullJob, its name
// and UID), and returns them.
func waitListChildren(ctx context.Context, t *testing.T, f *framework.Framework, list *v1alpha1.ImageListPullJob, images []string) []v1alpha1.ImagePullJob {
	t.Helper()
	var children []v1alpha1.ImagePullJob
	err := framework.WaitFor(ctx, pullJobStartTimeout, func(ctx context.Context) (bool, error) {
		var err error
		children, err = childrenOf(ctx, f, list)
		return len(children) >= len(images), err
	})
	var got []string
	for _, c := range children {
		got = append(got, c.Spec.Image)
	}
	require.NoError(t, err, "children of imagelistpulljob %s: images %v", list.Name, got)
	sort.Strings(got)
	want := append([]string(nil), images...)
	sort.Strings(want)
	require.Equal(t, want, got, "one child per image")
	for _, c := range children {
		owner := metav1.GetControllerOf(&c)
		require.Equal(t, "ImageListPullJob", owner.Kind, "child %s", c.Name)
		require.Equal(t, list.Name, owner.Name, "child %s", c.Name)
		require.Equal(t, v1alpha1.SchemeGroupVersion.String(), owner.APIVersion, "child %s", c.Name)
	}
	return children
}

func waitListJobGone(ctx context.Context, t *testing.T, f *framework.Framework, name string, timeout time.Duration) {
	t.Helper()
	var last *v1alpha1.ImageListPullJob
	start := time.Now()
	err := framework.WaitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		l, err := f.Shoal.AppsV1alpha1().ImageListPullJobs(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		last = l
		return false, err
	})
	require.NoError(t, err, "imagelistpulljob %s not gone: %s", name, listJobState(last))
	t.Logf("imagelistpulljob %s gone after %.1fs", name, time.Since(start).Seconds())
}

// waitChildrenGone waits until every child job is gone, and then the
// coordinator's per-node view of each.
func waitChildrenGone(ctx context.Context, t *testing.T, f *framework.Framework, children []v1alpha1.ImagePullJob, timeout time.Duration) {
	t.Helper()
	for _, c := range children {
		waitPullJobGone(ctx, t, f, c.Name, timeout, "its list job is gone")
	}
	for _, c := range children {
		waitPullViewGone(ctx, t, f, c.Name)
	}
}
