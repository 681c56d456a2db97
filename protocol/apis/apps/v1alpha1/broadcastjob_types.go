package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BroadcastJobSpec is the desired state of a BroadcastJob: the pod to run
// once on every eligible node, and when the job counts as finished.
type BroadcastJobSpec struct {
	// Parallelism caps how many of the job's pods may be running at the same
	// time: a non-negative integer, or a percentage (0%-100%) of the number
	// of eligible nodes, rounded up. Defaults to 2147483647, no cap; 0 starts
	// no new pods.
	//
	// +optional
	// +kubebuilder:default=2147483647
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.parallelism: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	Parallelism *intstr.IntOrString `json:"parallelism,omitempty"`

	// Template is the pod created on each eligible node. A node is eligible
	// when the pod's nodeName, node selector, node affinity, tolerations and
	// resource requests allow it there. restartPolicy must be Never or
	// OnFailure (default OnFailure). The admission webhook validates the
	// template.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Template corev1.PodTemplateSpec `json:"template"`

	// CompletionPolicy decides whether the job finishes once every eligible
	// node has run its pod (Always, the default) or keeps running pods on
	// nodes that become eligible later (Never).
	//
	// +optional
	// +kubebuilder:default={}
	CompletionPolicy CompletionPolicy `json:"completionPolicy"`

	// Paused stops the job from creating new pods while true; pods already
	// running are left alone. Default false.
	//
	// +optional
	Paused bool `json:"paused,omitempty"`

	// FailurePolicy decides what the job does when one of its pods fails.
	// Defaults to type FailFast.
	//
	// +optional
	// +kubebuilder:default={}
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
}

// CompletionPolicy says when a job (BroadcastJob, ImagePullJob,
// ImageListPullJob) is finished, and what happens after it finishes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type == 'Always' || (!has(self.activeDeadlineSeconds) && !has(self.ttlSecondsAfterFinished))",message="spec.completionPolicy: activeDeadlineSeconds and ttlSecondsAfterFinished may only be set when type is Always"
type CompletionPolicy struct {
	// Type is Always (default) or Never. Always: the job finishes when every
	// target has completed (succeeded or failed) or activeDeadlineSeconds
	// has passed. Never: the job never finishes and keeps acting on targets
	// that appear later, for example new nodes.
	//
	// +optional
	// +kubebuilder:default=Always
	Type CompletionPolicyType `json:"type,omitempty"`

	// ActiveDeadlineSeconds is how long, in seconds from the job's start,
	// the job may run before it is stopped and its unfinished targets are
	// counted as failed. Only allowed with type Always. Unset means no
	// deadline.
	//
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the job this many seconds after it
	// finishes (0 deletes it right away). Only allowed with type Always.
	// Unset means the finished job is kept.
	//
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// CompletionPolicyType is Always or Never.
//
// +kubebuilder:validation:Enum=Always;Never
type CompletionPolicyType string

const (
	// Always finishes the job once all its targets have completed, or when
	// activeDeadlineSeconds has passed. This is the default.
	Always CompletionPolicyType = "Always"

	// Never keeps the job running after all current targets have
	// completed, so that targets appearing later are handled too.
	Never CompletionPolicyType = "Never"
)

// BroadcastJobStatus is the observed state of a BroadcastJob.
type BroadcastJobStatus struct {
	// Conditions records how the job finished: Complete or Failed.
	//
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []JobCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// StartTime is when the controller first processed the job (RFC 3339,
	// UTC).
	//
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job finished (RFC 3339, UTC).
	//
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Active is the number of the job's pods that are still running.
	//
	// +optional
	Active int32 `json:"active"`

	// Succeeded is the number of the job's pods that ended in phase
	// Succeeded.
	//
	// +optional
	Succeeded int32 `json:"succeeded"`

	// Failed is the number of the job's pods that ended in phase Failed.
	//
	// +optional
	Failed int32 `json:"failed"`

	// Desired is the number of pods the job wants, one per eligible node.
	//
	// +optional
	Desired int32 `json:"desired"`

	// Phase is the job's lifecycle phase: running, paused, completed or
	// failed.
	//
	// +optional
	Phase BroadcastJobPhase `json:"phase"`
}

// BroadcastJobPhase is the lifecycle phase of a BroadcastJob.
type BroadcastJobPhase string

const (
	// PhaseCompleted means every eligible node has run the job's pod to
	// completion.
	PhaseCompleted BroadcastJobPhase = "completed"

	// PhaseRunning means the job is creating or waiting for pods.
	PhaseRunning BroadcastJobPhase = "running"

	// PhasePaused means the job is paused and creates no new pods.
	PhasePaused BroadcastJobPhase = "paused"

	// PhaseFailed means the job failed: a pod failed under the FailFast
	// failure policy, or the active deadline passed.
	PhaseFailed BroadcastJobPhase = "failed"
)

// FailurePolicy says what a BroadcastJob does when one of its pods fails.
type FailurePolicy struct {
	// Type is FailFast (default: the job fails at the first failed pod),
	// Continue (the job keeps going) or Pause (the job pauses itself).
	//
	// +optional
	// +kubebuilder:default=FailFast
	Type FailurePolicyType `json:"type,omitempty"`

	// RestartLimit is how many container restarts a pod may accumulate
	// before it is counted as failed. Default 0.
	//
	// +optional
	RestartLimit int32 `json:"restartLimit,omitempty"`
}

// FailurePolicyType is Continue, FailFast or Pause.
//
// +kubebuilder:validation:Enum=Continue;FailFast;Pause
type FailurePolicyType string

const (
	// FailurePolicyTypeContinue keeps the job running when a pod fails.
	FailurePolicyTypeContinue FailurePolicyType = "Continue"

	// FailurePolicyTypeFailFast fails the job as soon as a pod fails. This
	// is the default.
	FailurePolicyTypeFailFast FailurePolicyType = "FailFast"

	// FailurePolicyTypePause pauses the job (sets spec.paused) when a pod
	// fails.
	FailurePolicyTypePause FailurePolicyType = "Pause"
)

// JobConditionType is the type of a BroadcastJob condition.
type JobConditionType string

const (
	// JobComplete means the job's pods have run on all eligible nodes and
	// all of them have completed.
	JobComplete JobConditionType = "Complete"

	// JobFailed means the job failed: its active deadline passed or a pod
	// failed under the FailFast failure policy.
	JobFailed JobConditionType = "Failed"
)

// JobCondition is one observation of a BroadcastJob's state.
type JobCondition struct {
	// Type of the condition: Complete or Failed.
	Type JobConditionType `json:"type"`

	// Status of the condition: True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`

	// LastProbeTime is when the condition was last checked.
	//
	// +optional
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`

	// LastTransitionTime is when the condition last changed status.
	//
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`

	// Reason is a one-word, CamelCase reason for the last transition.
	//
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message is a human-readable explanation of the last transition.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// BroadcastJob runs one pod on every eligible node of the cluster, like a
// DaemonSet whose pods run to completion.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=bcj,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".status.desired",description="Number of pods the job wants, one per eligible node."
// +kubebuilder:printcolumn:name="Active",type="integer",JSONPath=".status.active",description="Number of the job's pods still running."
// +kubebuilder:printcolumn:name="Succeeded",type="integer",JSONPath=".status.succeeded",description="Number of the job's pods that succeeded."
// +kubebuilder:printcolumn:name="Failed",type="integer",JSONPath=".status.failed",description="Number of the job's pods that failed."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the job was created."
type BroadcastJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the job.
	Spec BroadcastJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the job, written by the controller.
	Status BroadcastJobStatus `json:"status,omitempty"`
}

// BroadcastJobList is a list of BroadcastJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type BroadcastJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the BroadcastJobs.
	Items []BroadcastJob `json:"items"`
}
