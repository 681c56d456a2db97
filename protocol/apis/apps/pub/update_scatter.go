package pub

// UpdateScatterStrategy lists label key/value pairs whose pods are spread
// evenly over the course of an update instead of being updated together.
// When several terms are given, the term matching more pods is scattered
// first.
//
// +listType=atomic
type UpdateScatterStrategy []UpdateScatterTerm

// UpdateScatterTerm is one label key/value pair to scatter during updates.
type UpdateScatterTerm struct {
	// Key is the pod label key.
	//
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// Value is the pod label value.
	Value string `json:"value"`
}
