package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// StatefulSetValidatePath serves ValidateStatefulSet.
const StatefulSetValidatePath = "/validate-statefulset"

// The StatefulSet CRD already enforces, before this webhook runs, with
// messages that name the field: replicas, partition, revisionHistoryLimit,
// ordinals.start and inPlaceUpdateStrategy.gracePeriodSeconds of at least
// 0; minReadySeconds from 0 to 300 (v1beta1.MaxMinReadySeconds); the
// values of podManagementPolicy (OrderedReady, Parallel), updateStrategy.type
// (RollingUpdate, OnDelete), podUpdatePolicy (ReCreate, InPlaceIfPossible,
// InPlaceOnly), volumeClaimUpdateStrategy.type and the
// persistentVolumeClaimRetentionPolicy's whenDeleted and whenScaled (Retain,
// Delete); rollingUpdate only with type RollingUpdate; updateStrategy's and
// scaleStrategy's maxUnavailable an integer of at least 1 or a percentage
// above 0%, and other than 1 only with podManagementPolicy Parallel;
// unorderedUpdate only with Parallel; priorityStrategy with one of
// orderPriority and weightPriority, weights 0-100 and non-empty orderedKeys;
// a selector that is set and not empty; and, on UPDATE, an unchanged
// selector, serviceName and podManagementPolicy. The defaults (type
// RollingUpdate, maxUnavailable 1, podUpdatePolicy ReCreate, ...) are applied
// before this webhook sees the object. Label selector syntax is checked by
// ValidateSelectors. The webhook adds what the schema cannot express.

var _ Handler = ValidateStatefulSet

// StorageClasses finds the storage classes the StatefulSet webhook checks
// a volumeClaimTemplate's resize against.
type StorageClasses interface {
	// Get returns the storage class name.
	Get(ctx context.Context, name string) (*storagev1.StorageClass, error)
	// Default returns the cluster's default storage class, nil when there
	// is none.
	Default(ctx context.Context) (*storagev1.StorageClass, error)
}

// StatefulSetAdmission validates Advanced StatefulSets. With ResizeClaims
// (gate StatefulSetAutoResizePVCGate) it also checks, on UPDATE under
// volumeClaimUpdateStrategy OnPodRollingUpdate, that existing PVCs can
// follow the new volumeClaimTemplates (checkVolumeClaimTemplates), looking
// storage classes up in Classes.
type StatefulSetAdmission struct {
	// ResizeClaims is the StatefulSetAutoResizePVCGate gate.
	ResizeClaims bool
	// Classes finds storage classes; required with ResizeClaims.
	Classes StorageClasses
}

// ValidateStatefulSet is StatefulSetAdmission.Validate with automatic PVC
// resizing off.
func ValidateStatefulSet(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return (&StatefulSetAdmission{}).Validate(ctx, req)
}

// Validate handles CREATE and UPDATE of an Advanced StatefulSet
// (matched at every served version and decoded at v1beta1: v1alpha1 has the
// same fields). It denies, each with the field and the fix:
//   - a missing spec.selector (the CRD requires one only when spec is
//     present), or one that does not select the template's labels;
//   - a template restartPolicy other than Always, or any
//     activeDeadlineSeconds (the pods are meant to run for ever);
//   - an empty matchSelector in a weightPriority term of unorderedUpdate;
//   - a reserveOrdinals entry that is neither an ordinal of at least 0 nor
//     a range string "a-b" with a <= b;
//   - on UPDATE, a change to a spec field outside the ones OpenKruise lets
//     change (statefulSetMutableFields);
//   - on UPDATE with podUpdatePolicy InPlaceOnly, a template change that
//     cannot happen in place (anything but images and metadata);
//   - on UPDATE with ResizeClaims, a volumeClaimTemplates change existing
//     PVCs cannot follow (checkVolumeClaimTemplates).
//
// Status updates and deletes are allowed.
func (a *StatefulSetAdmission) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	sts := &v1beta1.StatefulSet{}
	if err := json.Unmarshal(req.Object.Raw, sts); err != nil {
		return badRequest(fmt.Sprintf("could not decode the StatefulSet: %v", err))
	}
	var problems []string
	if sts.Spec.Selector == nil {
		problems = append(problems, "spec.selector: required; set matchLabels to the labels in spec.template.metadata.labels")
	}
	problems = append(problems, checkWorkloadTemplate(sts.Spec.Selector, &sts.Spec.Template, "a StatefulSet's")...)
	problems = append(problems, checkStatefulSetRollingUpdate(&sts.Spec)...)
	problems = append(problems, checkReserveOrdinals(sts.Spec.ReserveOrdinals)...)
	if req.Operation == admissionv1.Update {
		old := &v1beta1.StatefulSet{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return badRequest(fmt.Sprintf("could not decode the stored StatefulSet: %v", err))
		}
		problems = append(problems, checkStatefulSetImmutable(&sts.Spec, &old.Spec)...)
		problems = append(problems, checkStatefulSetInPlaceOnly(&sts.Spec, &old.Spec)...)
		if a.ResizeClaims {
			problems = append(problems, a.checkVolumeClaimTemplates(ctx, &sts.Spec, &old.Spec)...)
		}
	}
	if len(problems) > 0 {
		return Deny(strings.Join(problems, "\n"))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// checkStatefulSetRollingUpdate checks what the CRD cannot in
// updateStrategy.rollingUpdate: a weightPriority term needs a selector (an
// empty one would weigh every pod alike). Unlike OpenKruise it does not ask
// for the InPlaceUpdateReady readiness gate in the template under the
// in-place policies: the controller adds the gate to the pods it creates.
func checkStatefulSetRollingUpdate(spec *v1beta1.StatefulSetSpec) []string {
	ru := spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.UnorderedUpdate == nil || ru.UnorderedUpdate.PriorityStrategy == nil {
		return nil
	}
	var problems []string
	for i, term := range ru.UnorderedUpdate.PriorityStrategy.WeightPriority {
		if len(term.MatchSelector.MatchLabels)+len(term.MatchSelector.MatchExpressions) == 0 {
			problems = append(problems, fmt.Sprintf("spec.updateStrategy.rollingUpdate.unorderedUpdate.priorityStrategy.weightPriority[%d].matchSelector: must not be empty; set matchLabels or matchExpressions to the pods this weight is for", i))
		}
	}
	return problems
}

// checkReserveOrdinals checks each spec.reserveOrdinals entry: an integer
// ordinal of at least 0, or a string "a-b" (decimal digits only) naming the
// ordinals a to b inclusive, with a <= b, both within int32 as ordinals are.
// A number written as a string ("3") is not a range and is denied, as
// OpenKruise does.
func checkReserveOrdinals(reserve []intstr.IntOrString) []string {
	var problems []string
	for i, r := range reserve {
		path := fmt.Sprintf("spec.reserveOrdinals[%d]", i)
		if r.Type == intstr.Int {
			if r.IntVal < 0 {
				problems = append(problems, fmt.Sprintf("%s: %d is negative; use an ordinal of 0 or more", path, r.IntVal))
			}
			continue
		}
		lo, hi, ok := strings.Cut(r.StrVal, "-")
		a, errA := parseOrdinal(lo)
		b, errB := parseOrdinal(hi)
		switch {
		case !ok || errA != nil || errB != nil:
			hint := ""
			if _, err := parseOrdinal(r.StrVal); err == nil {
				hint = fmt.Sprintf(" (a single ordinal is an unquoted integer: %s)", r.StrVal)
			}
			problems = append(problems, fmt.Sprintf("%s: %q is not an ordinal range; use an integer such as 3 or a string \"a-b\" such as \"3-5\", with a and b from 0 to %d%s",
				path, r.StrVal, math.MaxInt32, hint))
		case a > b:
			problems = append(problems, fmt.Sprintf("%s: %q starts after it ends; write the range low to high, as \"%d-%d\"", path, r.StrVal, b, a))
		}
	}
	return problems
}

// parseOrdinal parses a non-empty string of decimal digits that fits an
// int32.
func parseOrdinal(s string) (int64, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a decimal ordinal", s)
	}
	return strconv.ParseInt(s, 10, 32)
}

// statefulSetMutableFields are the spec fields, by JSON name, that an
// UPDATE may change: OpenKruise's list (replicas, ordinals, template,
// volumeClaimTemplates and their update strategy, updateStrategy, with
// minReadySeconds, revisionHistoryLimit, reserveOrdinals, lifecycle,
// scaleStrategy and persistentVolumeClaimRetentionPolicy). Every other
// spec field is fixed at creation, today selector, serviceName and
// podManagementPolicy (which the CRD's transition rules check first); a
// field added to the spec later is fixed too until it is listed here.
var statefulSetMutableFields = map[string]bool{
	"replicas":                             true,
	"ordinals":                             true,
	"template":                             true,
	"volumeClaimTemplates":                 true,
	"volumeClaimUpdateStrategy":            true,
	"updateStrategy":                       true,
	"revisionHistoryLimit":                 true,
	"reserveOrdinals":                      true,
	"lifecycle":                            true,
	"scaleStrategy":                        true,
	"persistentVolumeClaimRetentionPolicy": true,
}

// checkStatefulSetImmutable denies, on UPDATE, each changed spec field that
// is not in statefulSetMutableFields. Both objects carry the CRD's defaults,
// so a field left out is not taken for a change.
func checkStatefulSetImmutable(spec, old *v1beta1.StatefulSetSpec) []string {
	var problems []string
	nv, ov := reflect.ValueOf(spec).Elem(), reflect.ValueOf(old).Elem()
	for i := range nv.NumField() {
		name, _, _ := strings.Cut(nv.Type().Field(i).Tag.Get("json"), ",")
		if statefulSetMutableFields[name] || apiequality.Semantic.DeepEqual(nv.Field(i).Interface(), ov.Field(i).Interface()) {
			continue
		}
		problems = append(problems, fmt.Sprintf("spec.%s: cannot be changed after creation; set it back, or delete the StatefulSet (kubectl delete --cascade=orphan keeps its pods) and create it again", name))
	}
	return problems
}

// checkStatefulSetInPlaceOnly denies, under podUpdatePolicy InPlaceOnly, a
// template change that cannot happen in place: it would never reach the
// pods. Setting another policy in the same update lets it through.
func checkStatefulSetInPlaceOnly(spec, old *v1beta1.StatefulSetSpec) []string {
	ru := spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.PodUpdatePolicy != v1beta1.InPlaceOnlyPodUpdateStrategyType {
		return nil
	}
	_, err := inplace.Calculate(&old.Template, &spec.Template, "")
	var notInPlace *inplace.NotInPlaceError
	if err == nil || !errors.As(err, &notInPlace) {
		return nil
	}
	return []string{fmt.Sprintf("spec.template.%s: cannot change in place, and spec.updateStrategy.rollingUpdate.podUpdatePolicy is InPlaceOnly; change only images, labels and annotations, or set podUpdatePolicy to InPlaceIfPossible or ReCreate in the same update",
		notInPlace.Field)}
}

// checkVolumeClaimTemplates denies, under volumeClaimUpdateStrategy
// OnPodRollingUpdate, a volumeClaimTemplates change that the PVCs already
// made cannot follow: the rolling update resizes them and nothing else.
// Templates may not be added, removed or renamed, nor change storage
// class or access modes; more storage needs a storage class that allows
// volume expansion (the template's, or the cluster default when it names
// none). Unlike OpenKruise, a class that leaves allowVolumeExpansion unset
// is refused too, as the apiserver refuses to resize its PVCs. Less
// storage is allowed: existing PVCs keep their size, new ones get the new
// one. Under OnDelete anything goes, as it only shapes new PVCs.
func (a *StatefulSetAdmission) checkVolumeClaimTemplates(ctx context.Context, spec, old *v1beta1.StatefulSetSpec) []string {
	if spec.VolumeClaimUpdateStrategy.Type != v1beta1.OnPodRollingUpdateVolumeClaimUpdateStrategyType {
		return nil
	}
	fix := "or set spec.volumeClaimUpdateStrategy.type to OnDelete in the same update (only new PVCs follow the templates then)"
	if len(spec.VolumeClaimTemplates) != len(old.VolumeClaimTemplates) {
		return []string{fmt.Sprintf("spec.volumeClaimTemplates: %d templates instead of %d; templates cannot be added or removed while volumeClaimUpdateStrategy.type is OnPodRollingUpdate; keep them, %s",
			len(spec.VolumeClaimTemplates), len(old.VolumeClaimTemplates), fix)}
	}
	before := map[string]*corev1.PersistentVolumeClaim{}
	for i := range old.VolumeClaimTemplates {
		before[old.VolumeClaimTemplates[i].Name] = &old.VolumeClaimTemplates[i]
	}
	var problems []string
	for i := range spec.VolumeClaimTemplates {
		tmpl := &spec.VolumeClaimTemplates[i]
		path := fmt.Sprintf("spec.volumeClaimTemplates[%s]", tmpl.Name)
		was, ok := before[tmpl.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s.name: no template of that name before; templates cannot be renamed while volumeClaimUpdateStrategy.type is OnPodRollingUpdate; keep the name, %s", path, fix))
			continue
		}
		if a, b := tmpl.Spec.StorageClassName, was.Spec.StorageClassName; a != nil && b != nil && *a != *b {
			problems = append(problems, fmt.Sprintf("%s.spec.storageClassName: changed from %q to %q; existing PVCs keep their storage class, so set it back, %s", path, *b, *a, fix))
			continue
		}
		if !slices.Equal(tmpl.Spec.AccessModes, was.Spec.AccessModes) {
			problems = append(problems, fmt.Sprintf("%s.spec.accessModes: changed from %v to %v; existing PVCs keep their access modes, so set them back, %s", path, was.Spec.AccessModes, tmpl.Spec.AccessModes, fix))
			continue
		}
		newSize, oldSize := tmpl.Spec.Resources.Requests[corev1.ResourceStorage], was.Spec.Resources.Requests[corev1.ResourceStorage]
		if newSize.Cmp(oldSize) <= 0 {
			continue
		}
		if problem := a.checkExpandable(ctx, tmpl.Spec.StorageClassName); problem != "" {
			problems = append(problems, fmt.Sprintf("%s.spec.resources.requests.storage: raised from %s to %s, but %s; keep %s, %s",
				path, oldSize.String(), newSize.String(), problem, oldSize.String(), fix))
		}
	}
	return problems
}

// checkExpandable says why PVCs of the named storage class (nil: the
// cluster default) cannot be expanded, "" when they can, or when no class
// applies.
func (a *StatefulSetAdmission) checkExpandable(ctx context.Context, name *string) string {
	if a.Classes == nil {
		return ""
	}
	var sc *storagev1.StorageClass
	var err error
	if name == nil {
		if sc, err = a.Classes.Default(ctx); err != nil {
			return fmt.Sprintf("the cluster's default storage class could not be read (%v)", err)
		}
		if sc == nil {
			return ""
		}
	} else if sc, err = a.Classes.Get(ctx, *name); err != nil {
		return fmt.Sprintf("storage class %q could not be read (%v)", *name, err)
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		return fmt.Sprintf("storage class %s does not allow volume expansion (allowVolumeExpansion is not true)", sc.Name)
	}
	return ""
}

// ClientStorageClasses reads storage classes through Client, live: only
// an update that raises a volumeClaimTemplate's storage asks.
type ClientStorageClasses struct {
	// Client reads the storage classes.
	Client kubernetes.Interface
}

// storageClassTimeout bounds one storage class read on the admission path.
const storageClassTimeout = 2 * time.Second

// Get implements StorageClasses.
func (c ClientStorageClasses) Get(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	ctx, cancel := context.WithTimeout(ctx, storageClassTimeout)
	defer cancel()
	return c.Client.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
}

// Default implements StorageClasses: the newest class annotated
// storageclass.kubernetes.io/is-default-class "true", as the apiserver's
// DefaultStorageClass admission picks it.
func (c ClientStorageClasses) Default(ctx context.Context) (*storagev1.StorageClass, error) {
	ctx, cancel := context.WithTimeout(ctx, storageClassTimeout)
	defer cancel()
	list, err := c.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var pick *storagev1.StorageClass
	for i := range list.Items {
		sc := &list.Items[i]
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
			continue
		}
		if pick == nil || sc.CreationTimestamp.After(pick.CreationTimestamp.Time) {
			pick = sc
		}
	}
	return pick, nil
}
