package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func testImagePullJob(image string, parallelism *intstr.IntOrString) *v1alpha1.ImagePullJob {
	return &v1alpha1.ImagePullJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "ImagePullJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pull"},
		Spec: v1alpha1.ImagePullJobSpec{Image: image, ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{
			Parallelism:      parallelism,
			CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always},
		}},
	}
}

func testImageListPullJob(parallelism *intstr.IntOrString, images ...string) *v1alpha1.ImageListPullJob {
	return &v1alpha1.ImageListPullJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "ImageListPullJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pull-list"},
		Spec: v1alpha1.ImageListPullJobSpec{Images: images, ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{
			Parallelism:      parallelism,
			CompletionPolicy: v1alpha1.CompletionPolicy{Type: v1alpha1.Always},
		}},
	}
}

// imageJobRequest builds an admission request; obj and old are encoded
// with encoding/json unless they are already raw JSON.
func imageJobRequest(t *testing.T, op admissionv1.Operation, obj, old any) *admissionv1.AdmissionRequest {
	t.Helper()
	encode := func(v any) []byte {
		if raw, ok := v.(string); ok {
			return []byte(raw)
		}
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return b
	}
	req := &admissionv1.AdmissionRequest{Operation: op, Namespace: "default"}
	if obj != nil {
		req.Object.Raw = encode(obj)
	}
	if old != nil {
		req.OldObject.Raw = encode(old)
	}
	return req
}

// applyImageJobPatch applies patch to raw, an object of resource, with
// client-go's fake dynamic client (the apiserver's RFC 6902
// implementation) and decodes the result into out.
func applyImageJobPatch(t *testing.T, resource, listKind string, raw, patch []byte, out any) {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(raw))
	gvr := schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: resource}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: listKind}, u)
	patched, err := client.Resource(gvr).Namespace(u.GetNamespace()).Patch(context.Background(), u.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "patch: %s", patch)
	b, err := patched.MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}

// requireAllowedUnchanged requires resp to allow the request without a
// patch.
func requireAllowedUnchanged(t *testing.T, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	require.NotNil(t, resp)
	require.True(t, resp.Allowed, "denied: %+v", resp.Result)
	require.Nil(t, resp.Patch)
	require.Nil(t, resp.PatchType)
}

// requirePatched requires resp to allow the request with a JSON patch and
// returns the patch.
func requirePatched(t *testing.T, resp *admissionv1.AdmissionResponse) []byte {
	t.Helper()
	require.NotNil(t, resp)
	require.True(t, resp.Allowed, "denied: %+v", resp.Result)
	require.NotNil(t, resp.PatchType)
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	require.NotEmpty(t, resp.Patch)
	return resp.Patch
}

func TestNormalizeImage(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"nginx", "index.docker.io/library/nginx:latest"},
		{"nginx:1.25", "index.docker.io/library/nginx:1.25"},
		{"docker.io/library/nginx:1.25", "index.docker.io/library/nginx:1.25"},
		{"bitnami/redis:7", "index.docker.io/bitnami/redis:7"},
		{"registry:5000/app:v1", "registry:5000/app:v1"},
		{"localhost/app", "localhost/app:latest"},
		{"registry.example.com/team/app", "registry.example.com/team/app:latest"},
		{"registry.example.com/team/app@" + testDigest, "registry.example.com/team/app@" + testDigest},
		{"nginx@" + testDigest, "index.docker.io/library/nginx@" + testDigest},
		{"nginx:1.25@" + testDigest, "index.docker.io/library/nginx@" + testDigest},
	} {
		t.Run(tc.image, func(t *testing.T) {
			got, problem := normalizeImage("spec.image", tc.image)
			require.Empty(t, problem)
			require.Equal(t, tc.want, got)
		})
	}
}

// badImages are invalid references and the message for each at spec.image.
var badImages = []struct{ image, message string }{
	{"Nginx:latest", "spec.image: \"Nginx:latest\" is not a valid image reference: repository can only contain the characters `abcdefghijklmnopqrstuvwxyz0123456789_-./`: Nginx; use e.g. nginx:1.25 or registry.example.com/team/app@sha256:..."},
	{"nginx:", `spec.image: "nginx:" is not a valid image reference: nginx: must specify a tag name after the colon; use e.g. nginx:1.25 or registry.example.com/team/app@sha256:...`},
	{"nginx:bad tag", "spec.image: \"nginx:bad tag\" is not a valid image reference: tag can only contain the characters `abcdefghijklmnopqrstuvwxyz0123456789_-.ABCDEFGHIJKLMNOPQRSTUVWXYZ`: bad tag; use e.g. nginx:1.25 or registry.example.com/team/app@sha256:..."},
	{"nginx@sha256:abc", `spec.image: "nginx@sha256:abc" is not a valid image reference: invalid checksum digest length: sha256:abc; use e.g. nginx:1.25 or registry.example.com/team/app@sha256:...`},
	{"nginx@a@b", `spec.image: "nginx@a@b" is not a valid image reference: a digest must contain exactly one '@' separator (e.g. registry/repository@digest) saw: nginx@a@b; use e.g. nginx:1.25 or registry.example.com/team/app@sha256:...`},
	{":1.25", `spec.image: ":1.25" is not a valid image reference: a repository name must be specified; use e.g. nginx:1.25 or registry.example.com/team/app@sha256:...`},
}

func TestMutateImagePullJob(t *testing.T) {
	for _, tc := range []struct {
		name            string
		obj             any
		wantImage       string
		wantParallelism intstr.IntOrString
	}{
		{"short name, parallelism unset", testImagePullJob("nginx", nil), "index.docker.io/library/nginx:latest", intstr.FromInt32(1)},
		{"tag kept, parallelism kept", testImagePullJob("nginx:1.25", ptr.To(intstr.FromInt32(4))), "index.docker.io/library/nginx:1.25", intstr.FromInt32(4)},
		{"paused job keeps parallelism 0", testImagePullJob("bitnami/redis", ptr.To(intstr.FromInt32(0))), "index.docker.io/bitnami/redis:latest", intstr.FromInt32(0)},
		{"digest kept", testImagePullJob("nginx@"+testDigest, nil), "index.docker.io/library/nginx@" + testDigest, intstr.FromInt32(1)},
		{"full image, parallelism unset", testImagePullJob("registry:5000/app:v1", nil), "registry:5000/app:v1", intstr.FromInt32(1)},
		{"parallelism null", `{"apiVersion":"apps.kruise.io/v1alpha1","kind":"ImagePullJob","metadata":{"namespace":"default","name":"pull"},"spec":{"image":"nginx","parallelism":null}}`,
			"index.docker.io/library/nginx:latest", intstr.FromInt32(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := imageJobRequest(t, admissionv1.Create, tc.obj, nil)
			patch := requirePatched(t, MutateImagePullJob(context.Background(), req))
			got := &v1alpha1.ImagePullJob{}
			applyImageJobPatch(t, "imagepulljobs", "ImagePullJobList", req.Object.Raw, patch, got)
			require.Equal(t, tc.wantImage, got.Spec.Image)
			require.Equal(t, &tc.wantParallelism, got.Spec.Parallelism)
		})
	}

	t.Run("nothing to change", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, testImagePullJob("registry:5000/app:v1", ptr.To(intstr.FromInt32(2))), nil)
		requireAllowedUnchanged(t, MutateImagePullJob(context.Background(), req))
	})
	t.Run("patch is minimal", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, testImagePullJob("nginx", nil), nil)
		patch := requirePatched(t, MutateImagePullJob(context.Background(), req))
		require.JSONEq(t, `[{"op":"replace","path":"/spec/image","value":"index.docker.io/library/nginx:latest"},{"op":"add","path":"/spec/parallelism","value":1}]`, string(patch))
	})
	t.Run("no spec", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, `{"apiVersion":"apps.kruise.io/v1alpha1","kind":"ImagePullJob","metadata":{"namespace":"default","name":"pull"}}`, nil)
		patch := requirePatched(t, MutateImagePullJob(context.Background(), req))
		got := &v1alpha1.ImagePullJob{}
		applyImageJobPatch(t, "imagepulljobs", "ImagePullJobList", req.Object.Raw, patch, got)
		require.Empty(t, got.Spec.Image)
		require.Equal(t, ptr.To(intstr.FromInt32(1)), got.Spec.Parallelism)
	})
	t.Run("empty image left to the CRD", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, testImagePullJob("", ptr.To(intstr.FromInt32(1))), nil)
		requireAllowedUnchanged(t, MutateImagePullJob(context.Background(), req))
	})
	t.Run("undecodable object left to the CRD", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, `{"spec":{"image":5}}`, nil)
		requireAllowedUnchanged(t, MutateImagePullJob(context.Background(), req))
	})
	for _, op := range []admissionv1.Operation{admissionv1.Update, admissionv1.Delete, admissionv1.Connect} {
		t.Run(string(op)+" unchanged", func(t *testing.T) {
			req := imageJobRequest(t, op, testImagePullJob("nginx", nil), testImagePullJob("nginx", nil))
			requireAllowedUnchanged(t, MutateImagePullJob(context.Background(), req))
		})
	}
	for _, tc := range badImages {
		t.Run("rejects "+tc.image, func(t *testing.T) {
			req := imageJobRequest(t, admissionv1.Create, testImagePullJob(tc.image, nil), nil)
			requireDenied(t, MutateImagePullJob(context.Background(), req), http.StatusUnprocessableEntity, tc.message)
		})
	}
}

func TestValidateImagePullJob(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		sub      string
		obj, old any
	}{
		{"create, full image", admissionv1.Create, "", testImagePullJob("index.docker.io/library/nginx:latest", nil), nil},
		{"create, short image", admissionv1.Create, "", testImagePullJob("nginx", nil), nil},
		{"create, digest", admissionv1.Create, "", testImagePullJob("registry.example.com/team/app@"+testDigest, nil), nil},
		{"update, image changed to a valid one", admissionv1.Update, "", testImagePullJob("nginx:1.26", nil), testImagePullJob("nginx:1.25", nil)},
		{"update, invalid image unchanged", admissionv1.Update, "", testImagePullJob("Nginx", nil), testImagePullJob("Nginx", nil)},
		{"status update with invalid image", admissionv1.Update, "status", testImagePullJob("Nginx", nil), testImagePullJob("Nginx", nil)},
		{"delete", admissionv1.Delete, "", nil, testImagePullJob("Nginx", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := imageJobRequest(t, tc.op, tc.obj, tc.old)
			req.SubResource = tc.sub
			requireAllowedUnchanged(t, ValidateImagePullJob(context.Background(), req))
		})
	}

	for _, tc := range badImages {
		t.Run("create rejects "+tc.image, func(t *testing.T) {
			req := imageJobRequest(t, admissionv1.Create, testImagePullJob(tc.image, nil), nil)
			requireDenied(t, ValidateImagePullJob(context.Background(), req), http.StatusUnprocessableEntity, tc.message)
		})
		t.Run("update rejects "+tc.image, func(t *testing.T) {
			req := imageJobRequest(t, admissionv1.Update, testImagePullJob(tc.image, nil), testImagePullJob("nginx", nil))
			requireDenied(t, ValidateImagePullJob(context.Background(), req), http.StatusUnprocessableEntity, tc.message)
		})
	}

	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old any
		message  string
	}{
		{"no object", admissionv1.Create, nil, nil, "could not decode the ImagePullJob: the admission request has no object"},
		{"bad object", admissionv1.Create, `{"spec":{"image":5}}`, nil,
			"could not decode the ImagePullJob (object): json: cannot unmarshal number into Go struct field ImagePullJobSpec.spec.image of type string"},
		{"bad old object", admissionv1.Update, testImagePullJob("nginx", nil), `[]`,
			"could not decode the ImagePullJob (old object): json: cannot unmarshal array into Go value of type v1alpha1.ImagePullJob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := imageJobRequest(t, tc.op, tc.obj, tc.old)
			requireDenied(t, ValidateImagePullJob(context.Background(), req), http.StatusBadRequest, tc.message)
		})
	}
}

func TestMutateImageListPullJob(t *testing.T) {
	for _, tc := range []struct {
		name            string
		obj             any
		wantImages      []string
		wantParallelism intstr.IntOrString
	}{
		{"short names, parallelism unset", testImageListPullJob(nil, "nginx", "redis:7", "registry:5000/app:v1"),
			[]string{"index.docker.io/library/nginx:latest", "index.docker.io/library/redis:7", "registry:5000/app:v1"}, intstr.FromInt32(1)},
		{"digest kept, parallelism kept", testImageListPullJob(ptr.To(intstr.FromInt32(5)), "nginx@"+testDigest, "gcr.io/proj/app"),
			[]string{"index.docker.io/library/nginx@" + testDigest, "gcr.io/proj/app:latest"}, intstr.FromInt32(5)},
		{"full images, parallelism unset", testImageListPullJob(nil, "registry:5000/app:v1"),
			[]string{"registry:5000/app:v1"}, intstr.FromInt32(1)},
		{"same repository, different tags", testImageListPullJob(ptr.To(intstr.FromInt32(1)), "nginx:1.25", "nginx:1.26"),
			[]string{"index.docker.io/library/nginx:1.25", "index.docker.io/library/nginx:1.26"}, intstr.FromInt32(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := imageJobRequest(t, admissionv1.Create, tc.obj, nil)
			patch := requirePatched(t, MutateImageListPullJob(context.Background(), req))
			got := &v1alpha1.ImageListPullJob{}
			applyImageJobPatch(t, "imagelistpulljobs", "ImageListPullJobList", req.Object.Raw, patch, got)
			require.Equal(t, tc.wantImages, got.Spec.Images)
			require.Equal(t, &tc.wantParallelism, got.Spec.Parallelism)
		})
	}

	t.Run("nothing to change", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, testImageListPullJob(ptr.To(intstr.FromInt32(1)), "registry:5000/app:v1", "index.docker.io/library/nginx:latest"), nil)
		requireAllowedUnchanged(t, MutateImageListPullJob(context.Background(), req))
	})
	t.Run("no images left to the CRD", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, testImageListPullJob(ptr.To(intstr.FromInt32(1))), nil)
		requireAllowedUnchanged(t, MutateImageListPullJob(context.Background(), req))
	})
	t.Run("empty entry left to the CRD", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, testImageListPullJob(ptr.To(intstr.FromInt32(1)), "", "nginx"), nil)
		patch := requirePatched(t, MutateImageListPullJob(context.Background(), req))
		got := &v1alpha1.ImageListPullJob{}
		applyImageJobPatch(t, "imagelistpulljobs", "ImageListPullJobList", req.Object.Raw, patch, got)
		require.Equal(t, []string{"", "index.docker.io/library/nginx:latest"}, got.Spec.Images)
	})
	t.Run("undecodable object left to the CRD", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Create, `{"spec":{"images":"nginx"}}`, nil)
		requireAllowedUnchanged(t, MutateImageListPullJob(context.Background(), req))
	})
	t.Run("update unchanged", func(t *testing.T) {
		req := imageJobRequest(t, admissionv1.Update, testImageListPullJob(nil, "nginx"), testImageListPullJob(nil, "nginx"))
		requireAllowedUnchanged(t, MutateImageListPullJob(context.Background(), req))
	})
	for _, tc := range imageListRejections {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			req := imageJobRequest(t, admissionv1.Create, testImageListPullJob(nil, tc.images...), nil)
			requireDenied(t, MutateImageListPullJob(context.Background(), req), http.StatusUnprocessableEntity, tc.message)
		})
	}
}

// imageListRejections are spec.images lists both ImageListPullJob handlers
// deny, with the message.
var imageListRejections = []struct {
	name    string
	images  []string
	message string
}{
	{"invalid image", []string{"nginx", "Redis:7"},
		"spec.images[1]: \"Redis:7\" is not a valid image reference: repository can only contain the characters `abcdefghijklmnopqrstuvwxyz0123456789_-./`: Redis; use e.g. nginx:1.25 or registry.example.com/team/app@sha256:..."},
	{"same image after normalization", []string{"nginx:latest", "nginx"},
		`spec.images[1]: "nginx" is the same image as spec.images[0] ("index.docker.io/library/nginx:latest")`},
	{"exact repeat", []string{"redis", "nginx", "nginx"},
		`spec.images[2]: "nginx" is the same image as spec.images[1] ("index.docker.io/library/nginx:latest")`},
	{"docker.io spelling", []string{"index.docker.io/library/nginx:1.25", "docker.io/nginx:1.25"},
		`spec.images[1]: "docker.io/nginx:1.25" is the same image as spec.images[0] ("index.docker.io/library/nginx:1.25")`},
	{"several problems, in order", []string{"nginx", "nginx@sha256:abc", "library/nginx", "docker.io/library/nginx:latest"},
		`spec.images[1]: "nginx@sha256:abc" is not a valid image reference: invalid checksum digest length: sha256:abc; use e.g. nginx:1.25 or registry.example.com/team/app@sha256:...` + "\n" +
			`spec.images[2]: "library/nginx" is the same image as spec.images[0] ("index.docker.io/library/nginx:latest")` + "\n" +
			`spec.images[3]: "docker.io/library/nginx:latest" is the same image as spec.images[0] ("index.docker.io/library/nginx:latest")`},
}

func TestValidateImageListPullJob(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		sub      string
		obj, old any
	}{
		{"create, full images", admissionv1.Create, "", testImageListPullJob(nil, "index.docker.io/library/nginx:latest", "registry:5000/app:v1"), nil},
		{"create, short images", admissionv1.Create, "", testImageListPullJob(nil, "nginx", "nginx:1.25", "nginx@"+testDigest), nil},
		{"update, image added", admissionv1.Update, "", testImageListPullJob(nil, "nginx", "redis"), testImageListPullJob(nil, "nginx")},
		{"update, invalid images unchanged", admissionv1.Update, "", testImageListPullJob(nil, "Nginx", "nginx", "nginx"), testImageListPullJob(nil, "Nginx", "nginx", "nginx")},
		{"status update with invalid images", admissionv1.Update, "status", testImageListPullJob(nil, "Nginx"), testImageListPullJob(nil, "Nginx")},
		{"delete", admissionv1.Delete, "", nil, testImageListPullJob(nil, "Nginx")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := imageJobRequest(t, tc.op, tc.obj, tc.old)
			req.SubResource = tc.sub
			requireAllowedUnchanged(t, ValidateImageListPullJob(context.Background(), req))
		})
	}

	for _, tc := range imageListRejections {
		t.Run("create rejects "+tc.name, func(t *testing.T) {
			req := imageJobRequest(t, admissionv1.Create, testImageListPullJob(nil, tc.images...), nil)
			requireDenied(t, ValidateImageListPullJob(context.Background(), req), http.StatusUnprocessableEntity, tc.message)
		})
		t.Run("update rejects "+tc.name, func(t *testing.T) {
			req := imageJobRequest(t, admissionv1.Update, testImageListPullJob(nil, tc.images...), testImageListPullJob(nil, "busybox"))
			requireDenied(t, ValidateImageListPullJob(context.Background(), req), http.StatusUnprocessableEntity, tc.message)
		})
	}

	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old any
		message  string
	}{
		{"no object", admissionv1.Update, nil, testImageListPullJob(nil, "nginx"), "could not decode the ImageListPullJob: the admission request has no object"},
		{"bad object", admissionv1.Create, `{"spec":{"images":"nginx"}}`, nil,
			"could not decode the ImageListPullJob (object): json: cannot unmarshal string into Go struct field ImageListPullJobSpec.spec.images of type []string"},
		{"bad old object", admissionv1.Update, testImageListPullJob(nil, "nginx"), `"x"`,
			"could not decode the ImageListPullJob (old object): json: cannot unmarshal string into Go value of type v1alpha1.ImageListPullJob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := imageJobRequest(t, tc.op, tc.obj, tc.old)
			requireDenied(t, ValidateImageListPullJob(context.Background(), req), http.StatusBadRequest, tc.message)
		})
	}
}
