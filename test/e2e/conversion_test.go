//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/conversion"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/crdvalidation"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// applyExample server-side applies (as kubectl apply --server-side does) a
// test/testdata manifest in the test's namespace and returns what the
// apiserver stored.
func applyExample(t *testing.T, f *framework.Framework, path string) *unstructured.Unstructured {
	t.Helper()
	objs, err := crdvalidation.ReadManifests(path)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	obj := objs[0]
	obj.SetNamespace(f.Namespace)
	res, _, err := f.ResourceFor(obj)
	require.NoError(t, err)
	applied, err := res.Apply(t.Context(), obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
	require.NoError(t, err, "apply %s", path)
	return applied
}

// getAt reads obj's kind and name at apiVersion through the dynamic client.
func getAt(t *testing.T, f *framework.Framework, obj *unstructured.Unstructured, apiVersion string) *unstructured.Unstructured {
	t.Helper()
	ref := &unstructured.Unstructured{}
	ref.SetAPIVersion(apiVersion)
	ref.SetKind(obj.GetKind())
	ref.SetNamespace(obj.GetNamespace())
	res, _, err := f.ResourceFor(ref)
	require.NoError(t, err)
	got, err := res.Get(t.Context(), obj.GetName(), metav1.GetOptions{})
	require.NoError(t, err, "get %s %s at %s", obj.GetKind(), obj.GetName(), apiVersion)
	return got
}

// TestConversionV1beta1CloneSet: v1beta1 CloneSets from OpenKruise's
// current docs apply unchanged; a get at each version shows the same object
// (the v1alpha1 answer is what the webhook's conversion of the v1beta1 one
// gives); and a v1alpha1 client that edits the object keeps the v1beta1
// fields v1alpha1 has no place for.
func TestConversionV1beta1CloneSet(t *testing.T) {
	t.Parallel()
	for _, example := range []string{"cloneset-inplace-rolling.yaml", "cloneset-ondelete.yaml", "cloneset-pvc-reuse.yaml"} {
		t.Run(example, func(t *testing.T) {
			t.Parallel()
			f := newFramework(t)
			applied := applyExample(t, f, "../testdata/v1beta1/"+example)
			beta := getAt(t, f, applied, "apps.kruise.io/v1beta1")
			alpha := getAt(t, f, applied, "apps.kruise.io/v1alpha1")
			want, err := conversion.Convert(beta, "apps.kruise.io/v1alpha1")
			require.NoError(t, err)
			require.Equal(t, want.Object, alpha.Object, "the v1alpha1 view is the conversion of the v1beta1 one")
		})
	}

	t.Run("v1alpha1 edit keeps v1beta1-only fields", func(t *testing.T) {
		t.Parallel()
		f := newFramework(t)
		ctx := t.Context()
		applyExample(t, f, "../testdata/v1beta1/cloneset-ondelete.yaml")
		alphas := f.Shoal.AppsV1alpha1().CloneSets(f.Namespace)
		// The CloneSet controller writes status meanwhile: read, edit and
		// write again on a conflict, as any client does.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			alpha, err := alphas.Get(ctx, "batch-workers", metav1.GetOptions{})
			if err != nil {
				return err
			}
			// v1alpha1 has no OnDelete: its readers see a paused CloneSet.
			require.True(t, alpha.Spec.UpdateStrategy.Paused, "OnDelete reads as paused at v1alpha1")
			alpha.Spec.Replicas = ptr.To[int32](5)
			alpha.Labels = map[string]string{"edited-by": "v1alpha1-client"}
			_, err = alphas.Update(ctx, alpha, metav1.UpdateOptions{})
			return err
		})
		require.NoError(t, err)

		beta, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "batch-workers", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, v1beta1.OnDeleteCloneSetUpdateStrategyType, beta.Spec.UpdateStrategy.Type, "the v1beta1-only strategy survived the v1alpha1 write")
		require.EqualValues(t, 5, *beta.Spec.Replicas)
		require.Equal(t, "v1alpha1-client", beta.Labels["edited-by"])
		for k := range beta.Annotations {
			require.NotContains(t, k, conversion.StashAnnotationPrefix, "v1beta1 readers never see the conversion annotation")
		}
	})
}

// TestConversionV1beta1Examples: every v1beta1 example of
// test/testdata/v1beta1 applies unchanged on the cluster and reads back at
// v1alpha1. Kinds whose controllers act on objects (CRR, ImagePullJob)
// have their own tests below; their examples are created with dry run.
func TestConversionV1beta1Examples(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	for _, example := range []string{
		"advancedcronjob-job-template.yaml", "broadcastjob-ttl-cleanup.yaml", "daemonset-surge-paused.yaml",
		"sidecarset-hot-upgrade-pinned.yaml", "workloadspread-zones-adaptive.yaml", "uniteddeployment-cloneset-zones.yaml",
		"resourcedistribution-secret-selector.yaml", "persistentpodstate-zone-required-host-preferred.yaml",
	} {
		t.Run(example, func(t *testing.T) {
			objs, err := crdvalidation.ReadManifests("../testdata/v1beta1/" + example)
			require.NoError(t, err)
			obj := objs[0]
			if obj.GetNamespace() != "" {
				obj.SetNamespace(f.Namespace)
			}
			require.NoError(t, f.ApplyDryRun(t.Context(), obj), "create %s at v1beta1 (dry run)", example)
		})
	}
}

// TestConversionV1beta1CRR: a ContainerRecreateRequest written at v1beta1
// goes through the same admission (the webhooks match with
// matchPolicy Equivalent) and the same controller as a v1alpha1 one, and
// its v1beta1 status reports the recreation.
func TestConversionV1beta1CRR(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	pod := startCRRPod(ctx, t, f, "web", nil)
	crrs := f.Shoal.AppsV1beta1().ContainerRecreateRequests(f.Namespace)
	created, err := crrs.Create(ctx, &v1beta1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "recreate"},
		Spec: v1beta1.ContainerRecreateRequestSpec{
			PodName:    "web",
			Containers: []v1beta1.ContainerRecreateRequestContainer{{Name: "app"}},
			Strategy:   &v1beta1.ContainerRecreateRequestStrategy{},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, string(pod.UID), created.Labels[wellknown.LabelCRRPodUID], "the mutating webhook ran")
	require.Equal(t, v1beta1.ContainerRecreateRequestFailurePolicyFail, created.Spec.Strategy.FailurePolicy)
	require.Equal(t, containerStatus(pod, "app").ContainerID, created.Spec.Containers[0].StatusContext.ContainerID)

	var last *v1beta1.ContainerRecreateRequest
	err = framework.WaitFor(ctx, crrTimeout, func(ctx context.Context) (bool, error) {
		c, err := crrs.Get(ctx, "recreate", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = c
		return c.Status.Phase == v1beta1.ContainerRecreateRequestCompleted, nil
	})
	require.NoError(t, err, "v1beta1 request never Completed; last status %+v", last)
	require.Len(t, last.Status.ContainerRecreateStates, 1)
	st := last.Status.ContainerRecreateStates[0]
	require.Equal(t, "app", st.Name)
	require.Equal(t, v1beta1.ContainerRecreateRequestSucceeded, st.Phase)
	require.True(t, st.IsKilled)
	waitRecreated(ctx, t, f, "web", "app")

	// The same request at v1alpha1.
	alpha := waitCRR(ctx, t, f, "recreate", 5*time.Second, "read at v1alpha1", isCompleted)
	require.Equal(t, states("app", "Succeeded", true), alpha.Status.ContainerRecreateStates)
	require.Equal(t, last.Status.CompletionTime, alpha.Status.CompletionTime)

	// Admission still refuses bad v1beta1 requests with the v1alpha1 rules.
	_, err = crrs.Create(ctx, &v1beta1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "no-such-container"},
		Spec: v1beta1.ContainerRecreateRequestSpec{PodName: "web",
			Containers: []v1beta1.ContainerRecreateRequestContainer{{Name: "nope"}}},
	}, metav1.CreateOptions{})
	require.ErrorContains(t, err, "nope")
}

// TestConversionV1beta1ImagePullJob: an ImagePullJob written at v1beta1
// (with a pull secret, as OpenKruise's v1beta1 e2e does) is defaulted,
// validated and pulled on every node like a v1alpha1 one, and its v1beta1
// status says so.
func TestConversionV1beta1ImagePullJob(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)
	const user = "v1beta1-user"
	pass := randomSecret(t)
	reg := framework.StartRegistry(t, framework.RegistryOptions{Users: map[string]string{user: pass}})
	ref := reg.Push(t, "openkruise/v1beta1", "v1", 4, 2)
	createSecret(ctx, t, f, registrySecret(t, "pull-secret", reg.Host, user, pass, false))

	jobs := f.Shoal.AppsV1beta1().ImagePullJobs(f.Namespace)
	created, err := jobs.Create(ctx, &v1beta1.ImagePullJob{
		ObjectMeta: metav1.ObjectMeta{Name: "warm"},
		Spec: v1beta1.ImagePullJobSpec{
			Image: ref,
			ImagePullJobTemplate: v1beta1.ImagePullJobTemplate{
				PullSecrets:      []string{"pull-secret"},
				Parallelism:      ptr.To(intstr.FromInt32(4)),
				PullPolicy:       &v1beta1.PullPolicy{TimeoutSeconds: ptr.To[int32](50), BackoffLimit: ptr.To[int32](2)},
				CompletionPolicy: v1beta1.CompletionPolicy{Type: v1beta1.Always, ActiveDeadlineSeconds: ptr.To[int64](90)},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, v1beta1.PullIfNotPresent, created.Spec.ImagePullPolicy, "defaulted")

	var last *v1beta1.ImagePullJob
	err = framework.WaitFor(ctx, pullJobTimeout, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, "warm", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = j
		return j.Status.CompletionTime != nil, nil
	})
	require.NoError(t, err, "v1beta1 job never completed; last status %+v", last)
	require.EqualValues(t, len(nodes), last.Status.Succeeded, "%+v", last.Status)
	require.Zero(t, last.Status.Failed)
	require.Equal(t, "job has completed", last.Status.Message)
	requirePulledBy(t, reg, ref, nodes, nodeNames(nodes)...)
	requireNoSecretCopies(ctx, t, f, []string{"pull-secret"}, pass)
}

// etcdStoredAPIVersion reads the apiVersion an object is stored at,
// straight from the local cluster's etcd (its JSON gateway on loopback):
// no API shows it.
func etcdStoredAPIVersion(ctx context.Context, t *testing.T, key string) string {
	t.Helper()
	body, err := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:2379/v3/kv/range", bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		KVs []struct {
			Value string `json:"value"`
		} `json:"kvs"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	if len(out.KVs) == 0 {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(out.KVs[0].Value)
	require.NoError(t, err)
	var tm metav1.TypeMeta
	require.NoError(t, json.Unmarshal(raw, &tm), "CRD objects are stored as JSON")
	return tm.APIVersion
}

// TestStorageVersionMigration runs docs/dev/api-versions.md's procedure on
// the CloneSet CRD: a CloneSet written while v1alpha1 was the storage
// version keeps working after the storage version becomes v1beta1 (read
// through the conversion webhook, v1beta1-only fields included), a rewrite
// stores it at v1beta1, and the CRD then lists only v1beta1. Serial: it
// changes the CRD of every CloneSet.
func TestStorageVersionMigration(t *testing.T) {
	serial(t)
	f := newFramework(t)
	localCluster(t, f)
	ctx := t.Context()
	crds := f.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	const crdName = "clonesets.apps.kruise.io"

	// setStorage makes version the CRD's storage version.
	setStorage := func(version string) {
		t.Helper()
		crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
		require.NoError(t, err)
		var ops []map[string]any
		for i, v := range versions {
			name := v.(map[string]any)["name"]
			ops = append(ops, map[string]any{"op": "replace", "path": fmt.Sprintf("/spec/versions/%d/storage", i), "value": name == version})
		}
		patch, err := json.Marshal(ops)
		require.NoError(t, err)
		_, err = crds.Patch(ctx, crdName, types.JSONPatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	// storedAt writes a fresh probe CloneSet until the apiserver stores it
	// at version (it takes the CRD change a moment later), then deletes it.
	storedAt := func(version string) {
		t.Helper()
		err := framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			probe := getAt(t, f, applyExample(t, f, "../testdata/v1beta1/cloneset-pvc-reuse.yaml"), "apps.kruise.io/v1beta1")
			at := etcdStoredAPIVersion(ctx, t, "/registry/apps.kruise.io/clonesets/"+f.Namespace+"/"+probe.GetName())
			err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Delete(ctx, probe.GetName(), metav1.DeleteOptions{})
			return at == "apps.kruise.io/"+version, err
		})
		require.NoError(t, err, "the apiserver never stored CloneSets at %s", version)
	}
	t.Cleanup(func() {
		// Whatever happened, v1beta1 stores CloneSets again.
		ctx := context.Background()
		crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("restore the CloneSet CRD: %v", err)
			return
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for i, v := range versions {
			m := v.(map[string]any)
			m["storage"] = m["name"] == "v1beta1"
			versions[i] = m
		}
		_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Errorf("restore the CloneSet CRD's storage version: %v", err)
		}
	})

	// Before the upgrade: v1alpha1 stores CloneSets. A v1beta1 CloneSet
	// with a v1beta1-only field (OnDelete) is written then.
	setStorage("v1alpha1")
	storedAt("v1alpha1")
	// It has no replicas, and the test waits for the CloneSet controller's
	// status write: any later write would store it again, at whatever the
	// storage version is then.
	objs, err := crdvalidation.ReadManifests("../testdata/v1beta1/cloneset-ondelete.yaml")
	require.NoError(t, err)
	old := objs[0]
	old.SetNamespace(f.Namespace)
	require.NoError(t, unstructured.SetNestedField(old.Object, int64(0), "spec", "replicas"))
	res, _, err := f.ResourceFor(old)
	require.NoError(t, err)
	_, err = res.Apply(ctx, old.GetName(), old, metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
	require.NoError(t, err)
	err = framework.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		cs, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "batch-workers", metav1.GetOptions{})
		return err == nil && cs.Status.ObservedGeneration == cs.Generation, err
	})
	require.NoError(t, err, "the CloneSet controller never observed the old CloneSet")
	key := "/registry/apps.kruise.io/clonesets/" + f.Namespace + "/batch-workers"
	require.Equal(t, "apps.kruise.io/v1alpha1", etcdStoredAPIVersion(ctx, t, key))

	// The upgrade: v1beta1 becomes the storage version. The old object is
	// still stored at v1alpha1 and reads at v1beta1 with every field.
	setStorage("v1beta1")
	storedAt("v1beta1")
	require.Equal(t, "apps.kruise.io/v1alpha1", etcdStoredAPIVersion(ctx, t, key), "an old object stays as it was stored")
	cs, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "batch-workers", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, v1beta1.OnDeleteCloneSetUpdateStrategyType, cs.Spec.UpdateStrategy.Type, "read through the webhook, the v1beta1-only field is there")

	// The migration: rewrite it unchanged, then drop v1alpha1 from the
	// stored versions.
	_, err = f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Update(ctx, cs, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "apps.kruise.io/v1beta1", etcdStoredAPIVersion(ctx, t, key), "the rewrite stored it at v1beta1")
	after, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "batch-workers", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, cs.Spec, after.Spec, "nothing changed in the rewrite")
	_, err = crds.Patch(ctx, crdName, types.MergePatchType, []byte(`{"status":{"storedVersions":["v1beta1"]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
	require.NoError(t, err)
	stored, _, err := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	require.NoError(t, err)
	require.Equal(t, []string{"v1beta1"}, stored)
}
