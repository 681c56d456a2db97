package crdvalidation_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/shoal-io/shoal/test/crdvalidation"
)

// fragmentVersions gives the apiVersion of core kinds that the release
// notes show without one.
var fragmentVersions = map[string]string{"Job": "batch/v1", "Pod": "v1"}

const (
	crdDir      = "../../deploy/crds"
	testdataDir = "../testdata"
)

func loadCRDs(t *testing.T) *crdvalidation.Set {
	t.Helper()
	set, err := crdvalidation.LoadDir(crdDir)
	require.NoError(t, err)
	return set
}

// TestCRDInventory pins the kinds, groups, versions, scopes and
// subresources Shoal serves: the OpenKruise API as users write it.
func TestCRDInventory(t *testing.T) {
	type want struct {
		group, storage string
		served         []string
		cluster, scale bool
	}
	apps := func(served ...string) want { return want{group: "apps.kruise.io", storage: "v1alpha1", served: served} }
	cluster := func(w want) want { w.cluster = true; return w }
	scale := func(w want) want { w.scale = true; return w }
	expected := map[string]want{
		"CloneSet":                 scale(apps("v1alpha1")),
		"SidecarSet":               cluster(apps("v1alpha1")),
		"DaemonSet":                apps("v1alpha1"),
		"StatefulSet":              scale(want{group: "apps.kruise.io", storage: "v1beta1", served: []string{"v1alpha1", "v1beta1"}}),
		"ImagePullJob":             apps("v1alpha1"),
		"ImageListPullJob":         apps("v1alpha1"),
		"ContainerRecreateRequest": apps("v1alpha1"),
		"PodProbeMarker":           apps("v1alpha1"),
		"WorkloadSpread":           apps("v1alpha1"),
		"ResourceDistribution":     cluster(apps("v1alpha1")),
		"PersistentPodState":       apps("v1alpha1"),
		"AdvancedCronJob":          apps("v1alpha1"),
		"BroadcastJob":             apps("v1alpha1"),
		"UnitedDeployment":         scale(apps("v1alpha1")),
		"PodUnavailableBudget":     {group: "policy.kruise.io", storage: "v1alpha1", served: []string{"v1alpha1"}},
	}

	set := loadCRDs(t)
	seen := map[string]bool{}
	for file, crd := range set.CRDs {
		kind := crd.Spec.Names.Kind
		t.Run(kind, func(t *testing.T) {
			w, ok := expected[kind]
			require.True(t, ok, "%s defines unexpected kind %s", file, kind)
			require.False(t, seen[kind], "kind %s defined twice", kind)
			seen[kind] = true
			require.Equal(t, w.group, crd.Spec.Group)
			require.Equal(t, w.cluster, crd.Spec.Scope == apiextensionsv1.ClusterScoped, "scope")

			var served []string
			var storage string
			for _, v := range crd.Spec.Versions {
				require.True(t, v.Served, "version %s not served", v.Name)
				served = append(served, v.Name)
				if v.Storage {
					storage = v.Name
				}
				require.NotNil(t, v.Subresources, "version %s has no subresources", v.Name)
				require.NotNil(t, v.Subresources.Status, "version %s has no status subresource", v.Name)
				require.Equal(t, w.scale, v.Subresources.Scale != nil, "version %s scale subresource", v.Name)
				require.NotEmpty(t, v.AdditionalPrinterColumns, "version %s has no printer columns", v.Name)
			}
			sort.Strings(served)
			require.Equal(t, w.served, served)
			require.Equal(t, w.storage, storage)
		})
	}
	for kind := range expected {
		require.True(t, seen[kind], "no CRD for %s in %s", kind, crdDir)
	}
}

// TestEveryFieldHasDescription keeps `kubectl explain` useful: every
// property of every served version carries a description.
func TestEveryFieldHasDescription(t *testing.T) {
	set := loadCRDs(t)
	for _, crd := range set.CRDs {
		for _, v := range crd.Spec.Versions {
			t.Run(crd.Spec.Names.Kind+"/"+v.Name, func(t *testing.T) {
				var missing []string
				crdvalidation.Undescribed(v.Schema.OpenAPIV3Schema, func(p string) { missing = append(missing, p) })
				require.Empty(t, missing, "properties without a description")
			})
		}
	}
}

// celMessage is the shape every CEL rule's message has: a field path, a
// colon, and what is allowed. The path starts at the object root, or, for a
// type shared by several kinds, at the field the rule sits on (the
// apiserver prefixes the full path to the message either way).
var celMessage = regexp.MustCompile(`^([a-z][A-Za-z0-9]*)(\.[A-Za-z][A-Za-z0-9]*|\[\*?\])*: \S`)

// TestCELMessagesNameTheField: every CEL rule explains itself to the user
// with the path of the field it guards.
func TestCELMessagesNameTheField(t *testing.T) {
	set := loadCRDs(t)
	for _, crd := range set.CRDs {
		for _, v := range crd.Spec.Versions {
			t.Run(crd.Spec.Names.Kind+"/"+v.Name, func(t *testing.T) {
				crdvalidation.Walk(v.Schema.OpenAPIV3Schema, func(path string, p *apiextensionsv1.JSONSchemaProps) {
					for _, rule := range p.XValidations {
						m := celMessage.FindStringSubmatch(rule.Message)
						require.NotNil(t, m, "rule %q at %s: message %q must start with the field path", rule.Rule, path, rule.Message)
						field := path[strings.LastIndex(path, ".")+1:]
						field = strings.TrimSuffix(field, "[]")
						require.Contains(t, []string{"spec", "status", "metadata", field}, m[1],
							"rule %q at %s: message %q must start at the object root or at %q", rule.Rule, path, rule.Message, field)
					}
				})
			})
		}
	}
}

// TestStatefulSetVersionsShareOneSchema: v1alpha1 and v1beta1 Advanced
// StatefulSets are served from one schema, so no conversion webhook is
// needed and nothing is lost when either version is written.
func TestStatefulSetVersionsShareOneSchema(t *testing.T) {
	set := loadCRDs(t)
	for _, crd := range set.CRDs {
		if crd.Spec.Names.Kind != "StatefulSet" {
			continue
		}
		require.Len(t, crd.Spec.Versions, 2)
		a, b := crd.Spec.Versions[0], crd.Spec.Versions[1]
		require.Equal(t, a.Schema, b.Schema)
		require.Equal(t, a.AdditionalPrinterColumns, b.AdditionalPrinterColumns)
		require.Equal(t, a.Subresources, b.Subresources)
		require.True(t, crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy == apiextensionsv1.NoneConverter)
		return
	}
	t.Fatal("no StatefulSet CRD")
}

// TestValidManifests: every YAML example of the OpenKruise release notes
// (test/testdata/seed-examples) and every hand-written valid manifest
// (test/testdata/valid) is accepted unchanged. Kruise kinds are validated
// against the CRDs; core kinds are decoded strictly (unknown fields fail).
func TestValidManifests(t *testing.T) {
	set := loadCRDs(t)
	core := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, dir := range []string{"seed-examples", "valid"} {
		files, err := filepath.Glob(filepath.Join(testdataDir, dir, "*.yaml"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "no manifests in %s", dir)
		for _, f := range files {
			t.Run(dir+"/"+filepath.Base(f), func(t *testing.T) {
				objs, err := crdvalidation.ReadManifests(f)
				require.NoError(t, err)
				require.NotEmpty(t, objs)
				for _, obj := range objs {
					gvk := obj.GroupVersionKind()
					switch {
					case strings.HasSuffix(gvk.Group, "kruise.io"):
						errs := set.Validate(obj, nil)
						require.Empty(t, errs, "%s %s: %v", gvk.Kind, obj.GetName(), errs.ToAggregate())
						continue
					case gvk.Kind == "CustomResourceDefinition":
						crd := &apiextensionsv1.CustomResourceDefinition{}
						require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, crd))
						require.NoError(t, crdvalidation.ValidateDefinition(crd))
						continue
					case obj.GetAPIVersion() == "":
						// A core-object fragment as the release notes show it
						// (a Job's pod template): decode it as that kind.
						coreVersion, ok := fragmentVersions[gvk.Kind]
						require.True(t, ok, "document without apiVersion of kind %q", gvk.Kind)
						obj.SetAPIVersion(coreVersion)
					}
					data, err := json.Marshal(obj.Object)
					require.NoError(t, err)
					_, _, err = core.Decode(data, nil, nil)
					require.NoError(t, err, "%s %s", gvk.Kind, obj.GetName())
				}
			})
		}
	}
}

// TestInvalidManifests: each file in test/testdata/invalid starts with
// `# expect: <text>` and must be rejected with a message containing that
// text. A file with two documents is an update: the first document is the
// stored object, the second the update that must be refused.
func TestInvalidManifests(t *testing.T) {
	set := loadCRDs(t)
	files, err := filepath.Glob(filepath.Join(testdataDir, "invalid", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			expect := expectation(t, f)
			objs, err := crdvalidation.ReadManifests(f)
			require.NoError(t, err)
			var obj, old *unstructured.Unstructured
			switch len(objs) {
			case 1:
				obj = objs[0]
			case 2:
				old, obj = objs[0], objs[1]
				require.Empty(t, set.Validate(old, nil), "the stored object of an update case must itself be valid")
			default:
				t.Fatalf("want 1 document (create) or 2 (update), got %d", len(objs))
			}
			errs := set.Validate(obj, old)
			require.NotEmpty(t, errs, "manifest was accepted; want an error containing %q", expect)
			require.Contains(t, errs.ToAggregate().Error(), expect)
		})
	}
}

// TestValidatorSeesUnknownFields guards the harness itself: a field the
// schema does not have must fail, not be silently pruned.
func TestValidatorSeesUnknownFields(t *testing.T) {
	set := loadCRDs(t)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1alpha1",
		"kind":       "ImagePullJob",
		"metadata":   map[string]any{"name": "x", "namespace": "default"},
		"spec":       map[string]any{"image": "nginx:1.25", "parallelizm": int64(2)},
	}}
	errs := set.Validate(obj, nil)
	require.NotEmpty(t, errs)
	require.Contains(t, errs.ToAggregate().Error(), "spec.parallelizm")
}

func expectation(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	line, err := bufio.NewReader(f).ReadString('\n')
	require.NoError(t, err)
	expect, ok := strings.CutPrefix(strings.TrimSpace(line), "# expect:")
	require.True(t, ok, "first line must be `# expect: <text>`")
	expect = strings.TrimSpace(expect)
	require.NotEmpty(t, expect)
	return expect
}

// TestUndescribedFindsBareFields guards the harness itself: a property
// without a description is reported, while the standard root fields,
// array items and map values are not.
func TestUndescribedFindsBareFields(t *testing.T) {
	described := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Description: "d", Properties: props}
	}
	schema := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"apiVersion": {Type: "string"},
		"metadata":   {Type: "object"},
		"spec": described(map[string]apiextensionsv1.JSONSchemaProps{
			"bare": {Type: "string"},
			"list": {Type: "array", Description: "d", Items: &apiextensionsv1.JSONSchemaPropsOrArray{
				Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"inner": {Type: "string"},
				}},
			}},
		}),
	}}
	var missing []string
	crdvalidation.Undescribed(&schema, func(p string) { missing = append(missing, p) })
	require.Equal(t, []string{"spec.bare", "spec.list[].inner"}, missing)
}
