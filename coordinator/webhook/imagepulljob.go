package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// ImagePullJobMutatePath is where MutateImagePullJob is served.
const ImagePullJobMutatePath = "/mutate-imagepulljob"

// ImagePullJobValidatePath is where ValidateImagePullJob is served.
const ImagePullJobValidatePath = "/validate-imagepulljob"

// ImageListPullJobMutatePath is where MutateImageListPullJob is served.
const ImageListPullJobMutatePath = "/mutate-imagelistpulljob"

// ImageListPullJobValidatePath is where ValidateImageListPullJob is served.
const ImageListPullJobValidatePath = "/validate-imagelistpulljob"

// imageRefHint ends every "not a valid image reference" message.
const imageRefHint = "use e.g. nginx:1.25 or registry.example.com/team/app@sha256:..."

var (
	_ Handler = MutateImagePullJob
	_ Handler = ValidateImagePullJob
	_ Handler = MutateImageListPullJob
	_ Handler = ValidateImageListPullJob
)

// The CRDs already enforce, before the validating webhooks run: a
// non-empty spec.image, 1 to 255 non-empty spec.images without exact
// repeats, unique spec.selector.names, selector XOR podSelector, names XOR
// label selector, a non-negative integer parallelism, activeDeadlineSeconds
// and ttlSecondsAfterFinished only with completion type Always,
// activeDeadlineSeconds >= timeoutSeconds, immutable pullSecrets, and the
// defaults of pullPolicy, completionPolicy.type and imagePullPolicy. The
// handlers below add what a schema cannot: parsing and normalizing image
// references, repeats after normalization, and the parallelism default
// (which the CRD does not set).

// MutateImagePullJob handles CREATE of an ImagePullJob: it rewrites
// spec.image to its full reference (registry, repository and tag, or
// digest; "nginx" becomes "index.docker.io/library/nginx:latest") and sets
// spec.parallelism to 1 when it is unset, answering with a JSON patch. It
// denies an image that is not a valid reference. An empty image, or an
// object that does not decode, is left for the CRD schema to reject. Other
// operations are allowed unchanged.
func MutateImagePullJob(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	job := &v1alpha1.ImagePullJob{}
	if len(req.Object.Raw) == 0 || json.Unmarshal(req.Object.Raw, job) != nil {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	var ops []jsonPatchOp
	if job.Spec.Image != "" {
		full, problem := normalizeImage("spec.image", job.Spec.Image)
		if problem != "" {
			return Deny(problem)
		}
		if full != job.Spec.Image {
			ops = append(ops, jsonPatchOp{Op: "replace", Path: "/spec/image", Value: full})
		}
	}
	return imageJobPatch(req.Object.Raw, ops, job.Spec.Parallelism == nil)
}

// ValidateImagePullJob handles CREATE and UPDATE of an ImagePullJob: it
// denies a spec.image that is not a valid image reference. On UPDATE an
// unchanged image is not checked again, so a job stored before the webhook
// was installed can still be updated (for example to remove a finalizer).
// Other operations and subresources are allowed.
func ValidateImagePullJob(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return validateImageJob(req, "ImagePullJob",
		func(j *v1alpha1.ImagePullJob) []string { return []string{j.Spec.Image} },
		func(images []string) []string {
			if images[0] == "" {
				return nil // the CRD schema rejects it
			}
			if _, problem := normalizeImage("spec.image", images[0]); problem != "" {
				return []string{problem}
			}
			return nil
		})
}

// MutateImageListPullJob handles CREATE of an ImageListPullJob: it rewrites
// each of spec.images to its full reference, as MutateImagePullJob does for
// spec.image, and sets spec.parallelism to 1 when it is unset, answering
// with a JSON patch. It denies images that are not valid references and
// images that name the same image as an earlier one once normalized. Empty
// entries, or an object that does not decode, are left for the CRD schema
// to reject. Other operations are allowed unchanged.
func MutateImageListPullJob(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	job := &v1alpha1.ImageListPullJob{}
	if len(req.Object.Raw) == 0 || json.Unmarshal(req.Object.Raw, job) != nil {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	full, problems := normalizeImages(job.Spec.Images)
	if len(problems) > 0 {
		return Deny(strings.Join(problems, "\n"))
	}
	var ops []jsonPatchOp
	if !slices.Equal(full, job.Spec.Images) {
		ops = append(ops, jsonPatchOp{Op: "replace", Path: "/spec/images", Value: full})
	}
	return imageJobPatch(req.Object.Raw, ops, job.Spec.Parallelism == nil)
}

// ValidateImageListPullJob handles CREATE and UPDATE of an
// ImageListPullJob: it denies entries of spec.images that are not valid
// image references and entries that name the same image as an earlier
// entry once normalized. On UPDATE an unchanged spec.images is not checked
// again. Other operations and subresources are allowed.
func ValidateImageListPullJob(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return validateImageJob(req, "ImageListPullJob",
		func(j *v1alpha1.ImageListPullJob) []string { return j.Spec.Images },
		func(images []string) []string {
			_, problems := normalizeImages(images)
			return problems
		})
}

// validateImageJob is both validators: on CREATE, and on an UPDATE that
// changes the job's images, it denies what problems finds wrong with
// images(job). Other operations and subresources are allowed.
func validateImageJob[J any](req *admissionv1.AdmissionRequest, kind string, images func(*J) []string, problems func([]string) []string) *admissionv1.AdmissionResponse {
	if (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) || req.SubResource != "" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	job := new(J)
	if resp := decodeImageJob(req.Object.Raw, kind, "object", job); resp != nil {
		return resp
	}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old := new(J)
		if resp := decodeImageJob(req.OldObject.Raw, kind, "old object", old); resp != nil {
			return resp
		}
		if slices.Equal(images(old), images(job)) {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
	}
	if p := problems(images(job)); len(p) > 0 {
		return Deny(strings.Join(p, "\n"))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// normalizeImage returns the full form of the image reference at field, or
// a message saying why it is not one. A reference with both a tag and a
// digest keeps only the digest, which is what is pulled.
func normalizeImage(field, image string) (string, string) {
	ref, err := name.ParseReference(image)
	if err != nil {
		// ParseReference only says "could not parse reference"; parsing
		// as the one form the reference claims to be says why.
		var detail error
		if strings.Contains(image, "@") {
			_, detail = name.NewDigest(image)
		} else {
			_, detail = name.NewTag(image)
		}
		if detail == nil {
			detail = err
		}
		return "", fmt.Sprintf("%s: %q is not a valid image reference: %v; %s", field, image, detail, imageRefHint)
	}
	return ref.Name(), ""
}

// normalizeImages returns the full form of each image (empty entries kept
// as they are) and, in list order, the entries that do not parse or repeat
// an earlier entry once normalized.
func normalizeImages(images []string) ([]string, []string) {
	full := make([]string, len(images))
	first := make(map[string]int, len(images))
	var problems []string
	for i, image := range images {
		full[i] = image
		if image == "" {
			continue
		}
		field := fmt.Sprintf("spec.images[%d]", i)
		norm, problem := normalizeImage(field, image)
		if problem != "" {
			problems = append(problems, problem)
			continue
		}
		full[i] = norm
		if j, seen := first[norm]; seen {
			problems = append(problems, fmt.Sprintf("%s: %q is the same image as spec.images[%d] (%q)", field, image, j, norm))
			continue
		}
		first[norm] = i
	}
	return full, problems
}

// decodeImageJob decodes raw, the request's object or old object (what),
// into job, a kind.
func decodeImageJob(raw []byte, kind, what string, job any) *admissionv1.AdmissionResponse {
	if len(raw) == 0 {
		return badRequest(fmt.Sprintf("could not decode the %s: the admission request has no %s", kind, what))
	}
	if err := json.Unmarshal(raw, job); err != nil {
		return badRequest(fmt.Sprintf("could not decode the %s (%s): %v", kind, what, err))
	}
	return nil
}

// imageJobPatch allows the request with ops, plus, when defaultParallelism
// is set, an operation setting spec.parallelism to 1 (adding spec when raw
// has none), as a JSON patch; without operations it allows the request
// unchanged.
func imageJobPatch(raw []byte, ops []jsonPatchOp, defaultParallelism bool) *admissionv1.AdmissionResponse {
	if defaultParallelism {
		var top struct {
			Spec json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(raw, &top); err != nil {
			return internalError(fmt.Sprintf("could not build the JSON patch: %v", err))
		}
		if len(top.Spec) == 0 || string(top.Spec) == "null" {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec", Value: map[string]any{"parallelism": 1}})
		} else {
			// "add" replaces a member that is present (as null).
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/parallelism", Value: 1})
		}
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if len(ops) == 0 {
		return resp
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return internalError(fmt.Sprintf("could not build the JSON patch: %v", err))
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	return resp
}
