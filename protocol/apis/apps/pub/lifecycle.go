package pub

const (
	// LifecycleStateKey is the pod label that carries the pod's current
	// LifecycleStateType.
	LifecycleStateKey = "lifecycle.apps.kruise.io/state"
	// LifecycleTimestampKey is the pod annotation that records when the pod
	// entered its current lifecycle state.
	LifecycleTimestampKey = "lifecycle.apps.kruise.io/timestamp"
)

// LifecycleStateType is the lifecycle state of a pod managed by a workload
// with lifecycle hooks. It is stored in the LifecycleStateKey pod label.
type LifecycleStateType string

const (
	// LifecycleStatePreparingNormal: the pod has been created but is not
	// yet available; it moves on to Normal once it is scheduled and, when a
	// preNormal hook is configured, once that hook is satisfied.
	LifecycleStatePreparingNormal LifecycleStateType = "PreparingNormal"
	// LifecycleStateNormal: the pod is in service. A pod must be Normal to
	// count as available.
	LifecycleStateNormal LifecycleStateType = "Normal"
	// LifecycleStatePreparingUpdate: the pod is about to be updated in place;
	// it stays here while the inPlaceUpdate hook still holds it.
	LifecycleStatePreparingUpdate LifecycleStateType = "PreparingUpdate"
	// LifecycleStateUpdating: the pod's in-place update is in progress.
	LifecycleStateUpdating LifecycleStateType = "Updating"
	// LifecycleStateUpdated: the in-place update has finished; the pod
	// returns to Normal once the inPlaceUpdate hook marks it ready again.
	LifecycleStateUpdated LifecycleStateType = "Updated"
	// LifecycleStatePreparingDelete: the pod has been chosen for deletion;
	// the workload deletes it once the preDelete hook no longer holds it.
	LifecycleStatePreparingDelete LifecycleStateType = "PreparingDelete"
)

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
