package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// DeletionProtectionPath serves DeletionProtection.Validate.
const DeletionProtectionPath = "/validate-deletion-protection"

// ForbiddenByDeletionProtection is in every denial's message, worded as
// OpenKruise's so that scripts matching it keep working.
const ForbiddenByDeletionProtection = "forbidden by ResourcesProtectionDeletion"

// Dependents answers the questions of the Cascading protection.
type Dependents interface {
	// ActivePods counts the pods of namespace ns that are neither
	// finished nor being deleted.
	ActivePods(ns string) (int, error)
	// BoundClaims counts the Bound PersistentVolumeClaims of namespace ns.
	BoundClaims(ns string) (int, error)
	// AnyCustomResource reports whether at least one object of the CRD
	// exists, in any namespace.
	AnyCustomResource(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, error)
}

// DeletionProtection refuses deletes that the policy.kruise.io/
// delete-protection label forbids, as OpenKruise's
// ResourcesDeletionProtection does (on by default in Shoal):
//   - Always: no delete at all while the label is there;
//   - Cascading: no delete while the object has live dependents: a
//     Namespace with active pods or Bound PVCs, a CustomResourceDefinition
//     with custom resources, a Deployment, ReplicaSet, StatefulSet,
//     CloneSet, Advanced StatefulSet or UnitedDeployment with replicas
//     above 0. Services and Ingresses take Always only.
//
// The webhook configuration sends only labelled objects here (an
// objectSelector), so deleting an unprotected object never waits on the
// coordinator.
type DeletionProtection struct {
	deps    Dependents
	denials *prometheus.CounterVec
}

// NewDeletionProtection returns the handler; denials are counted in reg
// as shoal_coordinator_deletion_protection_denials_total by kind.
func NewDeletionProtection(deps Dependents, reg prometheus.Registerer) *DeletionProtection {
	d := &DeletionProtection{
		deps: deps,
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_coordinator_deletion_protection_denials_total",
			Help: "Deletes refused by the policy.kruise.io/delete-protection label, by kind and protection.",
		}, []string{"kind", "protection"}),
	}
	if reg != nil {
		reg.MustRegister(d.denials)
	}
	return d
}

var _ Handler = (*DeletionProtection)(nil).Validate

// replicated are the kinds whose Cascading protection counts replicas.
var replicated = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:                 true,
	{Group: "apps", Kind: "ReplicaSet"}:                 true,
	{Group: "apps", Kind: "StatefulSet"}:                true,
	{Group: "apps.kruise.io", Kind: "CloneSet"}:         true,
	{Group: "apps.kruise.io", Kind: "StatefulSet"}:      true,
	{Group: "apps.kruise.io", Kind: "UnitedDeployment"}: true,
}

// Validate handles DELETE of a protected object.
func (d *DeletionProtection) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Operation != admissionv1.Delete || req.SubResource != "" || len(req.OldObject.Raw) == 0 {
		return allowed
	}
	var obj struct {
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(req.OldObject.Raw, &obj); err != nil {
		return badRequest(fmt.Sprintf("could not decode the %s being deleted: %v", req.Kind.Kind, err))
	}
	protection := wellknown.DeletionProtection(obj.Labels[wellknown.LabelDeleteProtection])
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	what := strings.ToLower(req.Kind.Kind) + " " + req.Name
	if req.Namespace != "" {
		what = strings.ToLower(req.Kind.Kind) + " " + req.Namespace + "/" + req.Name
	}
	lift := fmt.Sprintf("remove the label to delete it: kubectl label %s %s %s-", strings.ToLower(req.Kind.Kind), req.Name, wellknown.LabelDeleteProtection)
	if req.Namespace != "" {
		lift = fmt.Sprintf("remove the label to delete it: kubectl label -n %s %s %s %s-", req.Namespace, strings.ToLower(req.Kind.Kind), req.Name, wellknown.LabelDeleteProtection)
	}
	deny := func(why string) *admissionv1.AdmissionResponse {
		d.denials.WithLabelValues(req.Kind.Kind, string(protection)).Inc()
		klog.FromContext(ctx).Info("Deletion refused by the delete-protection label", "protection", protection, "why", why)
		return Deny(fmt.Sprintf("deleting %s is %s: it has label %s=%s and %s; %s", what, ForbiddenByDeletionProtection, wellknown.LabelDeleteProtection, protection, why, lift))
	}
	switch protection {
	case wellknown.DeletionProtectionAlways:
		return deny("is never deleted while the label is there")
	case wellknown.DeletionProtectionCascading:
	default:
		return allowed
	}
	switch {
	case gk == schema.GroupKind{Kind: "Namespace"}:
		pods, err := d.deps.ActivePods(req.Name)
		if err != nil {
			return deny(fmt.Sprintf("its active pods could not be counted (%v)", err))
		}
		if pods > 0 {
			return deny(fmt.Sprintf("still has %d active pods", pods))
		}
		claims, err := d.deps.BoundClaims(req.Name)
		if err != nil {
			return deny(fmt.Sprintf("its bound PVCs could not be counted (%v)", err))
		}
		if claims > 0 {
			return deny(fmt.Sprintf("still has %d Bound PVCs", claims))
		}
	case gk == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := json.Unmarshal(req.OldObject.Raw, crd); err != nil {
			return badRequest(fmt.Sprintf("could not decode the CustomResourceDefinition: %v", err))
		}
		found, err := d.deps.AnyCustomResource(ctx, crd)
		if err != nil {
			return deny(fmt.Sprintf("its custom resources could not be listed (%v; the coordinator needs list on %s.%s)", err, crd.Spec.Names.Plural, crd.Spec.Group))
		}
		if found {
			return deny(fmt.Sprintf("%s still exist", crd.Spec.Names.Plural))
		}
	case replicated[gk]:
		replicas := int32(1) // the default when spec.replicas is unset
		if obj.Spec.Replicas != nil {
			replicas = *obj.Spec.Replicas
		}
		if replicas > 0 {
			return deny(fmt.Sprintf("still has spec.replicas %d (scale it to 0 first)", replicas))
		}
	}
	return allowed
}

// ClusterDependents answers Dependents from informer listers and, for
// custom resources, a metadata-only list of one object.
type ClusterDependents struct {
	// Pods and Claims list from the coordinator's informers.
	Pods   corelisters.PodLister
	Claims corelisters.PersistentVolumeClaimLister
	// Metadata lists custom resources.
	Metadata metadata.Interface
}

// ActivePods implements Dependents.
func (c ClusterDependents) ActivePods(ns string) (int, error) {
	pods, err := c.Pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

// BoundClaims implements Dependents.
func (c ClusterDependents) BoundClaims(ns string) (int, error) {
	claims, err := c.Claims.PersistentVolumeClaims(ns).List(labels.Everything())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pvc := range claims {
		if pvc.Status.Phase == corev1.ClaimBound {
			n++
		}
	}
	return n, nil
}

// AnyCustomResource implements Dependents, listing at most one object at
// the CRD's storage version.
func (c ClusterDependents) AnyCustomResource(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage || version == "" {
			version = v.Name
		}
	}
	if version == "" {
		return false, nil
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
	list, err := c.Metadata.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return false, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
	}
	return len(list.Items) > 0, nil
}
