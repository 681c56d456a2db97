package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// CloneSetValidatePath is where CloneSetAdmission.Validate is served.
const CloneSetValidatePath = "/validate-cloneset"

// The CloneSet CRD already enforces, before this webhook runs: a non-empty
// selector that never changes, integer-or-percentage partition,
// maxUnavailable and maxSurge, maxSurge 0 with InPlaceOnly, and
// maxUnavailable and maxSurge not both 0 while replicas is above 0. The
// webhook adds what needs the pod template or the pods.

// CloneSetAdmission validates CloneSets (served at v1beta1; the apiserver
// converts a v1alpha1 request first).
type CloneSetAdmission struct {
	pods PodGetter
}

// NewCloneSetAdmission returns the CloneSet validation, looking up the pods
// named in scaleStrategy.podsToDelete through pods.
func NewCloneSetAdmission(pods PodGetter) *CloneSetAdmission {
	return &CloneSetAdmission{pods: pods}
}

var _ Handler = (*CloneSetAdmission)(nil).Validate

// Validate handles CREATE and UPDATE of a CloneSet. It denies, each with
// the field and the fix:
//   - a selector that does not select the template's labels;
//   - a template restartPolicy other than Always, or any
//     activeDeadlineSeconds (the pods are meant to run for ever);
//   - a name twice in scaleStrategy.podsToDelete, or (on UPDATE) a newly
//     listed name that is not a pod of this CloneSet, or is already being
//     deleted;
//   - on UPDATE with podUpdatePolicy InPlaceOnly, a template change that
//     cannot happen in place (anything but images and metadata).
//
// Status updates and deletes are allowed.
func (a *CloneSetAdmission) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	cs := &v1beta1.CloneSet{}
	if err := json.Unmarshal(req.Object.Raw, cs); err != nil {
		return badRequest(fmt.Sprintf("could not decode the CloneSet: %v", err))
	}
	var old *v1beta1.CloneSet
	if req.Operation == admissionv1.Update {
		old = &v1beta1.CloneSet{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return badRequest(fmt.Sprintf("could not decode the stored CloneSet: %v", err))
		}
	}
	v1alpha1 := req.RequestKind != nil && req.RequestKind.Version == "v1alpha1"
	problems := checkWorkloadTemplate(cs.Spec.Selector, &cs.Spec.Template, "a CloneSet's")
	p, err := a.checkPodsToDelete(cs, old)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Look up the pods of a CloneSet's podsToDelete", "cloneset", klog.KObj(cs))
		return internalError(fmt.Sprintf("could not look up the pods in spec.scaleStrategy.podsToDelete: %v", err))
	}
	problems = append(problems, p...)
	if old != nil {
		problems = append(problems, checkInPlaceOnly(cs, old, v1alpha1)...)
	}
	if len(problems) > 0 {
		return Deny(strings.Join(problems, "\n"))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// checkWorkloadTemplate checks a long-running workload's selector against
// its template and the template's pod-level fields; whose names the
// workload's pods in messages ("a CloneSet's").
func checkWorkloadTemplate(selector *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, whose string) []string {
	var problems []string
	if selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(selector)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("spec.selector: %v; use matchLabels or valid matchExpressions", err))
		case !sel.Matches(labels.Set(tmpl.Labels)):
			problems = append(problems, fmt.Sprintf("spec.template.metadata.labels: %v does not match spec.selector %q; add the selector's labels to the template",
				tmpl.Labels, sel.String()))
		}
	}
	if rp := tmpl.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
		problems = append(problems, fmt.Sprintf("spec.template.spec.restartPolicy: %q is not supported; %s pods run until replaced, use Always (or leave it out)", rp, whose))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		problems = append(problems, fmt.Sprintf("spec.template.spec.activeDeadlineSeconds: must not be set for %s pods (they run until replaced); remove it, or use a Job or BroadcastJob for pods that should end", whose))
	}
	return problems
}

// checkPodsToDelete checks scaleStrategy.podsToDelete: no name twice and,
// on UPDATE, each name not listed before is a pod of this CloneSet that is
// not being deleted already.
func (a *CloneSetAdmission) checkPodsToDelete(cs, old *v1beta1.CloneSet) ([]string, error) {
	var problems []string
	seen := map[string]bool{}
	for i, name := range cs.Spec.ScaleStrategy.PodsToDelete {
		path := fmt.Sprintf("spec.scaleStrategy.podsToDelete[%d]", i)
		if seen[name] {
			problems = append(problems, fmt.Sprintf("%s: %q is listed twice; list each pod once", path, name))
			continue
		}
		seen[name] = true
		if old == nil || slices.Contains(old.Spec.ScaleStrategy.PodsToDelete, name) || a.pods == nil {
			continue
		}
		pod, err := a.pods.Pod(cs.Namespace, name)
		switch {
		case apierrors.IsNotFound(err):
			problems = append(problems, fmt.Sprintf("%s: no pod %q in namespace %q; list pods of this CloneSet", path, name, cs.Namespace))
			continue
		case err != nil:
			return nil, err
		}
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != cs.UID {
			problems = append(problems, fmt.Sprintf("%s: pod %q is not a pod of CloneSet %q; list pods of this CloneSet", path, name, cs.Name))
		} else if pod.DeletionTimestamp != nil {
			problems = append(problems, fmt.Sprintf("%s: pod %q is already being deleted; leave it out", path, name))
		}
	}
	return problems, nil
}

// checkInPlaceOnly denies, under podUpdatePolicy InPlaceOnly, a template
// change that cannot happen in place: it would never reach the pods.
func checkInPlaceOnly(cs, old *v1beta1.CloneSet, v1alpha1 bool) []string {
	ru := cs.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.PodUpdatePolicy != v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType {
		return nil
	}
	_, err := inplace.Calculate(&old.Spec.Template, &cs.Spec.Template, "")
	var notInPlace *inplace.NotInPlaceError
	if err == nil || !errors.As(err, &notInPlace) {
		return nil
	}
	policy, fix := "spec.updateStrategy.rollingUpdate.podUpdatePolicy", "podUpdatePolicy to InPlaceIfPossible or ReCreate"
	if v1alpha1 {
		policy, fix = "spec.updateStrategy.type", "updateStrategy.type to InPlaceIfPossible or ReCreate"
	}
	return []string{fmt.Sprintf("spec.template.%s: cannot change in place, and %s is InPlaceOnly; change only images, labels and annotations, or set %s in the same update",
		notInPlace.Field, policy, fix)}
}
