//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// TestImagePullJobAdmission: through the real apiserver, the webhook
// normalizes image references and defaults parallelism, and refuses
// references that do not parse with a message naming the field.
func TestImagePullJobAdmission(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	requireShoal(ctx, t, f)
	jobs := f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace)

	created, err := jobs.Create(ctx, &v1alpha1.ImagePullJob{
		ObjectMeta: metav1.ObjectMeta{Name: "short"},
		Spec:       v1alpha1.ImagePullJobSpec{Image: "nginx"},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	require.Equal(t, "index.docker.io/library/nginx:latest", created.Spec.Image)
	require.Equal(t, ptrIntOrString(1), created.Spec.Parallelism)

	_, err = jobs.Create(ctx, &v1alpha1.ImagePullJob{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec:       v1alpha1.ImagePullJobSpec{Image: "Nginx:latest"},
	}, metav1.CreateOptions{})
	require.Error(t, err)
	require.Contains(t, err.Error(), `spec.image: "Nginx:latest" is not a valid image reference`)
	t.Logf("refused: %v", err)

	lists := f.Shoal.AppsV1alpha1().ImageListPullJobs(f.Namespace)
	_, err = lists.Create(ctx, &v1alpha1.ImageListPullJob{
		ObjectMeta: metav1.ObjectMeta{Name: "dup"},
		Spec:       v1alpha1.ImageListPullJobSpec{Images: []string{"nginx:latest", "docker.io/library/nginx"}},
	}, metav1.CreateOptions{})
	require.Error(t, err)
	require.Contains(t, err.Error(), `spec.images[1]: "docker.io/library/nginx" is the same image as spec.images[0]`)
	t.Logf("refused: %v", err)
}

func ptrIntOrString(v int) *intstr.IntOrString {
	p := intstr.FromInt32(int32(v))
	return &p
}
