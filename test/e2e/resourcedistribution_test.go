//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// rdTimeout bounds one ResourceDistribution step.
const rdTimeout = time.Minute

// rdSecret is the Secret the distributions of these tests copy.
const rdSecret = "resourcedistribution-e2e-test-secret"

// rdFixture creates namespaces named prefix-<suffix> with labels (removed
// at the end) and distributions (deleted at the end), all cluster-scoped,
// under a random prefix so parallel tests never meet.
type rdFixture struct {
	t      *testing.T
	f      *framework.Framework
	ctx    context.Context
	prefix string
}

func newRDFixture(t *testing.T) *rdFixture {
	f := newFramework(t)
	// Short, so prefix-suffix stays a valid namespace name and label key.
	return &rdFixture{t: t, f: f, ctx: t.Context(), prefix: "rd-" + utilrand.String(6)}
}

func (x *rdFixture) namespace(suffix string, labels map[string]string) string {
	x.t.Helper()
	name := x.prefix + "-" + suffix
	_, err := x.f.Kube.CoreV1().Namespaces().Create(x.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(x.t, err)
	x.t.Cleanup(func() {
		_ = x.f.Kube.CoreV1().Namespaces().Delete(context.WithoutCancel(x.ctx), name, metav1.DeleteOptions{})
	})
	return name
}

func (x *rdFixture) distribution(name string, targets v1alpha1.ResourceDistributionTargets) *v1alpha1.ResourceDistribution {
	x.t.Helper()
	rd := &v1alpha1.ResourceDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: x.prefix + "-" + name},
		Spec: v1alpha1.ResourceDistributionSpec{
			Resource: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"` + rdSecret + `"},"type":"Opaque","data":{"test":"dGVzdA=="}}`)},
			Targets:  targets,
		},
	}
	return x.create(rd)
}

// create creates rd at the test's API version and deletes it at the end.
func (x *rdFixture) create(rd *v1alpha1.ResourceDistribution) *v1alpha1.ResourceDistribution {
	x.t.Helper()
	rd, err := rds(x.t, x.f).Create(x.ctx, rd, metav1.CreateOptions{})
	require.NoError(x.t, err)
	x.t.Cleanup(func() {
		_ = rds(x.t, x.f).Delete(context.WithoutCancel(x.ctx), rd.Name, metav1.DeleteOptions{})
	})
	return rd
}

// secret returns the copy in ns, nil when there is none.
func (x *rdFixture) secret(ns string) *corev1.Secret {
	x.t.Helper()
	s, err := x.f.Kube.CoreV1().Secrets(ns).Get(x.ctx, rdSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(x.t, err)
	return s
}

// waitCopies waits until exactly the namespaces in want (of those in
// watched) hold a copy of rdSecret written by rd.
func (x *rdFixture) waitCopies(rd string, watched, want []string) {
	x.t.Helper()
	x.waitCopiesOf(rd, watched, want, func(ns string) metav1.Object {
		if s := x.secret(ns); s != nil {
			return s
		}
		return nil
	})
}

// waitCopiesOf waits until exactly the namespaces in want (of those in
// watched) hold a copy written by rd, get returning a namespace's object
// (nil: none, or not yet as wanted).
func (x *rdFixture) waitCopiesOf(rd string, watched, want []string, get func(ns string) metav1.Object) {
	x.t.Helper()
	var have []string
	err := framework.WaitFor(x.ctx, rdTimeout, func(context.Context) (bool, error) {
		have = nil
		for _, ns := range watched {
			if o := get(ns); o != nil && o.GetDeletionTimestamp() == nil && o.GetAnnotations()[wellknown.AnnotationResourceDistributionFrom] == rd {
				have = append(have, ns)
			}
		}
		return slices.Equal(have, want), nil
	})
	require.NoError(x.t, err, "copies of %s: want %v, have %v", rd, want, have)
}

func (x *rdFixture) waitStatus(name, what string, done func(*v1alpha1.ResourceDistribution) bool) *v1alpha1.ResourceDistribution {
	x.t.Helper()
	return waitObject(x.ctx, x.t, rds(x.t, x.f), rdTimeout, name, what,
		func(rd *v1alpha1.ResourceDistribution) bool {
			return rd.Status.ObservedGeneration == rd.Generation && done(rd)
		},
		func(rd *v1alpha1.ResourceDistribution) any { return rd.Status })
}

func nsList(names ...string) v1alpha1.ResourceDistributionTargetNamespaces {
	var out v1alpha1.ResourceDistributionTargetNamespaces
	for _, n := range names {
		out.List = append(out.List, v1alpha1.ResourceDistributionNamespace{Name: n})
	}
	return out
}

// TestResourceDistribution ports OpenKruise's three ResourceDistribution
// cases [ResourceDistributionInject]: the namespace event checker
// (namespaces created or relabelled into the selector get a copy), the
// resource event checker (a copy edited or deleted by hand is written
// back), and the functionality checker (targets, the hashcode annotation,
// the six conditions, a deleted included namespace in NamespaceNotExists,
// targets changed, copies gone with the distribution). Plus: seed 000's
// "sample" distribution, and an object of the same name the distribution
// did not write is left alone and reported in ConflictOccurred.
func TestResourceDistribution(t *testing.T) {
	t.Parallel()

	t.Run("namespace event checker", func(t *testing.T) {
		t.Parallel()
		x := newRDFixture(t)
		key := x.prefix + "-group"
		updated := x.namespace("update-matched", nil)
		rd := x.distribution("ns-events", v1alpha1.ResourceDistributionTargets{
			NamespaceLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{key: "seven"}},
		})
		created := x.namespace("create-matched", map[string]string{key: "seven"})
		n, err := x.f.Kube.CoreV1().Namespaces().Get(x.ctx, updated, metav1.GetOptions{})
		require.NoError(t, err)
		n.Labels[key] = "seven"
		_, err = x.f.Kube.CoreV1().Namespaces().Update(x.ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
		x.waitCopies(rd.Name, []string{created, updated}, []string{created, updated})
	})

	t.Run("resource event checker", func(t *testing.T) {
		t.Parallel()
		x := newRDFixture(t)
		ns1, ns2 := x.namespace("1", nil), x.namespace("2", nil)
		rd := x.distribution("res-events", v1alpha1.ResourceDistributionTargets{IncludedNamespaces: nsList(ns1, ns2)})
		x.waitCopies(rd.Name, []string{ns1, ns2}, []string{ns1, ns2})

		s := x.secret(ns1)
		s.StringData = map[string]string{"updated": "yes"}
		_, err := x.f.Kube.CoreV1().Secrets(ns1).Update(x.ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
		err = framework.WaitFor(x.ctx, rdTimeout, func(context.Context) (bool, error) {
			s := x.secret(ns1)
			return s != nil && len(s.Data["updated"]) == 0 && string(s.Data["test"]) == "test", nil
		})
		require.NoError(t, err, "an edited copy is written back")

		require.NoError(t, x.f.Kube.CoreV1().Secrets(ns1).Delete(x.ctx, rdSecret, metav1.DeleteOptions{}))
		x.waitCopies(rd.Name, []string{ns1, ns2}, []string{ns1, ns2})
	})

	t.Run("resourcedistribution functionality checker", func(t *testing.T) {
		t.Parallel()
		x := newRDFixture(t)
		group := x.prefix + "-rd-group"
		develop := map[string]string{group: "one", "environment": "develop"}
		ns1, ns2, ns3 := x.namespace("1", develop), x.namespace("2", develop), x.namespace("3", develop)
		ns4 := x.namespace("4", map[string]string{group: "one", "environment": "test"})
		ns5 := x.namespace("5", map[string]string{group: "two", "environment": "test"})
		all := []string{ns1, ns2, ns3, ns4, ns5}
		rd := x.distribution("functionality", v1alpha1.ResourceDistributionTargets{
			IncludedNamespaces:     nsList(ns1),
			ExcludedNamespaces:     nsList(ns3),
			NamespaceLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{group: "one"}},
		})
		x.waitCopies(rd.Name, all, []string{ns1, ns2, ns4})
		got := x.waitStatus(rd.Name, "3 copies", func(rd *v1alpha1.ResourceDistribution) bool { return rd.Status.Succeeded == 3 })
		require.EqualValues(t, 3, got.Status.Desired)
		sum := sha256.Sum256(got.Spec.Resource.Raw)
		for _, ns := range []string{ns1, ns2, ns4} {
			require.Equal(t, hex.EncodeToString(sum[:]), x.secret(ns).Annotations[wellknown.AnnotationResourceDistributionHashCode], ns)
		}
		require.Len(t, got.Status.Conditions, 6)
		for _, c := range got.Status.Conditions {
			require.Equal(t, v1alpha1.ResourceDistributionConditionFalse, c.Status, c.Type)
		}

		// An included namespace is deleted.
		require.NoError(t, x.f.Kube.CoreV1().Namespaces().Delete(x.ctx, ns1, metav1.DeleteOptions{}))
		got = x.waitStatus(rd.Name, "the deleted namespace reported", func(rd *v1alpha1.ResourceDistribution) bool {
			return len(rd.Status.Conditions) == 6 && len(rd.Status.Conditions[5].FailedNamespaces) == 1
		})
		require.Equal(t, v1alpha1.ResourceDistributionNamespaceNotExists, got.Status.Conditions[5].Type)
		require.Equal(t, got.Status.Desired, got.Status.Succeeded)

		// The targets change.
		updateObject(x.ctx, t, rds(t, x.f), rd.Name, func(cur *v1alpha1.ResourceDistribution) {
			cur.Spec.Targets.IncludedNamespaces = nsList(ns2)
			cur.Spec.Targets.NamespaceLabelSelector.MatchLabels = map[string]string{group: "two"}
		})
		x.waitCopies(rd.Name, all[1:], []string{ns2, ns5})
		x.waitStatus(rd.Name, "2 copies", func(rd *v1alpha1.ResourceDistribution) bool { return rd.Status.Succeeded == 2 })

		// The distribution goes, and its copies with it.
		require.NoError(t, rds(t, x.f).Delete(x.ctx, rd.Name, metav1.DeleteOptions{}))
		x.waitCopies(rd.Name, all[1:], nil)
	})

	// Seed 000's "sample" (../testdata/seed-examples/000-16.yaml, the
	// seed's elided data and selector filled in as INDEX.md says): the
	// game-demo ConfigMap goes to the namespaces labelled group=test and
	// follows their labels, the source's data and the distribution's
	// deletion. The name is prefixed, as the distribution is
	// cluster-scoped; no other test labels a namespace group=test.
	t.Run("seed 000 sample", func(t *testing.T) {
		t.Parallel()
		x := newRDFixture(t)
		group := map[string]string{"group": "test"}
		in1, in2, out := x.namespace("in1", group), x.namespace("in2", group), x.namespace("out", nil)
		all := []string{in1, in2, out}
		var rd v1alpha1.ResourceDistribution
		readSeedExample(t, x.f, "000-16.yaml", &rd)
		rd.Name = x.prefix + "-" + rd.Name
		x.create(&rd)
		lives := func(want string) func(ns string) metav1.Object {
			return func(ns string) metav1.Object {
				cm, err := x.f.Kube.CoreV1().ConfigMaps(ns).Get(x.ctx, "game-demo", metav1.GetOptions{})
				if err != nil || cm.Data["player_initial_lives"] != want {
					return nil
				}
				return cm
			}
		}
		x.waitCopiesOf(rd.Name, all, []string{in1, in2}, lives("3"))
		x.waitStatus(rd.Name, "2 copies", func(rd *v1alpha1.ResourceDistribution) bool {
			return rd.Status.Desired == 2 && rd.Status.Succeeded == 2
		})

		// The labels move: out joins, in1 leaves and loses its copy.
		for ns, v := range map[string]*string{out: ptr.To("test"), in1: nil} {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"group": v}}})
			require.NoError(t, err)
			_, err = x.f.Kube.CoreV1().Namespaces().Patch(x.ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{})
			require.NoError(t, err)
		}
		x.waitCopiesOf(rd.Name, all, []string{in2, out}, lives("3"))

		// The source changes: every copy follows.
		updateObject(x.ctx, t, rds(t, x.f), rd.Name, func(cur *v1alpha1.ResourceDistribution) {
			require.Contains(t, string(cur.Spec.Resource.Raw), `"player_initial_lives":"3"`)
			cur.Spec.Resource.Raw = []byte(strings.Replace(string(cur.Spec.Resource.Raw), `"player_initial_lives":"3"`, `"player_initial_lives":"5"`, 1))
		})
		x.waitCopiesOf(rd.Name, all, []string{in2, out}, lives("5"))

		// The distribution goes, and its copies with it.
		require.NoError(t, rds(t, x.f).Delete(x.ctx, rd.Name, metav1.DeleteOptions{}))
		x.waitCopiesOf(rd.Name, all, nil, func(ns string) metav1.Object {
			cm, err := x.f.Kube.CoreV1().ConfigMaps(ns).Get(x.ctx, "game-demo", metav1.GetOptions{})
			if err != nil {
				return nil
			}
			return cm
		})
	})

	t.Run("a same-named object it did not write is a conflict", func(t *testing.T) {
		t.Parallel()
		x := newRDFixture(t)
		mine, theirs := x.namespace("mine", nil), x.namespace("theirs", nil)
		_, err := x.f.Kube.CoreV1().Secrets(theirs).Create(x.ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: rdSecret}, StringData: map[string]string{"owner": "someone else"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		rd := x.distribution("conflict", v1alpha1.ResourceDistributionTargets{IncludedNamespaces: nsList(mine, theirs)})
		got := x.waitStatus(rd.Name, "the conflict reported", func(rd *v1alpha1.ResourceDistribution) bool {
			return len(rd.Status.Conditions) == 6 && rd.Status.Conditions[4].Status == v1alpha1.ResourceDistributionConditionTrue
		})
		require.Equal(t, v1alpha1.ResourceDistributionConflictOccurred, got.Status.Conditions[4].Type)
		require.Equal(t, []string{theirs}, got.Status.Conditions[4].FailedNamespaces)
		require.EqualValues(t, 1, got.Status.Succeeded)
		require.EqualValues(t, 1, got.Status.Failed)
		require.Equal(t, "someone else", string(x.secret(theirs).Data["owner"]), "left alone")
	})
}

// rdConfigMap is a ConfigMap manifest for spec.resource.
func rdConfigMap(name string, data map[string]string) runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]string{"name": name}, "data": data})
	return runtime.RawExtension{Raw: raw}
}

// configMapIn returns the ConfigMap name in ns, nil when there is none.
func (x *rdFixture) configMapIn(ns, name string) *corev1.ConfigMap {
	x.t.Helper()
	cm, err := x.f.Kube.CoreV1().ConfigMaps(ns).Get(x.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(x.t, err)
	return cm
}

// waitConfigMaps waits until each namespace of want holds ConfigMap name.
func (x *rdFixture) waitConfigMaps(name string, want ...string) {
	x.t.Helper()
	err := framework.WaitFor(x.ctx, 2*time.Minute, func(context.Context) (bool, error) {
		for _, ns := range want {
			if x.configMapIn(ns, name) == nil {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(x.t, err, "ConfigMap %s in %v", name, want)
}

// requireNoConfigMap checks for 10 s that ns holds no ConfigMap name
// (OpenKruise's Consistently).
func (x *rdFixture) requireNoConfigMap(ns, name, why string) {
	x.t.Helper()
	requireHolds(x.ctx, x.t, 10*time.Second, why, func(context.Context) (bool, string, error) {
		return x.configMapIn(ns, name) == nil, "ConfigMap " + name + " in " + ns, nil
	})
}

// TestResourceDistributionV1beta1 ports the cases OpenKruise's v1beta1
// ResourceDistribution suite adds to the three it shares with v1alpha1
// (those run at v1beta1 under TestV1beta1/TestResourceDistribution):
// cross-version, namespaceSelector and the beta API smoke test, each
// through the v1beta1 client. "allNamespaces excludes system namespaces
// by default" is TestResourceDistributionAllNamespaces (serial: it copies
// into every namespace of the cluster).
func TestResourceDistributionV1beta1(t *testing.T) {
	t.Parallel()

	t.Run("cross-version compatibility: v1alpha1 create, v1beta1 read", func(t *testing.T) {
		t.Parallel()
		x := newRDFixture(t)
		ns := x.namespace("1", nil)
		rd := x.create(&v1alpha1.ResourceDistribution{
			ObjectMeta: metav1.ObjectMeta{Name: x.prefix},
			Spec: v1alpha1.ResourceDistributionSpec{
				Resource: rdConfigMap("rd-cross-version-cm", map[string]string{"k": "v"}),
				Targets:  v1alpha1.ResourceDistributionTargets{IncludedNamespaces: nsList(ns)},
			},
		})
		got := waitObject(x.ctx, t, x.f.Shoal.AppsV1beta1().ResourceDistributions(), rdTimeout, rd.Name, "readable at v1beta1",
			func(b *v1beta1.ResourceDistribution) bool { return len(b.Spec.Targets.IncludedNamespaces.List) > 0 },
			func(b *v1beta1.ResourceDistribution) any { return b.Spec.Targets })
		require.Empty(t, got.Spec.Targets.NamespaceSelector.MatchLabels)
		require.Empty(t, got.Spec.Targets.NamespaceSelector.MatchExpressions)
		require.Equal(t, ns, got.Spec.Targets.IncludedNamespaces.List[0].Name)
		x.waitConfigMaps("rd-cross-version-cm", ns)
		require.NoError(t, x.f.Shoal.AppsV1beta1().ResourceDistributions().Delete(x.ctx, rd.Name, metav1.DeleteOptions{}))
	})

	t.Run("distributes resources by namespaceSelector label", func(t *testing.T) {
		t.Parallel()
		x := newRDFixture(t)
		// OpenKruise's label is env; the prefix keeps other tests'
		// namespaces out of the selector.
		key := x.prefix + "-env"
		match1, match2 := x.namespace("match-1", map[string]string{key: "staging"}), x.namespace("match-2", map[string]string{key: "staging"})
		noMatch := x.namespace("no-match", map[string]string{key: "prod"})
		rd := &v1beta1.ResourceDistribution{
			ObjectMeta: metav1.ObjectMeta{Name: x.prefix},
			Spec: v1beta1.ResourceDistributionSpec{
				Resource: rdConfigMap("rd-selector-cm", map[string]string{"env": "staging"}),
				Targets:  v1beta1.ResourceDistributionTargets{NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{key: "staging"}}},
			},
		}
		_, err := x.f.Shoal.AppsV1beta1().ResourceDistributions().Create(x.ctx, rd, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = x.f.Shoal.AppsV1beta1().ResourceDistributions().Delete(context.WithoutCancel(x.ctx), rd.Name, metav1.DeleteOptions{})
		})
		x.waitConfigMaps("rd-selector-cm", match1, match2)
		x.requireNoConfigMap(noMatch, "rd-selector-cm", "a namespace the selector does not match gets no copy")
	})

	t.Run("should distribute resources with the beta api", func(t *testing.T) {
		t.Parallel()
		x := newRDFixture(t)
		ns1, ns2, ns3 := x.namespace("1", nil), x.namespace("2", nil), x.namespace("3", nil)
		rd := &v1beta1.ResourceDistribution{
			ObjectMeta: metav1.ObjectMeta{Name: x.prefix},
			Spec: v1beta1.ResourceDistributionSpec{
				Resource: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"resourcedistribution-e2e-beta-secret"},"type":"Opaque","data":{"test":"dGVzdA=="}}`)},
				Targets: v1beta1.ResourceDistributionTargets{
					IncludedNamespaces: v1beta1.ResourceDistributionTargetNamespaces{List: []v1beta1.ResourceDistributionNamespace{{Name: ns1}, {Name: ns2}}},
					ExcludedNamespaces: v1beta1.ResourceDistributionTargetNamespaces{List: []v1beta1.ResourceDistributionNamespace{{Name: ns3}}},
				},
			},
		}
		_, err := x.f.Shoal.AppsV1beta1().ResourceDistributions().Create(x.ctx, rd, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = x.f.Shoal.AppsV1beta1().ResourceDistributions().Delete(context.WithoutCancel(x.ctx), rd.Name, metav1.DeleteOptions{})
		})
		waitObject(x.ctx, t, x.f.Shoal.AppsV1beta1().ResourceDistributions(), 2*time.Minute, rd.Name, "2 desired, 2 succeeded",
			func(b *v1beta1.ResourceDistribution) bool { return b.Status.Succeeded == 2 && b.Status.Desired == 2 },
			func(b *v1beta1.ResourceDistribution) any { return b.Status })
		err = framework.WaitFor(x.ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
			for _, ns := range []string{ns1, ns2} {
				s, err := x.f.Kube.CoreV1().Secrets(ns).Get(ctx, "resourcedistribution-e2e-beta-secret", metav1.GetOptions{})
				if err != nil || s.Annotations[wellknown.AnnotationResourceDistributionFrom] != rd.Name {
					return false, nil
				}
			}
			return true, nil
		})
		require.NoError(t, err, "the copies in %s and %s, from %s", ns1, ns2, rd.Name)
		_, err = x.f.Kube.CoreV1().Secrets(ns3).Get(x.ctx, "resourcedistribution-e2e-beta-secret", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "no copy in the excluded namespace: %v", err)
	})
}

// TestResourceDistributionAllNamespaces ports OpenKruise's v1beta1
// "allNamespaces excludes system namespaces by default": a ConfigMap
// distributed to allNamespaces reaches the test's namespaces and never
// kube-system or kube-public.
//
// Parallel: it copies a ConfigMap of a name of its own into every
// namespace, other tests' included; no test lists the ConfigMaps of its
// namespace, and the copies go with the distribution.
func TestResourceDistributionAllNamespaces(t *testing.T) {
	t.Parallel()
	x := newRDFixture(t)
	ns1, ns2 := x.namespace("1", nil), x.namespace("2", nil)
	name := x.prefix + "-cm"
	rd := &v1beta1.ResourceDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: x.prefix},
		Spec: v1beta1.ResourceDistributionSpec{
			Resource: rdConfigMap(name, map[string]string{"key": "value"}),
			Targets:  v1beta1.ResourceDistributionTargets{AllNamespaces: true},
		},
	}
	_, err := x.f.Shoal.AppsV1beta1().ResourceDistributions().Create(x.ctx, rd, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = x.f.Shoal.AppsV1beta1().ResourceDistributions().Delete(context.WithoutCancel(x.ctx), rd.Name, metav1.DeleteOptions{})
	})
	x.waitConfigMaps(name, ns1, ns2)
	x.requireNoConfigMap("kube-system", name, "kube-system must be excluded from allNamespaces")
	x.requireNoConfigMap("kube-public", name, "kube-public must be excluded from allNamespaces")
}
