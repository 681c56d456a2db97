package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// SidecarSetValidatePath is where SidecarSetAdmission.Validate is served.
const SidecarSetValidatePath = "/validate-sidecarset"

// The webhook is registered on v1beta1 with matchPolicy Equivalent, so a
// v1alpha1 request arrives converted (v1alpha1's spec.namespace is a
// namespaceSelector on kubernetes.io/metadata.name here). The CRD's
// defaults (upgradeType ColdUpgrade, shareVolumePolicy disabled,
// updateStrategy RollingUpdate, patchPolicy Retain, ...) are applied before
// the webhook runs, but the container and volume fields are schemaless and
// are not defaulted: an empty podInjectPolicy, imagePullPolicy or fieldRef
// apiVersion is taken as its Kubernetes default.

// SidecarSetPatchPodMetadataRule is one rule of the patchPodMetadata
// allow-list, the counterpart of an entry of OpenKruise's
// SidecarSet_PatchPodMetadata_WhiteList: SidecarSets whose labels match
// Selector (every SidecarSet when Selector is nil) may write, with
// spec.patchPodMetadata, the annotation keys that match one of
// AllowedAnnotationKeyExprs. The expressions are Go regular expressions
// matched anywhere in the key, as OpenKruise does: write ^...$ to match
// whole keys.
type SidecarSetPatchPodMetadataRule struct {
	// Selector picks the SidecarSets, by their own labels, that the rule
	// applies to; nil applies it to all.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// AllowedAnnotationKeyExprs are regular expressions of the allowed
	// annotation keys.
	AllowedAnnotationKeyExprs []string `json:"allowedAnnotationKeyExprs"`
}

// SidecarSetAdmission validates SidecarSets (served at v1beta1; the
// apiserver converts a v1alpha1 request first).
type SidecarSetAdmission struct {
	sets                 func() ([]*appsv1beta1.SidecarSet, error)
	patchRules           func() ([]SidecarSetPatchPodMetadataRule, error)
	patchDefaultsAllowed bool
	namespaces           func(name string) (*corev1.Namespace, error)
}

// NewSidecarSetAdmission returns the SidecarSet validation. sets lists every
// SidecarSet, for the check that no two SidecarSets which can select the
// same pods inject containers or volumes of the same name (nil skips that
// check). No patchPodMetadata is allowed until
// WithPatchPodMetadataAllowed or WithPatchPodMetadataDefaultsAllowed says
// otherwise, as in OpenKruise without a whitelist.
func NewSidecarSetAdmission(sets func() ([]*appsv1beta1.SidecarSet, error)) *SidecarSetAdmission {
	return &SidecarSetAdmission{sets: sets}
}

// WithPatchPodMetadataAllowed sets the patchPodMetadata allow-list. rules is
// called on every request that has patchPodMetadata, so it may read a
// ConfigMap kept by an informer; an error denies the request. A SidecarSet
// to which no rule applies may patch no annotation, unless
// WithPatchPodMetadataDefaultsAllowed is on.
func (a *SidecarSetAdmission) WithPatchPodMetadataAllowed(rules func() ([]SidecarSetPatchPodMetadataRule, error)) *SidecarSetAdmission {
	a.patchRules = rules
	return a
}

// WithPatchPodMetadataDefaultsAllowed is OpenKruise's feature gate
// SidecarSetPatchPodMetadataDefaultsAllowed (off by default): when on, a
// SidecarSet to which no allow-list rule applies may patch any annotation.
func (a *SidecarSetAdmission) WithPatchPodMetadataDefaultsAllowed(allowed bool) *SidecarSetAdmission {
	a.patchDefaultsAllowed = allowed
	return a
}

// WithNamespaces lets the conflict check look namespaces up, as OpenKruise
// does for spec.namespace: when a SidecarSet's namespaceSelector names its
// namespaces (kubernetes.io/metadata.name), two SidecarSets overlap only if
// one of those namespaces exists and both namespace selectors match its
// labels. get returns a namespace, or an error for which
// apierrors.IsNotFound holds when there is no such namespace (any other
// error falls back to comparing the selectors). Without it the two
// namespace selectors are compared on their own, which may report an
// overlap no existing namespace has.
func (a *SidecarSetAdmission) WithNamespaces(get func(name string) (*corev1.Namespace, error)) *SidecarSetAdmission {
	a.namespaces = get
	return a
}

var _ Handler = (*SidecarSetAdmission)(nil).Validate

// Validate handles CREATE and UPDATE of a SidecarSet, mirroring OpenKruise's
// SidecarSet validating webhook. It denies, each error naming the field and
// the fix:
//   - a name that is not a DNS label (it ends up in label values);
//   - a missing, empty or malformed spec.selector, and an empty or
//     malformed namespaceSelector;
//   - no containers at all; container and init container names that are
//     missing, not DNS labels or used twice (counting the <name>-1 and
//     <name>-2 copies of a hot-upgrade container); a missing image; bad
//     pod-container fields (imagePullPolicy, restartPolicy, probes and
//     lifecycle of plain init containers, ports, env, volumeMounts naming
//     no volume of the SidecarSet, requests above limits);
//   - podInjectPolicy, shareVolumePolicy, shareVolumeDevicePolicy and
//     upgradeType values; HotUpgrade without hotUpgradeEmptyImage or with
//     the container's own image as empty image; hot upgrade or
//     resourcesPolicy on an init container; a native-sidecar init
//     container (restartPolicy Always) with updateStrategy RollingUpdate;
//   - transferEnv without a source container or variable names, and a
//     sourceContainerNameFrom.fieldRef other than metadata.name,
//     metadata.labels['<key>'] and metadata.annotations['<key>'];
//   - resourcesPolicy combined with resources, with a bad regular
//     expression, mode or expression;
//   - volumes with a missing, malformed or repeated name, or not exactly
//     one source;
//   - updateStrategy: type values, partition with selector, partition or
//     maxUnavailable not an integer >= 0 or a percentage up to 100%,
//     maxUnavailable 0 under RollingUpdate, bad priorityStrategy and
//     scatterStrategy terms;
//   - injectionStrategy.revision without revisionName or customVersion, or
//     with a policy other than Always and Partial;
//   - patchPodMetadata: entries without annotations, bad keys, a key in two
//     entries, patchPolicy values, MergePatchJson values that are not JSON
//     objects, and keys outside the allow-list;
//   - on UPDATE, a changed upgradeType of a container, and a container name
//     the stored SidecarSet does not have (OpenKruise forbids adding or
//     renaming containers);
//   - a container, init container, differing volume or Overwrite-patched
//     annotation shared with another SidecarSet that can select the same
//     pods (checked only once the rest is valid).
//
// Status updates and deletes are allowed.
func (a *SidecarSetAdmission) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	set := &appsv1beta1.SidecarSet{}
	if err := json.Unmarshal(req.Object.Raw, set); err != nil {
		return badRequest(fmt.Sprintf("could not decode the SidecarSet: %v", err))
	}
	set.Name = cmp.Or(set.Name, req.Name)
	errs := scsValidateSpec(set)
	errs = append(errs, a.scsCheckPatchAllowList(set)...)
	if req.Operation == admissionv1.Update {
		old := &appsv1beta1.SidecarSet{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return badRequest(fmt.Sprintf("could not decode the stored SidecarSet: %v", err))
		}
		errs = append(errs, scsValidateUpdate(set, old)...)
		if was, is := old.Annotations[wellknown.AnnotationSidecarSetBase], set.Annotations[wellknown.AnnotationSidecarSetBase]; was != "" && was != is {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(wellknown.AnnotationSidecarSetBase),
				fmt.Sprintf("the base of a canary SidecarSet is immutable (it is %q); set it back, or create another canary", was)))
		}
	}
	if len(errs) == 0 && a.sets != nil {
		others, err := a.sets()
		if err != nil {
			klog.FromContext(ctx).Error(err, "List SidecarSets to check for conflicts", "sidecarset", set.Name)
			return internalError(fmt.Sprintf("could not list the other SidecarSets to check for conflicting containers: %v; retry", err))
		}
		errs = append(scsValidateCanary(set, others), a.scsConflicts(set, others)...)
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return Deny(fmt.Sprintf("SidecarSet %q is invalid: %s", set.Name, strings.Join(msgs, "\n")))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// scsValidateSpec checks everything that needs only the object itself.
func scsValidateSpec(set *appsv1beta1.SidecarSet) field.ErrorList {
	spec := &set.Spec
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if set.Name != "" {
		for _, msg := range content.IsDNS1123Label(set.Name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), set.Name,
				msg+"; a SidecarSet's name is written into label values, so use at most 63 lowercase letters, digits and '-', without dots"))
		}
	}
	if spec.Selector == nil {
		errs = append(errs, field.Required(specPath.Child("selector"),
			"a SidecarSet needs a selector for the pods to inject into; set matchLabels, for example {app: web}"))
	} else {
		errs = append(errs, scsValidateSelector(spec.Selector, specPath.Child("selector"), "pod")...)
	}
	if spec.NamespaceSelector != nil {
		errs = append(errs, scsValidateSelector(spec.NamespaceSelector, specPath.Child("namespaceSelector"), "namespace")...)
	}
	volumes, volErrs := scsValidateVolumes(spec.Volumes, specPath.Child("volumes"))
	errs = append(errs, volErrs...)
	errs = append(errs, scsValidateContainers(spec, volumes)...)
	errs = append(errs, scsValidateUpdateStrategy(&spec.UpdateStrategy, specPath.Child("updateStrategy"))...)
	errs = append(errs, scsValidateInjectionStrategy(&spec.InjectionStrategy, specPath.Child("injectionStrategy"))...)
	errs = append(errs, scsValidatePatchPodMetadata(spec.PatchPodMetadata, specPath.Child("patchPodMetadata"))...)
	return errs
}

// scsValidateSelector checks a label selector's syntax and that it is not
// empty (an empty selector would match every pod or namespace); what is
// "pod" or "namespace".
func scsValidateSelector(sel *metav1.LabelSelector, path *field.Path, what string) field.ErrorList {
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(path, "{}", fmt.Sprintf(
			"an empty selector would match every %s; add matchLabels or matchExpressions", what)))
	}
	return errs
}

// scsSetPointers returns the JSON names of the pointer fields set in the
// struct v: the sources of a VolumeSource or an EnvVarSource.
func scsSetPointers(v any) []string {
	rv := reflect.ValueOf(v)
	var set []string
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
			set = append(set, name)
		}
	}
	return set
}

// scsValidateVolumes checks spec.volumes and returns the volume names.
func scsValidateVolumes(volumes []corev1.Volume, path *field.Path) (map[string]bool, field.ErrorList) {
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range volumes {
		v := &volumes[i]
		p := path.Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "name the volume; the containers' volumeMounts refer to it by name"))
		case names[v.Name]:
			e := field.Duplicate(p.Child("name"), v.Name)
			e.Detail = "volume names must be unique within the SidecarSet; rename or remove one of them"
			errs = append(errs, e)
		default:
			for _, msg := range content.IsDNS1123Label(v.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), v.Name, msg))
			}
		}
		names[v.Name] = true
		switch sources := scsSetPointers(v.VolumeSource); {
		case len(sources) == 0:
			errs = append(errs, field.Required(p, "a volume needs exactly one source; add one, for example emptyDir: {}"))
		case len(sources) > 1:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("a volume has exactly one source, this one has %s; keep one and move the others to volumes of their own",
				strings.Join(sources, ", "))))
		}
		switch {
		case v.HostPath != nil && v.HostPath.Path == "":
			errs = append(errs, field.Required(p.Child("hostPath", "path"), "set the path on the node to mount"))
		case v.ConfigMap != nil && v.ConfigMap.Name == "":
			errs = append(errs, field.Required(p.Child("configMap", "name"), "name the ConfigMap to mount (it must exist in each pod's namespace)"))
		case v.Secret != nil && v.Secret.SecretName == "":
			errs = append(errs, field.Required(p.Child("secret", "secretName"), "name the Secret to mount (it must exist in each pod's namespace)"))
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "":
			errs = append(errs, field.Required(p.Child("persistentVolumeClaim", "claimName"), "name the PersistentVolumeClaim to mount"))
		}
	}
	return names, errs
}

// scsHotUpgradeNames are the names of the two copies of a hot-upgrade
// container in a pod.
func scsHotUpgradeNames(name string) (string, string) {
	return name + wellknown.HotUpgradeContainerSuffix1, name + wellknown.HotUpgradeContainerSuffix2
}

// scsValidateContainers checks spec.containers and spec.initContainers,
// one by one and together (names across both lists, counting hot-upgrade
// copies, must be unique: they all end up in one pod).
func scsValidateContainers(spec *appsv1beta1.SidecarSetSpec, volumes map[string]bool) field.ErrorList {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if len(spec.Containers)+len(spec.InitContainers) == 0 {
		errs = append(errs, field.Required(specPath.Child("containers"),
			"a SidecarSet injects at least one container; add an entry to containers or initContainers"))
	}
	// used maps each name a container takes in the pod to where it comes
	// from, to report a clash with the first user.
	used := map[string]string{}
	claim := func(p *field.Path, base string, names ...string) {
		for _, n := range names {
			if n == "" {
				continue
			}
			if first, ok := used[n]; ok {
				e := field.Duplicate(p.Child("name"), base)
				e.Detail = fmt.Sprintf("the pod would get two containers named %q (%s and this one); give each container of the SidecarSet a distinct name", n, first)
				errs = append(errs, e)
				return
			}
		}
		for _, n := range names {
			if n != base {
				used[n] = fmt.Sprintf("the hot-upgrade copy of %s", p)
			} else {
				used[n] = p.String()
			}
		}
	}
	rolling := spec.UpdateStrategy.Type != appsv1beta1.NotUpdateSidecarSetStrategyType
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := specPath.Child("initContainers").Index(i)
		errs = append(errs, scsValidateContainer(&c.Container, p, volumes, true)...)
		errs = append(errs, scsValidateSidecarFields(c, p)...)
		if c.UpgradeStrategy.UpgradeType == appsv1beta1.SidecarContainerHotUpgrade {
			errs = append(errs, field.Forbidden(p.Child("upgradeStrategy", "upgradeType"),
				"hot upgrade is for containers only: init containers are injected when a pod is created and never upgraded in place; remove upgradeStrategy, or move the container to spec.containers"))
		}
		if c.ResourcesPolicy != nil {
			errs = append(errs, field.Forbidden(p.Child("resourcesPolicy"),
				"resourcesPolicy is supported for containers only; set resources on the init container instead, or move it to spec.containers"))
		}
		if rolling && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			errs = append(errs, field.Invalid(specPath.Child("updateStrategy", "type"), string(cmp.Or(spec.UpdateStrategy.Type, appsv1beta1.RollingUpdateSidecarSetStrategyType)), fmt.Sprintf(
				"init container %q is a native sidecar (restartPolicy Always), which cannot be updated in place; set spec.updateStrategy.type to NotUpdate", c.Name)))
		}
		claim(p, c.Name, c.Name)
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		p := specPath.Child("containers").Index(i)
		errs = append(errs, scsValidateContainer(&c.Container, p, volumes, false)...)
		errs = append(errs, scsValidateSidecarFields(c, p)...)
		if c.ResourcesPolicy != nil {
			errs = append(errs, scsValidateResourcesPolicy(c, p.Child("resourcesPolicy"))...)
		}
		if c.UpgradeStrategy.UpgradeType == appsv1beta1.SidecarContainerHotUpgrade {
			errs = append(errs, scsValidateHotUpgrade(c, p)...)
			one, two := scsHotUpgradeNames(c.Name)
			claim(p, c.Name, c.Name, one, two)
		} else {
			claim(p, c.Name, c.Name)
		}
	}
	return errs
}

// scsValidateSidecarFields checks the SidecarSet fields of a container or
// init container: policies' values and transferEnv.
func scsValidateSidecarFields(c *appsv1beta1.SidecarContainer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch c.PodInjectPolicy {
	case "", appsv1beta1.BeforeAppContainerType, appsv1beta1.AfterAppContainerType:
	default:
		errs = append(errs, field.NotSupported(p.Child("podInjectPolicy"), c.PodInjectPolicy,
			[]string{string(appsv1beta1.BeforeAppContainerType), string(appsv1beta1.AfterAppContainerType)}))
	}
	shareTypes := []string{string(appsv1beta1.ShareVolumePolicyEnabled), string(appsv1beta1.ShareVolumePolicyDisabled)}
	if t := c.ShareVolumePolicy.Type; t != "" && !slices.Contains(shareTypes, string(t)) {
		errs = append(errs, field.NotSupported(p.Child("shareVolumePolicy", "type"), t, shareTypes))
	}
	if d := c.ShareVolumeDevicePolicy; d != nil && d.Type != "" && !slices.Contains(shareTypes, string(d.Type)) {
		errs = append(errs, field.NotSupported(p.Child("shareVolumeDevicePolicy", "type"), d.Type, shareTypes))
	}
	switch c.UpgradeStrategy.UpgradeType {
	case "", appsv1beta1.SidecarContainerColdUpgrade, appsv1beta1.SidecarContainerHotUpgrade:
	default:
		errs = append(errs, field.NotSupported(p.Child("upgradeStrategy", "upgradeType"), c.UpgradeStrategy.UpgradeType,
			[]string{string(appsv1beta1.SidecarContainerColdUpgrade), string(appsv1beta1.SidecarContainerHotUpgrade)}))
	}
	for j := range c.TransferEnv {
		errs = append(errs, scsValidateTransferEnv(&c.TransferEnv[j], p.Child("transferEnv").Index(j))...)
	}
	return errs
}

// scsValidateHotUpgrade checks a HotUpgrade container's upgradeStrategy.
func scsValidateHotUpgrade(c *appsv1beta1.SidecarContainer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	empty := c.UpgradeStrategy.HotUpgradeEmptyImage
	switch {
	case empty == "":
		errs = append(errs, field.Required(p.Child("upgradeStrategy", "hotUpgradeEmptyImage"),
			"HotUpgrade keeps an idle copy of the container on an empty image; set hotUpgradeEmptyImage to an image that accepts the container's command, probes and hooks but does no work, or use upgradeType ColdUpgrade"))
	case empty == c.Image:
		errs = append(errs, field.Invalid(p.Child("upgradeStrategy", "hotUpgradeEmptyImage"), empty,
			"must differ from the container's image: the controller tells the idle copy by its empty image; use a separate image that does no work"))
	}
	if maxLen := validation.DNS1123LabelMaxLength - 2; len(c.Name) > maxLen {
		errs = append(errs, field.Invalid(p.Child("name"), c.Name, fmt.Sprintf(
			"hot upgrade injects %s-1 and %s-2, which must fit in 63 characters; use a name of at most %d characters", c.Name, c.Name, maxLen)))
	}
	return errs
}

// scsValidateTransferEnv checks one transferEnv entry.
func scsValidateTransferEnv(t *appsv1beta1.TransferEnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	from := t.SourceContainerNameFrom
	switch {
	case from != nil && from.FieldRef == nil:
		errs = append(errs, field.Required(p.Child("sourceContainerNameFrom", "fieldRef"),
			"set fieldRef.fieldPath to the pod field holding the source container's name, such as metadata.labels['app.example.com/main-container'], or use sourceContainerName instead"))
	case from == nil && t.SourceContainerName == "":
		errs = append(errs, field.Required(p.Child("sourceContainerName"),
			"name the pod container to copy the variables from, or read its name from the pod with sourceContainerNameFrom.fieldRef"))
	case from != nil:
		errs = append(errs, scsValidateFieldRef(from.FieldRef, p.Child("sourceContainerNameFrom", "fieldRef"))...)
	}
	if t.EnvName == "" && len(t.EnvNames) == 0 {
		errs = append(errs, field.Required(p.Child("envName"), "name the variable to copy with envName, or several with envNames"))
	}
	for k, n := range t.EnvNames {
		if n == "" {
			errs = append(errs, field.Required(p.Child("envNames").Index(k), "remove the empty entry or name a variable"))
		}
	}
	return errs
}

// scsValidateFieldRef checks sourceContainerNameFrom.fieldRef: apiVersion
// v1 (or empty) and a fieldPath of metadata.name,
// metadata.labels['<key>'] or metadata.annotations['<key>'].
func scsValidateFieldRef(ref *corev1.ObjectFieldSelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		errs = append(errs, field.NotSupported(p.Child("apiVersion"), ref.APIVersion, []string{"v1"}))
	}
	const fix = "use metadata.name, metadata.labels['<key>'] or metadata.annotations['<key>']"
	fp := ref.FieldPath
	if fp == "metadata.name" {
		return errs
	}
	idx := strings.Index(fp, "['")
	if idx < 0 || !strings.HasSuffix(fp, "']") || idx+2 > len(fp)-2 {
		return append(errs, field.Invalid(p.Child("fieldPath"), fp, "not a supported pod field; "+fix))
	}
	path, key := fp[:idx], fp[idx+2:len(fp)-2]
	switch path {
	case "metadata.labels":
		for _, msg := range content.IsLabelKey(key) {
			errs = append(errs, field.Invalid(p.Child("fieldPath"), fp, "the label key: "+msg))
		}
	case "metadata.annotations":
		for _, msg := range content.IsLabelKey(strings.ToLower(key)) {
			errs = append(errs, field.Invalid(p.Child("fieldPath"), fp, "the annotation key: "+msg))
		}
	default:
		errs = append(errs, field.Invalid(p.Child("fieldPath"), fp, "not a supported pod field; "+fix))
	}
	return errs
}

// scsValidateContainer checks the pod-container fields of a sidecar the
// way pod validation would, for the fields that matter most; volumes are
// the SidecarSet's volume names.
func scsValidateContainer(c *corev1.Container, p *field.Path, volumes map[string]bool, init bool) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "name the container; the name must be unique in the pod"))
	} else {
		for _, msg := range content.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
	}
	switch {
	case c.Image == "":
		errs = append(errs, field.Required(p.Child("image"), "set the image to run, for example nginx:1.27"))
	case strings.TrimSpace(c.Image) != c.Image:
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "remove the leading and trailing spaces"))
	}
	switch c.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]string{string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever)}))
	}
	restartable := false
	if c.RestartPolicy != nil {
		switch {
		case !init:
			errs = append(errs, field.Forbidden(p.Child("restartPolicy"),
				"only init containers take a restartPolicy (Always makes a native sidecar); remove it, or move the container to spec.initContainers"))
		case *c.RestartPolicy != corev1.ContainerRestartPolicyAlways:
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []string{string(corev1.ContainerRestartPolicyAlways)}))
		default:
			restartable = true
		}
	}
	if init && !restartable {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil},
		} {
			if name := f.name; f.set {
				errs = append(errs, field.Forbidden(p.Child(name),
					"an init container runs to completion before the app starts, so it takes no "+name+"; remove it, or set restartPolicy: Always to make it a native sidecar"))
			}
		}
	}
	portNames := map[string]bool{}
	for k, port := range c.Ports {
		pp := p.Child("ports").Index(k)
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		switch port.Protocol {
		case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol,
				[]string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}))
		}
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames[port.Name] {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames[port.Name] = true
		}
	}
	for k := range c.Env {
		errs = append(errs, scsValidateEnv(&c.Env[k], p.Child("env").Index(k))...)
	}
	mountPaths := map[string]bool{}
	for k, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(k)
		switch {
		case m.Name == "":
			errs = append(errs, field.Required(mp.Child("name"), "name one of spec.volumes"))
		case !volumes[m.Name]:
			e := field.NotFound(mp.Child("name"), m.Name)
			e.Detail = fmt.Sprintf("spec.volumes has no volume %q; add it to spec.volumes (a pod volume of the same name is used when the pod has one), or enable shareVolumePolicy to get the pod's mounts", m.Name)
			errs = append(errs, e)
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(mp.Child("mountPath"), "set where in the container to mount the volume"))
		case mountPaths[m.MountPath]:
			e := field.Duplicate(mp.Child("mountPath"), m.MountPath)
			e.Detail = "two mounts at one path; mount each volume at its own path"
			errs = append(errs, e)
		}
		mountPaths[m.MountPath] = true
	}
	for k, d := range c.VolumeDevices {
		if !volumes[d.Name] {
			errs = append(errs, field.Invalid(p.Child("volumeDevices").Index(k).Child("name"), d.Name,
				"spec.volumes has no such volume; add it to spec.volumes"))
		}
	}
	for name, req := range c.Resources.Requests {
		if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(p.Child("resources", "requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the %s limit of %s; lower the request or raise the limit", name, lim.String())))
		}
	}
	return errs
}

// scsValidateEnv checks one env entry of a sidecar.
func scsValidateEnv(e *corev1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg))
	}
	if e.ValueFrom == nil {
		return errs
	}
	if e.Value != "" {
		errs = append(errs, field.Invalid(p.Child("valueFrom"), "", "may not be set when value is set; keep one of value and valueFrom"))
	}
	if n := len(scsSetPointers(*e.ValueFrom)); n != 1 {
		errs = append(errs, field.Invalid(p.Child("valueFrom"), "", fmt.Sprintf(
			"set exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef and fileKeyRef (found %d)", n)))
	}
	return errs
}

// scsValidateResourcesPolicy checks a container's resourcesPolicy, as
// OpenKruise does.
func scsValidateResourcesPolicy(c *appsv1beta1.SidecarContainer, p *field.Path) field.ErrorList {
	policy := c.ResourcesPolicy
	if len(c.Resources.Limits) > 0 || len(c.Resources.Requests) > 0 {
		return field.ErrorList{field.Forbidden(p,
			"resourcesPolicy computes the container's resources, so it cannot be combined with resources; remove resources.limits and resources.requests, or remove resourcesPolicy")}
	}
	var errs field.ErrorList
	switch policy.TargetContainersMode {
	case appsv1beta1.TargetContainersModeSum, appsv1beta1.TargetContainersModeMax:
	default:
		errs = append(errs, field.NotSupported(p.Child("targetContainersMode"), policy.TargetContainersMode,
			[]string{string(appsv1beta1.TargetContainersModeSum), string(appsv1beta1.TargetContainersModeMax)}))
	}
	if policy.TargetContainersNameRegex == "" {
		errs = append(errs, field.Required(p.Child("targetContainersNameRegex"),
			"set a regular expression matching the names of the pod's containers to size the sidecar by, for example ^app$ or .*"))
	} else if _, err := regexp.Compile(policy.TargetContainersNameRegex); err != nil {
		errs = append(errs, field.Invalid(p.Child("targetContainersNameRegex"), policy.TargetContainersNameRegex,
			fmt.Sprintf("not a regular expression: %v", err)))
	}
	expr := p.Child("resourcesExpr")
	if policy.ResourcesExpr.Limits == nil && policy.ResourcesExpr.Requests == nil {
		return append(errs, field.Required(expr, "set limits, requests or both, for example limits: {cpu: \"max(cpu*50%, 50m)\"}"))
	}
	check := func(path *field.Path, value, variable string) {
		if value == "" {
			return
		}
		if err := scsCheckResourceExpr(value, variable); err != nil {
			errs = append(errs, field.Invalid(path, value, fmt.Sprintf(
				"invalid expression: %v; use %s, numbers, percentages, quantities such as 50m or 100Mi, + - * /, parentheses, max(a, b) and min(a, b), for example max(%s*50%%, 100m)",
				err, variable, variable)))
		}
	}
	if l := policy.ResourcesExpr.Limits; l != nil {
		check(expr.Child("limits", "cpu"), l.CPU, "cpu")
		check(expr.Child("limits", "memory"), l.Memory, "memory")
	}
	if r := policy.ResourcesExpr.Requests; r != nil {
		check(expr.Child("requests", "cpu"), r.CPU, "cpu")
		check(expr.Child("requests", "memory"), r.Memory, "memory")
	}
	return errs
}

// scsIntStrSet reports whether partition is set to something other than
// the integer 0 (OpenKruise counts every string, "0%" too).
func scsIntStrSet(v *intstr.IntOrString) bool {
	return v != nil && (v.Type == intstr.String || v.IntVal != 0)
}

// scsPercent matches a percentage from 0% to 100%.
var scsPercent = regexp.MustCompile(`^0*(100|[1-9]?[0-9])%$`)

// scsValidateIntOrPercent checks an integer of at least 0 or a percentage
// from 0% to 100%.
func scsValidateIntOrPercent(v *intstr.IntOrString, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return field.ErrorList{field.Invalid(p, v.IntVal, "must be 0 or more; use a pod count or a percentage such as \"10%\"")}
		}
		return nil
	}
	if !scsPercent.MatchString(v.StrVal) {
		return field.ErrorList{field.Invalid(p, v.StrVal, "use a pod count such as 2 (without quotes) or a percentage from 0% to 100% such as \"10%\"")}
	}
	return nil
}

// scsValidateUpdateStrategy checks spec.updateStrategy.
func scsValidateUpdateStrategy(s *appsv1beta1.SidecarSetUpdateStrategy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case "", appsv1beta1.RollingUpdateSidecarSetStrategyType, appsv1beta1.NotUpdateSidecarSetStrategyType:
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type,
			[]string{string(appsv1beta1.RollingUpdateSidecarSetStrategyType), string(appsv1beta1.NotUpdateSidecarSetStrategyType)}))
	}
	rolling := s.Type != appsv1beta1.NotUpdateSidecarSetStrategyType
	if rolling && scsIntStrSet(s.Partition) && s.Selector != nil {
		errs = append(errs, field.Forbidden(p.Child("partition"),
			"partition and selector cannot be used together (selector picks the pods to update, partition how many stay behind); set partition to 0 or remove it, or remove selector"))
	}
	if s.Selector != nil {
		errs = append(errs, scsValidateSelector(s.Selector, p.Child("selector"), "pod")...)
	}
	errs = append(errs, scsValidateIntOrPercent(s.Partition, p.Child("partition"))...)
	if mu := s.MaxUnavailable; mu != nil {
		mErrs := scsValidateIntOrPercent(mu, p.Child("maxUnavailable"))
		errs = append(errs, mErrs...)
		if len(mErrs) == 0 && rolling && (mu.Type == intstr.Int && mu.IntVal == 0 || mu.Type == intstr.String && strings.TrimLeft(mu.StrVal, "0") == "%") {
			errs = append(errs, field.Invalid(p.Child("maxUnavailable"), mu.String(),
				"a rolling update with maxUnavailable 0 never updates a pod; use 1 or more or a percentage above 0%, or set paused: true (or type NotUpdate) to hold updates"))
		}
	}
	errs = append(errs, scsValidatePriorityStrategy(s.PriorityStrategy, p.Child("priorityStrategy"))...)
	seen := map[pub.UpdateScatterTerm]bool{}
	for i, term := range s.ScatterStrategy {
		tp := p.Child("scatterStrategy").Index(i)
		if term.Key == "" {
			errs = append(errs, field.Required(tp.Child("key"), "set the pod label key whose pods to spread over the update"))
		}
		if term.Value == "" {
			errs = append(errs, field.Required(tp.Child("value"), "set the label value whose pods to spread over the update"))
		}
		if seen[term] {
			e := field.Duplicate(tp, term.Key+"="+term.Value)
			e.Detail = "list each key and value once"
			errs = append(errs, e)
		}
		seen[term] = true
	}
	return errs
}

// scsValidatePriorityStrategy checks updateStrategy.priorityStrategy as
// OpenKruise's FieldsValidation does.
func scsValidatePriorityStrategy(s *pub.UpdatePriorityStrategy, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if len(s.WeightPriority) > 0 && len(s.OrderPriority) > 0 {
		errs = append(errs, field.Forbidden(p, "set only one of weightPriority and orderPriority"))
	}
	for i, w := range s.WeightPriority {
		wp := p.Child("weightPriority").Index(i)
		if w.Weight < 0 || w.Weight > 100 {
			errs = append(errs, field.Invalid(wp.Child("weight"), w.Weight, "use a weight from 0 to 100"))
		}
		if len(w.MatchSelector.MatchLabels)+len(w.MatchSelector.MatchExpressions) == 0 {
			errs = append(errs, field.Required(wp.Child("matchSelector"),
				"must not be empty; set matchLabels or matchExpressions to the pods this weight is for"))
		} else {
			errs = append(errs, metav1validation.ValidateLabelSelector(&w.MatchSelector, metav1validation.LabelSelectorValidationOptions{}, wp.Child("matchSelector"))...)
		}
	}
	for i, o := range s.OrderPriority {
		if o.OrderedKey == "" {
			errs = append(errs, field.Required(p.Child("orderPriority").Index(i).Child("orderedKey"),
				"set the pod label key whose value orders the pods"))
		}
	}
	return errs
}

// scsValidateInjectionStrategy checks spec.injectionStrategy.revision.
func scsValidateInjectionStrategy(s *appsv1beta1.SidecarSetInjectionStrategy, p *field.Path) field.ErrorList {
	r := s.Revision
	if r == nil {
		return nil
	}
	rp := p.Child("revision")
	var errs field.ErrorList
	switch {
	case r.RevisionName == nil && r.CustomVersion == nil:
		errs = append(errs, field.Required(rp,
			"name the revision to inject: set revisionName (a ControllerRevision of this SidecarSet) or customVersion (a spec.customVersion it had), or remove revision to inject the current one"))
	case r.RevisionName != nil && *r.RevisionName == "":
		errs = append(errs, field.Invalid(rp.Child("revisionName"), "", "name a ControllerRevision of this SidecarSet, or remove revisionName"))
	case r.CustomVersion != nil && *r.CustomVersion == "":
		errs = append(errs, field.Invalid(rp.Child("customVersion"), "", "give a spec.customVersion the SidecarSet had, or remove customVersion"))
	}
	switch r.Policy {
	case "", appsv1beta1.AlwaysSidecarSetInjectRevisionPolicy, appsv1beta1.PartialSidecarSetInjectRevisionPolicy:
	default:
		errs = append(errs, field.NotSupported(rp.Child("policy"), r.Policy,
			[]string{string(appsv1beta1.AlwaysSidecarSetInjectRevisionPolicy), string(appsv1beta1.PartialSidecarSetInjectRevisionPolicy)}))
	}
	return errs
}

// scsSortedKeys returns m's keys in order.
func scsSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// scsValidatePatchPodMetadata checks spec.patchPodMetadata's form (the
// allow-list is scsCheckPatchAllowList's).
func scsValidatePatchPodMetadata(patches []appsv1beta1.SidecarSetPatchPodMetadata, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	first := map[string]int{}
	for i, patch := range patches {
		pp := p.Index(i)
		ap := pp.Child("annotations")
		if len(patch.Annotations) == 0 {
			errs = append(errs, field.Required(ap, "list at least one annotation to set on the pods, or remove the entry"))
		}
		errs = append(errs, apivalidation.ValidateAnnotations(patch.Annotations, ap)...)
		switch patch.PatchPolicy {
		case "", appsv1beta1.SidecarSetRetainPatchPolicy, appsv1beta1.SidecarSetOverwritePatchPolicy, appsv1beta1.SidecarSetMergePatchJsonPatchPolicy:
		default:
			errs = append(errs, field.NotSupported(pp.Child("patchPolicy"), patch.PatchPolicy, []string{
				string(appsv1beta1.SidecarSetRetainPatchPolicy), string(appsv1beta1.SidecarSetOverwritePatchPolicy), string(appsv1beta1.SidecarSetMergePatchJsonPatchPolicy)}))
		}
		for _, k := range scsSortedKeys(patch.Annotations) {
			if j, ok := first[k]; ok {
				e := field.Duplicate(ap.Key(k), k)
				e.Detail = fmt.Sprintf("also set by %s; set each annotation in one entry", p.Index(j))
				errs = append(errs, e)
			} else {
				first[k] = i
			}
			if patch.PatchPolicy == appsv1beta1.SidecarSetMergePatchJsonPatchPolicy {
				var obj map[string]any
				if err := json.Unmarshal([]byte(patch.Annotations[k]), &obj); err != nil || obj == nil {
					errs = append(errs, field.Invalid(ap.Key(k), patch.Annotations[k],
						"with patchPolicy MergePatchJson the value is merged into the pod's annotation as a JSON merge patch, so it must be a JSON object such as {\"key\":\"value\"}; fix the value or use patchPolicy Overwrite"))
				}
			}
		}
	}
	return errs
}

// scsCheckPatchAllowList denies the patchPodMetadata annotation keys that
// no allow-list rule applying to the SidecarSet permits, as OpenKruise's
// ValidateSidecarSetPatchMetadataWhitelist does.
func (a *SidecarSetAdmission) scsCheckPatchAllowList(set *appsv1beta1.SidecarSet) field.ErrorList {
	if len(set.Spec.PatchPodMetadata) == 0 {
		return nil
	}
	path := field.NewPath("spec", "patchPodMetadata")
	var rules []SidecarSetPatchPodMetadataRule
	if a.patchRules != nil {
		var err error
		if rules, err = a.patchRules(); err != nil {
			return field.ErrorList{field.InternalError(path, fmt.Errorf("could not read the patchPodMetadata allow-list: %w; retry", err))}
		}
	}
	var allowed []*regexp.Regexp
	var exprs []string
	for _, rule := range rules {
		if rule.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(rule.Selector)
			if err != nil {
				return field.ErrorList{field.InternalError(path, fmt.Errorf(
					"the patchPodMetadata allow-list has an invalid selector: %w; ask the cluster administrator to fix the allow-list", err))}
			}
			if !sel.Matches(labels.Set(set.Labels)) {
				continue
			}
		}
		for _, expr := range rule.AllowedAnnotationKeyExprs {
			re, err := regexp.Compile(expr)
			if err != nil {
				return field.ErrorList{field.InternalError(path, fmt.Errorf(
					"the patchPodMetadata allow-list has an invalid expression %q: %w; ask the cluster administrator to fix the allow-list", expr, err))}
			}
			allowed = append(allowed, re)
			exprs = append(exprs, expr)
		}
	}
	if len(allowed) == 0 && a.patchDefaultsAllowed {
		return nil
	}
	var errs field.ErrorList
	for i, patch := range set.Spec.PatchPodMetadata {
		for _, k := range scsSortedKeys(patch.Annotations) {
			kp := path.Index(i).Child("annotations").Key(k)
			switch {
			case len(allowed) == 0:
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf(
					"annotation %q is not allowed: no patchPodMetadata allow-list rule applies to this SidecarSet, and without one patchPodMetadata is denied; ask the cluster administrator to add an expression matching the key to the allow-list (OpenKruise's SidecarSet_PatchPodMetadata_WhiteList) or to turn on the feature gate SidecarSetPatchPodMetadataDefaultsAllowed, or remove the annotation", k)))
			case !slices.ContainsFunc(allowed, func(re *regexp.Regexp) bool { return re.MatchString(k) }):
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf(
					"annotation %q matches none of the allowed expressions %q; use an allowed key, or ask the cluster administrator to add an expression for it to the patchPodMetadata allow-list", k, exprs)))
			}
		}
	}
	return errs
}

// scsValidateUpdate checks an UPDATE against the stored SidecarSet: a
// container keeps its upgradeType (kruise#855), and no container is added
// or renamed (kruise#937).
func scsValidateUpdate(set, old *appsv1beta1.SidecarSet) field.ErrorList {
	oldTypes := map[string]appsv1beta1.SidecarContainerUpgradeType{}
	for _, c := range old.Spec.Containers {
		oldTypes[c.Name] = cmp.Or(c.UpgradeStrategy.UpgradeType, appsv1beta1.SidecarContainerColdUpgrade)
	}
	var errs field.ErrorList
	for i, c := range set.Spec.Containers {
		p := field.NewPath("spec", "containers").Index(i)
		was, ok := oldTypes[c.Name]
		if !ok {
			errs = append(errs, field.Forbidden(p.Child("name"), fmt.Sprintf(
				"container %q is not in the stored SidecarSet: containers cannot be added or renamed after creation (kruise#937); keep the existing names, or create a new SidecarSet for this container", c.Name)))
			continue
		}
		if now := cmp.Or(c.UpgradeStrategy.UpgradeType, appsv1beta1.SidecarContainerColdUpgrade); now != was {
			errs = append(errs, field.Forbidden(p.Child("upgradeStrategy", "upgradeType"), fmt.Sprintf(
				"upgradeType of container %q is immutable (kruise#855): it is %s; set it back, or create a new SidecarSet instead", c.Name, was)))
		}
	}
	return errs
}

// scsPodNames are the container names a SidecarSet's containers and init
// containers take in a pod, each with a description for messages:
// "<name>" itself, and for a hot-upgrade container also "<name>-1" and
// "<name>-2".
func scsPodNames(set *appsv1beta1.SidecarSet) map[string]string {
	names := map[string]string{}
	for _, c := range set.Spec.InitContainers {
		names[c.Name] = fmt.Sprintf("%q", c.Name)
	}
	for _, c := range set.Spec.Containers {
		names[c.Name] = fmt.Sprintf("%q", c.Name)
		if c.UpgradeStrategy.UpgradeType == appsv1beta1.SidecarContainerHotUpgrade {
			one, two := scsHotUpgradeNames(c.Name)
			names[one] = fmt.Sprintf("%q (hot-upgrade copy of %q)", one, c.Name)
			names[two] = fmt.Sprintf("%q (hot-upgrade copy of %q)", two, c.Name)
		}
	}
	return names
}

// scsConflicts lists what set shares with the other SidecarSets that can
// select the same pods: container names (a pod cannot hold two containers
// of one name), volumes of one name but different content, and annotations
// that one of them patches with Overwrite and the other with anything but
// Retain.
func (a *SidecarSetAdmission) scsConflicts(set *appsv1beta1.SidecarSet, others []*appsv1beta1.SidecarSet) field.ErrorList {
	others = slices.DeleteFunc(slices.Clone(others), func(o *appsv1beta1.SidecarSet) bool { return o == nil })
	slices.SortFunc(others, func(x, y *appsv1beta1.SidecarSet) int { return cmp.Compare(x.Name, y.Name) })
	var errs field.ErrorList
	for _, o := range others {
		if o.Name == set.Name || scsCanaryPair(set, o) || !scsPodSelectorsOverlap(set.Spec.Selector, o.Spec.Selector) || !a.scsNamespacesOverlap(set, o) {
			continue
		}
		theirs := scsPodNames(o)
		check := func(p *field.Path, c *appsv1beta1.SidecarContainer, hot bool) {
			names := []string{c.Name}
			if hot {
				one, two := scsHotUpgradeNames(c.Name)
				names = append(names, one, two)
			}
			for _, n := range names {
				desc, ok := theirs[n]
				if !ok {
					continue
				}
				mine := fmt.Sprintf("%q", n)
				if n != c.Name {
					mine = fmt.Sprintf("%q (hot-upgrade copy of %q)", n, c.Name)
				}
				e := field.Duplicate(p.Child("name"), c.Name)
				if mine == desc {
					e.Detail = fmt.Sprintf("container %s is also injected by SidecarSet %q which selects the same pods; rename one of them", mine, o.Name)
				} else {
					e.Detail = fmt.Sprintf("container %s clashes with container %s of SidecarSet %q, which selects the same pods; rename one of them", mine, desc, o.Name)
				}
				errs = append(errs, e)
				return
			}
		}
		for i := range set.Spec.InitContainers {
			check(field.NewPath("spec", "initContainers").Index(i), &set.Spec.InitContainers[i], false)
		}
		for i := range set.Spec.Containers {
			c := &set.Spec.Containers[i]
			check(field.NewPath("spec", "containers").Index(i), c, c.UpgradeStrategy.UpgradeType == appsv1beta1.SidecarContainerHotUpgrade)
		}
		for i := range set.Spec.Volumes {
			v := &set.Spec.Volumes[i]
			for j := range o.Spec.Volumes {
				if ov := &o.Spec.Volumes[j]; ov.Name == v.Name && !apiequality.Semantic.DeepEqual(v, ov) {
					errs = append(errs, field.Invalid(field.NewPath("spec", "volumes").Index(i), v.Name, fmt.Sprintf(
						"SidecarSet %q, which selects the same pods, also injects a volume %q with different content, and a pod holds one volume of a name; make the two volumes identical, or rename one of them", o.Name, v.Name)))
					break
				}
			}
		}
		errs = append(errs, scsAnnotationConflicts(set, o)...)
	}
	return errs
}

// scsAnnotationConflicts lists the annotations set and o both patch, not
// with Retain, where one of them overwrites.
func scsAnnotationConflicts(set, o *appsv1beta1.SidecarSet) field.ErrorList {
	policy := func(p appsv1beta1.SidecarSetPatchPolicyType) appsv1beta1.SidecarSetPatchPolicyType {
		return cmp.Or(p, appsv1beta1.SidecarSetRetainPatchPolicy)
	}
	theirs := map[string]appsv1beta1.SidecarSetPatchPolicyType{}
	for _, patch := range o.Spec.PatchPodMetadata {
		if policy(patch.PatchPolicy) == appsv1beta1.SidecarSetRetainPatchPolicy {
			continue
		}
		for k := range patch.Annotations {
			theirs[k] = policy(patch.PatchPolicy)
		}
	}
	var errs field.ErrorList
	for i, patch := range set.Spec.PatchPodMetadata {
		mine := policy(patch.PatchPolicy)
		if mine == appsv1beta1.SidecarSetRetainPatchPolicy {
			continue
		}
		for _, k := range scsSortedKeys(patch.Annotations) {
			other, ok := theirs[k]
			if !ok || (mine != appsv1beta1.SidecarSetOverwritePatchPolicy && other != appsv1beta1.SidecarSetOverwritePatchPolicy) {
				continue
			}
			errs = append(errs, field.Invalid(field.NewPath("spec", "patchPodMetadata").Index(i).Child("annotations").Key(k), k, fmt.Sprintf(
				"SidecarSet %q, which selects the same pods, also patches annotation %q (patchPolicy %s), and with Overwrite on either side the two would undo each other; patch it from one SidecarSet only, or use patchPolicy Retain", o.Name, k, other)))
		}
	}
	return errs
}

// scsPodSelectorsOverlap reports whether some pod's labels can match both
// pod selectors. A missing or empty selector matches no pod, as in
// OpenKruise.
func scsPodSelectorsOverlap(x, y *metav1.LabelSelector) bool {
	if x == nil || y == nil || len(x.MatchLabels)+len(x.MatchExpressions) == 0 || len(y.MatchLabels)+len(y.MatchExpressions) == 0 {
		return false
	}
	return scsSelectorsSatisfiable(x, y)
}

// scsSelectorsSatisfiable reports whether one set of labels can satisfy
// every requirement of all the selectors at once. Unlike OpenKruise's
// IsSelectorOverlapping, which also reads a selector requiring a label
// that the other does not mention as disjoint from it, this is exact:
// label keys are independent, so the selectors overlap exactly when each
// key's requirements can hold together.
func scsSelectorsSatisfiable(sels ...*metav1.LabelSelector) bool {
	byKey := map[string][]metav1.LabelSelectorRequirement{}
	for _, s := range sels {
		for k, v := range s.MatchLabels {
			byKey[k] = append(byKey[k], metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
		}
		for _, r := range s.MatchExpressions {
			byKey[r.Key] = append(byKey[r.Key], r)
		}
	}
	for _, reqs := range byKey {
		if !scsKeySatisfiable(reqs) {
			return false
		}
	}
	return true
}

// scsKeySatisfiable reports whether one label key can meet all reqs: be
// absent (no In or Exists, which need it) or take a value allowed by every
// In and by no NotIn.
func scsKeySatisfiable(reqs []metav1.LabelSelectorRequirement) bool {
	var allowed []string // nil: any value
	var in, exists, absent bool
	excluded := map[string]bool{}
	for _, r := range reqs {
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			if in {
				allowed = slices.DeleteFunc(allowed, func(v string) bool { return !slices.Contains(r.Values, v) })
			} else {
				allowed, in = slices.Clone(r.Values), true
			}
		case metav1.LabelSelectorOpExists:
			exists = true
		case metav1.LabelSelectorOpDoesNotExist:
			absent = true
		case metav1.LabelSelectorOpNotIn:
			for _, v := range r.Values {
				excluded[v] = true
			}
		}
	}
	switch {
	case absent:
		return !in && !exists
	case in:
		return slices.ContainsFunc(allowed, func(v string) bool { return !excluded[v] })
	default:
		return true
	}
}

// scsPinnedNamespaces returns the namespace names a namespace selector is
// limited to by kubernetes.io/metadata.name (matchLabels or In), if it is.
func scsPinnedNamespaces(sel *metav1.LabelSelector) ([]string, bool) {
	var names []string
	pinned := false
	narrow := func(values []string) {
		if pinned {
			names = slices.DeleteFunc(names, func(n string) bool { return !slices.Contains(values, n) })
		} else {
			names, pinned = slices.Clone(values), true
		}
	}
	if v, ok := sel.MatchLabels[corev1.LabelMetadataName]; ok {
		narrow([]string{v})
	}
	for _, r := range sel.MatchExpressions {
		if r.Key == corev1.LabelMetadataName && r.Operator == metav1.LabelSelectorOpIn {
			narrow(r.Values)
		}
	}
	return names, pinned
}

// scsNamespacesOverlap reports whether the two SidecarSets can select pods
// of one namespace. A SidecarSet without namespaceSelector covers every
// namespace.
func (a *SidecarSetAdmission) scsNamespacesOverlap(x, y *appsv1beta1.SidecarSet) bool {
	sx, sy := x.Spec.NamespaceSelector, y.Spec.NamespaceSelector
	if sx == nil || sy == nil {
		return true
	}
	if a.namespaces != nil {
		names, ok := scsPinnedNamespaces(sx)
		if !ok {
			names, ok = scsPinnedNamespaces(sy)
		}
		if ok {
			if overlap, known := a.scsSomeNamespaceMatches(names, sx, sy); known {
				return overlap
			}
		}
	}
	return scsSelectorsSatisfiable(sx, sy)
}

// scsSomeNamespaceMatches reports whether one of the named namespaces
// exists and matches both selectors; known is false when a namespace could
// not be looked up.
func (a *SidecarSetAdmission) scsSomeNamespaceMatches(names []string, sx, sy *metav1.LabelSelector) (overlap, known bool) {
	matches := func(sel *metav1.LabelSelector, set labels.Set) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		return err != nil || s.Matches(set)
	}
	for _, name := range names {
		ns, err := a.namespaces(name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil || ns == nil {
			return false, false
		}
		set := labels.Set{}
		for k, v := range ns.Labels {
			set[k] = v
		}
		set[corev1.LabelMetadataName] = name
		if matches(sx, set) && matches(sy, set) {
			return true, true
		}
	}
	return false, true
}

// scsExprValue is a resourcesPolicy expression's value while checking it:
// a plain number or a quantity (such as 50m).
type scsExprValue struct {
	number   float64
	quantity bool
}

// scsExprToken is a token of a resourcesPolicy expression: kind is 'n'
// (number or percentage, value set), 'q' (quantity, value set), 'i'
// (identifier) or the operator or parenthesis itself.
type scsExprToken struct {
	kind  byte
	text  string
	value float64
}

// scsQuantityUnits are the units a quantity may have in an expression (as
// in OpenKruise's calculator).
var scsQuantityUnits = []string{"m", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti", "Pi"}

func scsIsDigit(c byte) bool  { return c >= '0' && c <= '9' }
func scsIsLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// scsLexResourceExpr splits an expression into tokens.
func scsLexResourceExpr(s string) ([]scsExprToken, error) {
	var toks []scsExprToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case strings.IndexByte("+-*/(),", c) >= 0:
			toks = append(toks, scsExprToken{kind: c, text: string(c)})
			i++
		case scsIsDigit(c) || c == '.':
			j := i
			for j < len(s) && (scsIsDigit(s[j]) || s[j] == '.') {
				j++
			}
			if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
				k := j + 1
				if k < len(s) && (s[k] == '+' || s[k] == '-') {
					k++
				}
				if k < len(s) && scsIsDigit(s[k]) {
					for j = k; j < len(s) && scsIsDigit(s[j]); j++ {
					}
				}
			}
			num := s[i:j]
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a number", num)
			}
			switch {
			case j < len(s) && s[j] == '%':
				toks = append(toks, scsExprToken{kind: 'n', text: s[i : j+1], value: f / 100})
				j++
			case j < len(s) && scsIsLetter(s[j]):
				k := j
				for k < len(s) && scsIsLetter(s[k]) {
					k++
				}
				unit := s[j:k]
				q, err := resource.ParseQuantity(s[i:k])
				if !slices.Contains(scsQuantityUnits, unit) || err != nil {
					return nil, fmt.Errorf("%q is not a quantity (units: %s)", s[i:k], strings.Join(scsQuantityUnits, ", "))
				}
				toks = append(toks, scsExprToken{kind: 'q', text: s[i:k], value: q.AsApproximateFloat64()})
				j = k
			default:
				toks = append(toks, scsExprToken{kind: 'n', text: num, value: f})
			}
			i = j
		case scsIsLetter(c):
			j := i
			for j < len(s) && (scsIsLetter(s[j]) || scsIsDigit(s[j]) || s[j] == '_') {
				j++
			}
			toks = append(toks, scsExprToken{kind: 'i', text: s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("unexpected character %q", c)
		}
	}
	return toks, nil
}

// scsExprParser checks a resourcesPolicy expression by evaluating it with
// the variable set to the number 1, as OpenKruise's webhook does, so that
// syntax errors, unknown names, functions without two arguments, products
// of two quantities and divisions by a quantity or by zero are found.
type scsExprParser struct {
	toks     []scsExprToken
	pos      int
	variable string
}

func (p *scsExprParser) peek() byte {
	if p.pos < len(p.toks) {
		return p.toks[p.pos].kind
	}
	return 0
}

func (p *scsExprParser) expect(kind byte) error {
	if p.peek() != kind {
		return p.unexpected(fmt.Sprintf("%q", kind))
	}
	p.pos++
	return nil
}

func (p *scsExprParser) unexpected(want string) error {
	if p.pos >= len(p.toks) {
		return fmt.Errorf("the expression ends early, expected %s", want)
	}
	return fmt.Errorf("unexpected %q, expected %s", p.toks[p.pos].text, want)
}

// sum := product {('+'|'-') product}
func (p *scsExprParser) sum() (scsExprValue, error) {
	v, err := p.product()
	for err == nil && (p.peek() == '+' || p.peek() == '-') {
		op := p.toks[p.pos].kind
		p.pos++
		var r scsExprValue
		if r, err = p.product(); err == nil {
			if op == '-' {
				r.number = -r.number
			}
			v = scsExprValue{number: v.number + r.number, quantity: v.quantity || r.quantity}
		}
	}
	return v, err
}

// product := factor {('*'|'/') factor}
func (p *scsExprParser) product() (scsExprValue, error) {
	v, err := p.factor()
	for err == nil && (p.peek() == '*' || p.peek() == '/') {
		op := p.toks[p.pos].kind
		p.pos++
		var r scsExprValue
		if r, err = p.factor(); err != nil {
			break
		}
		switch {
		case op == '*' && v.quantity && r.quantity:
			return v, fmt.Errorf("cannot multiply two quantities")
		case op == '*':
			v = scsExprValue{number: v.number * r.number, quantity: v.quantity || r.quantity}
		case r.quantity:
			return v, fmt.Errorf("cannot divide by a quantity")
		case r.number == 0:
			return v, fmt.Errorf("division by zero")
		default:
			v.number /= r.number
		}
	}
	return v, err
}

// factor := '-' factor | number | quantity | variable | ('max'|'min') '(' sum ',' sum ')' | '(' sum ')'
func (p *scsExprParser) factor() (scsExprValue, error) {
	if p.pos >= len(p.toks) {
		return scsExprValue{}, p.unexpected("a value")
	}
	t := p.toks[p.pos]
	p.pos++
	switch t.kind {
	case '-':
		v, err := p.factor()
		v.number = -v.number
		return v, err
	case 'n':
		return scsExprValue{number: t.value}, nil
	case 'q':
		return scsExprValue{number: t.value, quantity: true}, nil
	case '(':
		v, err := p.sum()
		if err == nil {
			err = p.expect(')')
		}
		return v, err
	case 'i':
		name := strings.ToLower(t.text)
		if p.peek() != '(' {
			if name != p.variable {
				return scsExprValue{}, fmt.Errorf("unknown name %q (the variable here is %s)", t.text, p.variable)
			}
			return scsExprValue{number: 1}, nil
		}
		if name != "max" && name != "min" {
			return scsExprValue{}, fmt.Errorf("unknown function %q (use max or min)", t.text)
		}
		p.pos++
		x, err := p.sum()
		if err != nil {
			return x, err
		}
		if p.peek() != ',' {
			return x, fmt.Errorf("%s takes two arguments", name)
		}
		p.pos++
		y, err := p.sum()
		if err != nil {
			return y, err
		}
		if p.peek() == ',' {
			return y, fmt.Errorf("%s takes two arguments", name)
		}
		if err := p.expect(')'); err != nil {
			return y, err
		}
		v := x
		if name == "max" && y.number > x.number || name == "min" && y.number < x.number {
			v = y
		}
		v.quantity = x.quantity || y.quantity
		return v, nil
	}
	p.pos--
	return scsExprValue{}, p.unexpected("a value")
}

// scsCheckResourceExpr checks a resourcesPolicy expression over variable
// ("cpu" or "memory").
func scsCheckResourceExpr(expr, variable string) error {
	toks, err := scsLexResourceExpr(expr)
	if err != nil {
		return err
	}
	if len(toks) == 0 {
		return fmt.Errorf("the expression is empty")
	}
	p := &scsExprParser{toks: toks, variable: variable}
	if _, err := p.sum(); err != nil {
		return err
	}
	if p.pos < len(p.toks) {
		return p.unexpected("an operator")
	}
	return nil
}

// scsCanaryPair reports whether one of the two SidecarSets is a canary of
// the other: a pod both select gets the canary's sidecars instead of the
// base's, so their containers do not conflict.
func scsCanaryPair(x, y *appsv1beta1.SidecarSet) bool {
	if base, ok := sidecarcontrol.CanaryBase(x); ok && base == y.Name {
		return true
	}
	base, ok := sidecarcontrol.CanaryBase(y)
	return ok && base == x.Name
}

// scsValidateCanary checks a canary SidecarSet (annotation
// apps.kruise.io/sidecarset-canary "true"): it names its base in
// apps.kruise.io/sidecarset-base, the base exists, is not itself and is
// not a canary, and the canary does not update pods (NotUpdate): pods
// move to or off it by being re-created.
func scsValidateCanary(set *appsv1beta1.SidecarSet, others []*appsv1beta1.SidecarSet) field.ErrorList {
	if set.Annotations[wellknown.AnnotationSidecarSetCanary] != "true" {
		return nil
	}
	baseKey := field.NewPath("metadata", "annotations").Key(wellknown.AnnotationSidecarSetBase)
	base := set.Annotations[wellknown.AnnotationSidecarSetBase]
	switch {
	case base == "":
		return field.ErrorList{field.Required(baseKey, "a canary SidecarSet names the SidecarSet it is a canary of")}
	case base == set.Name:
		return field.ErrorList{field.Invalid(baseKey, base, "a canary SidecarSet cannot be its own base; name the SidecarSet it replaces on the pods it selects")}
	}
	var errs field.ErrorList
	i := slices.IndexFunc(others, func(o *appsv1beta1.SidecarSet) bool { return o != nil && o.Name == base })
	switch {
	case i < 0:
		errs = append(errs, field.NotFound(baseKey, base))
	case others[i].Annotations[wellknown.AnnotationSidecarSetCanary] == "true":
		errs = append(errs, field.Invalid(baseKey, base, "the base is itself a canary; name the SidecarSet it is a canary of"))
	}
	if set.Spec.UpdateStrategy.Type != appsv1beta1.NotUpdateSidecarSetStrategyType {
		errs = append(errs, field.Invalid(field.NewPath("spec", "updateStrategy", "type"), set.Spec.UpdateStrategy.Type,
			"a canary SidecarSet must not update pods: set NotUpdate (pods take the canary when they are created)"))
	}
	return errs
}
