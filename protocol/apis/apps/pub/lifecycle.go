package pub

// Lifecycle lets other controllers hold a pod at points of its life: after
// creation (preNormal), before deletion (preDelete) and around an in-place
// update (inPlaceUpdate). While a hook's labels or finalizers are present on
// the pod, the workload waits in the matching state.
type Lifecycle struct {
	// PreDelete holds a pod in PreparingDelete before the workload deletes it
	// (scale-in, recreate update or specified delete) for as long as the
	// pod still carries one of the hook's labels or finalizers.
	//
	// +optional
	PreDelete *LifecycleHook `json:"preDelete,omitempty"`
	// InPlaceUpdate holds a pod in PreparingUpdate before an in-place update,
	// and in Updated afterwards, until the hook's labels or finalizers say
	// the pod may proceed.
	//
	// +optional
	InPlaceUpdate *LifecycleHook `json:"inPlaceUpdate,omitempty"`
	// PreNormal keeps a new pod in PreparingNormal until all of the hook's
	// labels and finalizers are present on it; only then does it become
	// Normal and count as available.
	//
	// +optional
	PreNormal *LifecycleHook `json:"preNormal,omitempty"`
}

// LifecycleHook names the pod labels and finalizers through which another
// controller takes part in one lifecycle step.
type LifecycleHook struct {
	// LabelsHandler lists pod labels (key and value) that mark the pod as
	// held by this hook.
	//
	// +optional
	LabelsHandler map[string]string `json:"labelsHandler,omitempty"`
	// FinalizersHandler lists pod finalizers that mark the pod as held by
	// this hook.
	//
	// +optional
	FinalizersHandler []string `json:"finalizersHandler,omitempty"`
	// MarkPodNotReady, when true, sets the pod's KruisePodReady condition to
	// False while it waits in PreparingDelete or PreparingUpdate, so that
	// it leaves Service endpoints before the step; after an in-place update
	// the condition is set back to True. Only honoured on the preDelete and
	// inPlaceUpdate hooks. Defaults to false.
	//
	// +optional
	MarkPodNotReady bool `json:"markPodNotReady,omitempty"`
}
