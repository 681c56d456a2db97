package crdvalidation_test

import (
	"bufio"
	"encoding/json"
	"fmt"
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

	"github.com/shoal-io/shoal/protocol/apis/apps/conversion"
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
	// Both versions are served; the storage version is the one our
	// controllers read (docs/dev/api-versions.md says why for each kind).
	apps := func(storage string) want {
		return want{group: "apps.kruise.io", storage: storage, served: []string{"v1alpha1", "v1beta1"}}
	}
	cluster := func(w want) want { w.cluster = true; return w }
	scale := func(w want) want { w.scale = true; return w }
	expected := map[string]want{
		"CloneSet":                 scale(apps("v1beta1")),
		"SidecarSet":               cluster(apps("v1beta1")),
		"DaemonSet":                apps("v1beta1"),
		"StatefulSet":              scale(apps("v1beta1")),
		"ImagePullJob":             apps("v1alpha1"),
		"ImageListPullJob":         apps("v1alpha1"),
		"ContainerRecreateRequest": apps("v1alpha1"),
		"PodProbeMarker":           {group: "apps.kruise.io", storage: "v1alpha1", served: []string{"v1alpha1"}},
		"WorkloadSpread":           apps("v1alpha1"),
		"ResourceDistribution":     cluster(apps("v1alpha1")),
		"PersistentPodState":       apps("v1alpha1"),
		"AdvancedCronJob":          apps("v1beta1"),
		"BroadcastJob":             apps("v1beta1"),
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
// (test/testdata/seed-examples), every hand-written valid manifest
// (test/testdata/valid) and every v1beta1 example written from OpenKruise's
// current docs (test/testdata/v1beta1) is accepted unchanged. Kruise kinds are validated
// against the CRDs; core kinds are decoded strictly (unknown fields fail).
func TestValidManifests(t *testing.T) {
	set := loadCRDs(t)
	core := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, dir := range []string{"seed-examples", "valid", "v1beta1"} {
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

// TestConversionWebhooks: exactly the kinds that convert
// (conversion.Kinds) send their conversions to the coordinator's /convert,
// with ConversionReview v1; every other CRD has one schema.
func TestConversionWebhooks(t *testing.T) {
	set := loadCRDs(t)
	converting := map[string]bool{}
	for _, k := range conversion.Kinds() {
		converting[k] = true
	}
	require.Len(t, converting, 12)
	for _, crd := range set.CRDs {
		kind := crd.Spec.Names.Kind
		t.Run(kind, func(t *testing.T) {
			c := crd.Spec.Conversion
			if !converting[kind] {
				require.True(t, c == nil || c.Strategy == apiextensionsv1.NoneConverter, "no conversion webhook")
				return
			}
			require.NotNil(t, c)
			require.Equal(t, apiextensionsv1.WebhookConverter, c.Strategy)
			require.Equal(t, []string{"v1"}, c.Webhook.ConversionReviewVersions)
			svc := c.Webhook.ClientConfig.Service
			require.NotNil(t, svc)
			require.Equal(t, "shoal-webhook", svc.Name)
			require.Equal(t, "shoal-system", svc.Namespace)
			require.Equal(t, "/convert", *svc.Path)
			require.Empty(t, c.Webhook.ClientConfig.CABundle, "the coordinator writes the caBundle")
		})
	}
}

// v1alpha1Refuses are the v1beta1 examples whose v1alpha1 form the
// v1alpha1 schema would refuse as a new object, and the error. An
// AdvancedCronJob with an imageListPullJobTemplate (v1beta1 only) has no
// template v1alpha1 knows, which its "exactly one template" rule refuses;
// a v1alpha1 client can still read it and write it back with
// spec.template unchanged (the apiserver ratchets the rule), and the
// template travels in the conversion annotation.
var v1alpha1Refuses = map[string]string{
	"advancedcronjob-imagelistpulljob-template.yaml": "spec.template: set exactly one of jobTemplate or broadcastJobTemplate",
}

// TestV1beta1ExamplesConvert: every v1beta1 example converts to v1alpha1,
// is valid there too (so a v1alpha1 client can read and write it back),
// and converts back to exactly what it was.
func TestV1beta1ExamplesConvert(t *testing.T) {
	set := loadCRDs(t)
	files, err := filepath.Glob(filepath.Join(testdataDir, "v1beta1", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	kinds := map[string]bool{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			objs, err := crdvalidation.ReadManifests(f)
			require.NoError(t, err)
			for _, obj := range objs {
				require.Equal(t, "apps.kruise.io/v1beta1", obj.GetAPIVersion())
				kinds[obj.GetKind()] = true
				alpha, err := conversion.Convert(obj, "apps.kruise.io/v1alpha1")
				require.NoError(t, err)
				errs := set.Validate(alpha, nil)
				if want, ok := v1alpha1Refuses[filepath.Base(f)]; ok {
					require.ErrorContains(t, errs.ToAggregate(), want)
				} else {
					require.Empty(t, errs, "the v1alpha1 form of %s %s: %v", obj.GetKind(), obj.GetName(), errs.ToAggregate())
				}
				back, err := conversion.Convert(alpha, "apps.kruise.io/v1beta1")
				require.NoError(t, err)
				// The typed conversion writes out empty structs the YAML
				// left out (status: {}); everything the example says must
				// be there unchanged, and a second round trip changes
				// nothing at all.
				requireSubset(t, obj.Object, back.Object, "")
				alpha2, err := conversion.Convert(back, "apps.kruise.io/v1alpha1")
				require.NoError(t, err)
				require.Equal(t, alpha.Object, alpha2.Object)
				back2, err := conversion.Convert(alpha2, "apps.kruise.io/v1beta1")
				require.NoError(t, err)
				require.Equal(t, back.Object, back2.Object)
			}
		})
	}
	for _, k := range conversion.Kinds() {
		require.True(t, kinds[k], "no v1beta1 example of %s in test/testdata/v1beta1", k)
	}
}

// requireSubset fails unless every value in want is in got at the same
// path (maps may gain keys; lists must match element by element; an
// explicit false, 0 or "" may be left out, as the typed form omits it).
func requireSubset(t *testing.T, want, got any, path string) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		require.True(t, ok, "%s: want an object, got %v", path, got)
		for k, v := range w {
			gv, ok := g[k]
			if !ok && (v == false || v == int64(0) || v == "") {
				continue // an explicit zero, which the typed form omits: the same value
			}
			require.True(t, ok, "%s.%s: lost in the round trip", path, k)
			requireSubset(t, v, gv, path+"."+k)
		}
	case []any:
		g, ok := got.([]any)
		require.True(t, ok, "%s: want a list, got %v", path, got)
		require.Len(t, g, len(w), path)
		for i := range w {
			requireSubset(t, w[i], g[i], fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		require.Equal(t, want, got, path)
	}
}

// TestV1beta1DefaultsMatchV1alpha1: the v1beta1 schemas default what the
// v1alpha1 ones do. For every v1beta1 example, defaulting at v1beta1 and
// then converting gives the same v1alpha1 object as converting and then
// defaulting at v1alpha1.
func TestV1beta1DefaultsMatchV1alpha1(t *testing.T) {
	set := loadCRDs(t)
	files, err := filepath.Glob(filepath.Join(testdataDir, "v1beta1", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			objs, err := crdvalidation.ReadManifests(f)
			require.NoError(t, err)
			for _, obj := range objs {
				beta := obj.DeepCopy()
				set.Validate(beta, nil) // defaults in place
				viaBeta, err := conversion.Convert(beta, "apps.kruise.io/v1alpha1")
				require.NoError(t, err)

				viaAlpha, err := conversion.Convert(obj, "apps.kruise.io/v1alpha1")
				require.NoError(t, err)
				set.Validate(viaAlpha, nil)
				require.Equal(t, viaAlpha.Object, viaBeta.Object)
			}
		})
	}
}

// TestCoordinatorMayPatchConvertingCRDs: the coordinator's RBAC names
// exactly the CRDs whose conversion caBundle it keeps (conversion.CRDNames),
// so a kind added to the conversions cannot be forgotten in deploy/.
func TestCoordinatorMayPatchConvertingCRDs(t *testing.T) {
	objs, err := crdvalidation.ReadManifests("../../deploy/rbac.yaml")
	require.NoError(t, err)
	var names []string
	for _, obj := range objs {
		if obj.GetKind() != "ClusterRole" || obj.GetName() != "shoal-coordinator" {
			continue
		}
		rules, _, err := unstructured.NestedSlice(obj.Object, "rules")
		require.NoError(t, err)
		for _, r := range rules {
			rule := r.(map[string]any)
			res, _, _ := unstructured.NestedStringSlice(rule, "resources")
			if len(res) == 1 && res[0] == "customresourcedefinitions" {
				names, _, _ = unstructured.NestedStringSlice(rule, "resourceNames")
			}
		}
	}
	sort.Strings(names)
	require.Equal(t, conversion.CRDNames(), names)
}
