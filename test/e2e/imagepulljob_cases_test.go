//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// pullCaseEnv is what the parallel cases of TestImagePullJobOpenKruise
// share: one registry that authenticates a user per case, and the nodes.
type pullCaseEnv struct {
	reg   *framework.Registry
	nodes []corev1.Node
	// users maps each case's user name to its password.
	users map[string]string
}

// Users of the shared registry, one per case, so that a case's password
// appears in no other case's secrets.
const (
	userSecretTTL       = "secret-ttl"
	userSecretCompleted = "secret-completed"
	userNeverUpdated    = "never-updated"
	userAlwaysAll       = "always-all"
	userAlwaysOne       = "always-one"
	userNeverAll        = "never-all"
	userSameImage       = "same-image"
)

// TestImagePullJobOpenKruise ports OpenKruise's ImagePullJob e2e cases
// (test/e2e/apps/v1beta1/pullimages.go) against a registry with basic
// auth. Where OpenKruise checked NodeImages and the secrets it synced into
// kruise-daemon-config, these check the coordinator's per-node view and
// that no Secret is copied anywhere. The cases run in parallel, each in its
// own namespace, with an image of its own (2 layers of 4 MiB).
func TestImagePullJobOpenKruise(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	env := &pullCaseEnv{nodes: nodes, users: map[string]string{}}
	for _, u := range []string{userSecretTTL, userSecretCompleted, userNeverUpdated, userAlwaysAll, userAlwaysOne, userNeverAll, userSameImage} {
		env.users[u] = randomSecret(t)
	}
	env.reg = framework.StartRegistry(t, framework.RegistryOptions{Users: env.users})

	for _, tc := range []struct {
		name string
		run  func(*testing.T, *pullCaseEnv)
	}{
		{"pull image with secret and ttl cleaned", func(t *testing.T, env *pullCaseEnv) { pullWithSecret(t, env, userSecretTTL, true) }},
		{"pull image with secret and completed", func(t *testing.T, env *pullCaseEnv) { pullWithSecret(t, env, userSecretCompleted, false) }},
		{"never completion pull job with updated pull secrets", neverWithUpdatedSecret},
		{"always job on all nodes", alwaysOnAllNodes},
		{"always job on one node", alwaysOnOneNode},
		{"never job on all nodes", neverOnAllNodes},
		{"two jobs pull the same image", twoJobsSameImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, env)
		})
	}
}

// pullWithSecret: OpenKruise's "pull image with secret and ttl cleaned"
// (ttl) and "pull image with secret and completed" (no TTL).
func pullWithSecret(t *testing.T, env *pullCaseEnv, user string, ttl bool) {
	f := newFramework(t)
	ctx := t.Context()
	pass := env.users[user]
	n := int32(len(env.nodes))
	ref := env.reg.Push(t, "openkruise/"+user, "v1", 4, 2)
	createSecret(ctx, t, f, registrySecret(t, "pull-secret", env.reg.Host, user, pass, false))

	createPullJob(ctx, t, f, pullJob("pull-with-secret", ref, func(j *v1alpha1.ImagePullJob) {
		j.Spec.PullSecrets = []string{"pull-secret"}
		setPull(&j.Spec.ImagePullJobTemplate, 4, 50, 2)
		j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always, ActiveDeadlineSeconds: ptr.To[int64](50)}
		if ttl {
			j.Spec.CompletionPolicy.TTLSecondsAfterFinished = ptr.To[int32](20)
		}
	}))
	waitPullJob(ctx, t, f, "pull-with-secret", pullJobStartTimeout, "desired == #nodes", func(j *v1alpha1.ImagePullJob) bool {
		return j.Status.Desired == n
	})
	requireNoSecretCopies(ctx, t, f, []string{"pull-secret"}, pass)

	done := waitPullJob(ctx, t, f, "pull-with-secret", pullJobTimeout, "completed", isComplete)
	require.Equal(t, n, done.Status.Succeeded, pullJobState(done))
	require.Zero(t, done.Status.Failed, pullJobState(done))
	require.Zero(t, done.Status.Active, pullJobState(done))
	require.Empty(t, done.Status.FailedNodes)
	require.Equal(t, "job has completed", done.Status.Message)
	require.NotNil(t, done.Status.StartTime)
	require.False(t, done.Status.CompletionTime.Before(done.Status.StartTime), pullJobState(done))
	requireViewPhases(ctx, t, f, "pull-with-secret", nodeNames(env.nodes), pullview.PhaseSucceeded)
	requirePulledBy(t, env.reg, ref, env.nodes, nodeNames(env.nodes)...)
	requireNoSecretCopies(ctx, t, f, []string{"pull-secret"}, pass)

	if ttl {
		waitPullJobGone(ctx, t, f, "pull-with-secret", pullJobTTLTimeout, "ttlSecondsAfterFinished 20")
		waitPullViewGone(ctx, t, f, "pull-with-secret")
		requireNoSecretCopies(ctx, t, f, []string{"pull-secret"}, pass)
		return
	}
	// Without a TTL the job stays, completed, with its per-node detail.
	deadline := time.Now().Add(25 * time.Second)
	for time.Now().Before(deadline) {
		j := getPullJob(ctx, t, f, "pull-with-secret")
		require.NotNil(t, j.Status.CompletionTime, pullJobState(j))
		require.Equal(t, n, j.Status.Succeeded, pullJobState(j))
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
	requireViewPhases(ctx, t, f, "pull-with-secret", nodeNames(env.nodes), pullview.PhaseSucceeded)
	requireNoSecretCopies(ctx, t, f, []string{"pull-secret"}, pass)
}

// neverWithUpdatedSecret: OpenKruise's "never completion pull job with
// updated pull secrets", made harder: the secret first holds a wrong
// password, so every node's pull is refused; once the secret is fixed the
// job succeeds on every node without being recreated.
func neverWithUpdatedSecret(t *testing.T, env *pullCaseEnv) {
	f := newFramework(t)
	ctx := t.Context()
	user := userNeverUpdated
	pass := env.users[user]
	wrong := randomSecret(t)
	n := int32(len(env.nodes))
	ref := env.reg.Push(t, "openkruise/"+user, "v1", 4, 2)
	createSecret(ctx, t, f, registrySecret(t, "pull-secret", env.reg.Host, user, wrong, false))

	// backoffLimit 6: a node retries for about a minute (1+2+4+8+16+30 s
	// between attempts), long enough to see the fixed secret either on a
	// retry or through a new round.
	createPullJob(ctx, t, f, pullJob("never-updated", ref, func(j *v1alpha1.ImagePullJob) {
		j.Spec.PullSecrets = []string{"pull-secret"}
		setPull(&j.Spec.ImagePullJobTemplate, int(n), 30, 6)
		j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never}
	}))
	waitPullJob(ctx, t, f, "never-updated", pullJobStartTimeout, "desired == #nodes", func(j *v1alpha1.ImagePullJob) bool {
		return j.Status.Desired == n
	})

	// Every node tried with the wrong password and was refused.
	refused := func() map[string]bool {
		out := map[string]bool{}
		for _, r := range env.reg.Rejections() {
			if r.User == user {
				out[r.Client] = true
			}
		}
		return out
	}
	err := framework.WaitFor(ctx, time.Minute, func(context.Context) (bool, error) {
		got := refused()
		for _, node := range env.nodes {
			if !got[nodeIP(node)] {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "not every node tried the wrong password; refused clients: %v", refused())
	j := getPullJob(ctx, t, f, "never-updated")
	require.Zero(t, j.Status.Succeeded, pullJobState(j))
	view, verr := pullJobView(ctx, f, "never-updated")
	t.Logf("wrong password refused on every node; status %s; per-node view %s (%v)", pullJobState(j), viewState(view), verr)
	requirePulledBy(t, env.reg, ref, env.nodes)

	// Fix the secret.
	s, err := f.Kube.CoreV1().Secrets(f.Namespace).Get(ctx, "pull-secret", metav1.GetOptions{})
	require.NoError(t, err)
	s.Data = registrySecret(t, "pull-secret", env.reg.Host, user, pass, false).Data
	_, err = f.Kube.CoreV1().Secrets(f.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	t.Log("secret fixed")

	done := waitPullJob(ctx, t, f, "never-updated", pullJobTimeout, "succeeded == #nodes after the secret was fixed", func(j *v1alpha1.ImagePullJob) bool {
		return j.Status.Succeeded == n
	})
	require.Nil(t, done.Status.CompletionTime, "a Never job never completes: %s", pullJobState(done))
	require.True(t, strings.HasPrefix(done.Status.Message, "job is running"), pullJobState(done))
	requirePulledBy(t, env.reg, ref, env.nodes, nodeNames(env.nodes)...)
	requireNoSecretCopies(ctx, t, f, []string{"pull-secret"}, pass, wrong)

	require.NoError(t, f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).Delete(ctx, "never-updated", metav1.DeleteOptions{}))
	waitPullJobGone(ctx, t, f, "never-updated", 30*time.Second, "deleted")
	waitPullViewGone(ctx, t, f, "never-updated")
	requireNoSecretCopies(ctx, t, f, []string{"pull-secret"}, pass, wrong)
}

// alwaysOnAllNodes: OpenKruise's "always job on all real nodes", with a
// legacy kubernetes.io/dockercfg secret.
func alwaysOnAllNodes(t *testing.T, env *pullCaseEnv) {
	f := newFramework(t)
	ctx := t.Context()
	user := userAlwaysAll
	n := int32(len(env.nodes))
	ref := env.reg.Push(t, "openkruise/"+user, "v1", 4, 2)
	createSecret(ctx, t, f, registrySecret(t, "dockercfg", env.reg.Host, user, env.users[user], true))
	createPullJob(ctx, t, f, pullJob("always-all", ref, func(j *v1alpha1.ImagePullJob) {
		j.Spec.PullSecrets = []string{"dockercfg"}
		setPull(&j.Spec.ImagePullJobTemplate, int(n), 60, 2)
		j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always, TTLSecondsAfterFinished: ptr.To[int32](20)}
	}))
	done := waitPullJob(ctx, t, f, "always-all", pullJobTimeout, "completed", isComplete)
	require.Equal(t, n, done.Status.Desired, pullJobState(done))
	require.Equal(t, n, done.Status.Succeeded, pullJobState(done))
	require.Zero(t, done.Status.Failed, pullJobState(done))
	require.Equal(t, "job has completed", done.Status.Message)
	requirePulledBy(t, env.reg, ref, env.nodes, nodeNames(env.nodes)...)
	waitPullJobGone(ctx, t, f, "always-all", pullJobTTLTimeout, "ttlSecondsAfterFinished 20")
	waitPullViewGone(ctx, t, f, "always-all")
	requireNoSecretCopies(ctx, t, f, []string{"dockercfg"}, env.users[user])
}

// alwaysOnOneNode: OpenKruise's "always job on one real node"
// (selector.names): only that node pulls.
func alwaysOnOneNode(t *testing.T, env *pullCaseEnv) {
	f := newFramework(t)
	ctx := t.Context()
	user := userAlwaysOne
	node := env.nodes[0].Name
	ref := env.reg.Push(t, "openkruise/"+user, "v1", 4, 2)
	createSecret(ctx, t, f, registrySecret(t, "pull-secret", env.reg.Host, user, env.users[user], false))
	createPullJob(ctx, t, f, pullJob("always-one", ref, func(j *v1alpha1.ImagePullJob) {
		j.Spec.PullSecrets = []string{"pull-secret"}
		j.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{Names: []string{node}}
		setPull(&j.Spec.ImagePullJobTemplate, 1, 60, 2)
		j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Always}
	}))
	waitPullJob(ctx, t, f, "always-one", pullJobStartTimeout, "desired == 1", func(j *v1alpha1.ImagePullJob) bool {
		return j.Status.Desired == 1
	})
	done := waitPullJob(ctx, t, f, "always-one", pullJobTimeout, "completed", isComplete)
	require.Equal(t, int32(1), done.Status.Desired, pullJobState(done))
	require.Equal(t, int32(1), done.Status.Succeeded, pullJobState(done))
	require.Zero(t, done.Status.Failed, pullJobState(done))
	requireViewPhases(ctx, t, f, "always-one", []string{node}, pullview.PhaseSucceeded)
	requirePulledBy(t, env.reg, ref, env.nodes, node)

	require.NoError(t, f.Shoal.AppsV1alpha1().ImagePullJobs(f.Namespace).Delete(ctx, "always-one", metav1.DeleteOptions{}))
	waitPullJobGone(ctx, t, f, "always-one", 30*time.Second, "deleted")
	waitPullViewGone(ctx, t, f, "always-one")
}

// neverOnAllNodes: OpenKruise's "never job on all nodes" (no selector).
func neverOnAllNodes(t *testing.T, env *pullCaseEnv) {
	f := newFramework(t)
	ctx := t.Context()
	user := userNeverAll
	n := int32(len(env.nodes))
	ref := env.reg.Push(t, "openkruise/"+user, "v1", 4, 2)
	createSecret(ctx, t, f, registrySecret(t, "pull-secret", env.reg.Host, user, env.users[user], false))
	createPullJob(ctx, t, f, pullJob("never-all", ref, func(j *v1alpha1.ImagePullJob) {
		j.Spec.PullSecrets = []string{"pull-secret"}
		setPull(&j.Spec.ImagePullJobTemplate, int(n), 60, 2)
		j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never}
	}))
	done := waitPullJob(ctx, t, f, "never-all", 120*time.Second, "succeeded == #nodes", func(j *v1alpha1.ImagePullJob) bool {
		return j.Status.Succeeded == n
	})
	require.Equal(t, n, done.Status.Desired, pullJobState(done))
	require.Nil(t, done.Status.CompletionTime, pullJobState(done))
	requirePulledBy(t, env.reg, ref, env.nodes, nodeNames(env.nodes)...)
	// Still running (never completes) a little later.
	time.Sleep(5 * time.Second)
	j := getPullJob(ctx, t, f, "never-all")
	require.Nil(t, j.Status.CompletionTime, pullJobState(j))
	require.Equal(t, n, j.Status.Succeeded, pullJobState(j))
	require.True(t, strings.HasPrefix(j.Status.Message, "job is running"), pullJobState(j))
	requireViewPhases(ctx, t, f, "never-all", nodeNames(env.nodes), pullview.PhaseSucceeded)
}

// twoJobsSameImage: OpenKruise's "two jobs pull the same image" (Never,
// one node): the second job, created once the first succeeded, succeeds
// too, without the node downloading the layers again.
func twoJobsSameImage(t *testing.T, env *pullCaseEnv) {
	f := newFramework(t)
	ctx := t.Context()
	user := userSameImage
	node := env.nodes[len(env.nodes)-1].Name
	ref := env.reg.Push(t, "openkruise/"+user, "v1", 4, 2)
	createSecret(ctx, t, f, registrySecret(t, "pull-secret", env.reg.Host, user, env.users[user], false))
	job := func(name string) *v1alpha1.ImagePullJob {
		return pullJob(name, ref, func(j *v1alpha1.ImagePullJob) {
			j.Spec.PullSecrets = []string{"pull-secret"}
			j.Spec.Selector = &v1alpha1.ImagePullJobNodeSelector{Names: []string{node}}
			setPull(&j.Spec.ImagePullJobTemplate, 1, 60, 2)
			j.Spec.CompletionPolicy = v1alpha1.CompletionPolicy{Type: v1alpha1.Never}
		})
	}
	succeededOne := func(j *v1alpha1.ImagePullJob) bool { return j.Status.Succeeded == 1 }

	createPullJob(ctx, t, f, job("job1"))
	waitPullJob(ctx, t, f, "job1", 60*time.Second, "succeeded 1", succeededOne)
	requirePulledBy(t, env.reg, ref, env.nodes, node)
	before := layerBytesTo(t, env.reg, ref, env.nodes)[node]

	createPullJob(ctx, t, f, job("job2"))
	done := waitPullJob(ctx, t, f, "job2", 60*time.Second, "succeeded 1", succeededOne)
	require.Equal(t, int32(1), done.Status.Desired, pullJobState(done))
	require.Nil(t, done.Status.CompletionTime, pullJobState(done))
	v := requireViewPhases(ctx, t, f, "job2", []string{node}, pullview.PhaseSucceeded)
	t.Logf("job2's per-node view: %s", viewState(v))
	require.Equal(t, before, layerBytesTo(t, env.reg, ref, env.nodes)[node], "the node downloaded the layers again for job2")
	j1 := getPullJob(ctx, t, f, "job1")
	require.Equal(t, int32(1), j1.Status.Succeeded, "job1 after job2: %s", pullJobState(j1))
}
