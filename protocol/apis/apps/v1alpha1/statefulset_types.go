package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// The v1alpha1 StatefulSet shares its spec and status types with v1beta1, so
// both versions have one schema and need no conversion. Its doc comment and
// markers must stay identical to the v1beta1 StatefulSet's, except that only
// v1beta1 is the storage version.

// StatefulSet (Advanced StatefulSet) runs pods with stable identities and
// storage, like the upstream StatefulSet, and adds in-place updates,
// maxUnavailable for parallel updates, update by priority, pausing,
// reserved ordinals and lifecycle hooks. Served at v1beta1 (stored) and
// v1alpha1 with the same schema.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=sts;asts,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:printcolumn:name="DESIRED",type="integer",JSONPath=".spec.replicas",description="Desired number of pods."
// +kubebuilder:printcolumn:name="CURRENT",type="integer",JSONPath=".status.replicas",description="All pods of the StatefulSet."
// +kubebuilder:printcolumn:name="UPDATED",type="integer",JSONPath=".status.updatedReplicas",description="Pods at the update revision."
// +kubebuilder:printcolumn:name="READY",type="integer",JSONPath=".status.readyReplicas",description="Pods that are ready."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the StatefulSet was created."
// +kubebuilder:printcolumn:name="CONTAINERS",type="string",priority=1,JSONPath=".spec.template.spec.containers[*].name",description="Container names of the pod template."
// +kubebuilder:printcolumn:name="IMAGES",type="string",priority=1,JSONPath=".spec.template.spec.containers[*].image",description="Container images of the pod template."
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || !has(self.spec) || self.spec.selector == oldSelf.spec.selector",message="spec.selector: cannot be changed after creation"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || !has(self.spec) || (has(self.spec.serviceName) ? self.spec.serviceName : \"\") == (has(oldSelf.spec.serviceName) ? oldSelf.spec.serviceName : \"\")",message="spec.serviceName: cannot be changed after creation"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || !has(self.spec) || (has(self.spec.podManagementPolicy) ? self.spec.podManagementPolicy : 'OrderedReady') == (has(oldSelf.spec.podManagementPolicy) ? oldSelf.spec.podManagementPolicy : 'OrderedReady')",message="spec.podManagementPolicy: cannot be changed after creation"
type StatefulSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the StatefulSet.
	Spec v1beta1.StatefulSetSpec `json:"spec,omitempty"`
	// Status is the observed state of the StatefulSet, written by the
	// controller.
	Status v1beta1.StatefulSetStatus `json:"status,omitempty"`
}

// StatefulSetList is a list of Advanced StatefulSets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type StatefulSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the StatefulSets.
	Items []StatefulSet `json:"items"`
}
