package pub

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// UpdatePriorityStrategy decides which pods a rolling update touches first.
// Set either orderPriority or weightPriority, not both.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.orderPriority) && size(self.orderPriority) > 0 && has(self.weightPriority) && size(self.weightPriority) > 0)",message="priorityStrategy: set only one of orderPriority and weightPriority"
type UpdatePriorityStrategy struct {
	// OrderPriority sorts pods by the integer found at the end of the value of
	// each listed label key (for example 5 in "5" or 10 in "sts-10"; a value
	// without trailing digits counts as 0), larger first. As in OpenKruise,
	// pods carrying none of the keys come first; then the pods carrying the
	// first key, sorted by its value; then those whose first key found is
	// the second; and so on. Ignored when weightPriority is set.
	//
	// +optional
	// +listType=atomic
	OrderPriority []UpdatePriorityOrderTerm `json:"orderPriority,omitempty"`
	// WeightPriority sorts pods by the sum of the weights of the terms whose
	// selector matches the pod's labels; the highest sum is updated first.
	//
	// +optional
	// +listType=atomic
	WeightPriority []UpdatePriorityWeightTerm `json:"weightPriority,omitempty"`
}

// UpdatePriorityOrderTerm names one label key whose value orders pods.
type UpdatePriorityOrderTerm struct {
	// OrderedKey is the pod label key whose value (its trailing integer)
	// orders pods.
	//
	// +kubebuilder:validation:MinLength=1
	OrderedKey string `json:"orderedKey"`
}

// UpdatePriorityWeightTerm gives a weight to the pods a selector matches.
type UpdatePriorityWeightTerm struct {
	// Weight added to a pod's priority when matchSelector matches it, 0-100.
	//
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
	// MatchSelector selects pods by their labels.
	MatchSelector metav1.LabelSelector `json:"matchSelector"`
}
