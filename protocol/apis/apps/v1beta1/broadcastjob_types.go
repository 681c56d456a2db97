package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BroadcastJobSpec is what a BroadcastJob should do: run one pod, built
// from a template, to completion on each node that can take it.
type BroadcastJobSpec struct {
	// Parallelism limits how many pods of the job run at once: a
	// non-negative number, or a percentage (0%-100%) of the eligible nodes,
	// rounded up. Defaults to 2147483647, which is no limit; 0 holds back
	// new pods.
	//
	// +optional
	// +kubebuilder:default=2147483647
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="spec.parallelism: use a non-negative integer or a percentage from 0% to 100% such as \"20%\""
	Parallelism *intstr.IntOrString `json:"parallelism,omitempty"`

	// Template describes the pod placed on every eligible node. A node is
	// eligible if the pod's nodeName, node selector, node affinity,
	// tolerations and resource requests let it run there. Its
	// restartPolicy must be Never or OnFailure (OnFailure when unset). The
	// admission webhook checks the template.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Template corev1.PodTemplateSpec `json:"template"`

	// CompletionPolicy says whether the job ends once each eligible node
	// has run its pod (type Always, the default) or stays alive to serve
	// nodes that become eligible later (type Never).
	//
	// +optional
	// +kubebuilder:default={}
	CompletionPolicy CompletionPolicy `json:"completionPolicy"`

	// Paused, while true, keeps the job from creating more pods; pods that
	// already exist keep running. Defaults to false.
	//
	// +optional
	Paused bool `json:"paused,omitempty"`

	// FailurePolicy says how the job reacts when one of its pods fails.
	// The type defaults to FailFast.
	//
	// +optional
	// +kubebuilder:default={}
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
}

// CompletionPolicy says when a job (a BroadcastJob, ImagePullJob or
// ImageListPullJob) counts as finished and what happens to it afterwards.
//
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type == 'Always' || (!has(self.activeDeadlineSeconds) && !has(self.ttlSecondsAfterFinished))",message="spec.completionPolicy: activeDeadlineSeconds and ttlSecondsAfterFinished may only be set when type is Always"
type CompletionPolicy struct {
	// Type is Always or Never, Always by default. An Always job finishes
	// once every target is done (succeeded or failed) or its
	// activeDeadlineSeconds runs out. A Never job does not finish and keeps
	// working on targets that show up later, such as new nodes.
	//
	// +optional
	// +kubebuilder:default=Always
	Type CompletionPolicyType `json:"type,omitempty"`

	// ActiveDeadlineSeconds is how many seconds after its start the job
	// may run; after that it is stopped and every unfinished target counts
	// as failed. Allowed with type Always only. Unset means the job has no
	// deadline.
	//
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished is how many seconds a finished job is kept
	// before it is deleted; 0 deletes it as soon as it finishes. Allowed
	// with type Always only. Unset keeps finished jobs.
	//
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// CompletionPolicyType is the kind of completion policy: Always or Never.
//
// +kubebuilder:validation:Enum=Always;Never
type CompletionPolicyType string

const (
	// Always ends the job when all of its targets are done or when its
	// active deadline runs out. It is the default.
	Always CompletionPolicyType = "Always"

	// Never keeps the job alive after its current targets are done, so
	// that targets appearing later are served as well.
	Never CompletionPolicyType = "Never"
)

// BroadcastJobStatus is what the controller last saw of a BroadcastJob.
type BroadcastJobStatus struct {
	// Conditions tell how the job ended: Complete or Failed.
	//
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []JobCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// StartTime is when the controller first handled the job (RFC 3339,
	// UTC).
	//
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the job ended (RFC 3339, UTC).
	//
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Active counts the job's pods that are still running.
	//
	// +optional
	Active int32 `json:"active"`

	// Succeeded counts the job's pods that reached phase Succeeded.
	//
	// +optional
	Succeeded int32 `json:"succeeded"`

	// Failed counts the job's pods that reached phase Failed.
	//
	// +optional
	Failed int32 `json:"failed"`

	// Desired is how many pods the job wants: one for each eligible node.
	//
	// +optional
	Desired int32 `json:"desired"`

	// Phase is where the job is in its life: running, paused, completed or
	// failed.
	//
	// +optional
	Phase BroadcastJobPhase `json:"phase"`
}

// BroadcastJobPhase is the stage of life a BroadcastJob is in.
type BroadcastJobPhase string

const (
	// PhaseCompleted is the phase of a job whose pod has run to the end on
	// every eligible node.
	PhaseCompleted BroadcastJobPhase = "completed"

	// PhaseRunning is the phase of a job that is creating pods or waiting
	// for them.
	PhaseRunning BroadcastJobPhase = "running"

	// PhasePaused is the phase of a paused job, which creates no new pods.
	PhasePaused BroadcastJobPhase = "paused"

	// PhaseFailed is the phase of a failed job: a pod failed under the
	// FailFast policy, or the active deadline ran out.
	PhaseFailed BroadcastJobPhase = "failed"
)

// FailurePolicy says how a BroadcastJob reacts to a failed pod.
type FailurePolicy struct {
	// Type is FailFast (the default: the first failed pod fails the job),
	// Continue (the job carries on) or Pause (the job pauses itself).
	//
	// +optional
	// +kubebuilder:default=FailFast
	Type FailurePolicyType `json:"type,omitempty"`

	// RestartLimit is how many container restarts a pod may have before it
	// is treated as failed. Defaults to 0.
	//
	// +optional
	RestartLimit int32 `json:"restartLimit,omitempty"`
}

// FailurePolicyType is the reaction to a failed pod: Continue, FailFast or
// Pause.
//
// +kubebuilder:validation:Enum=Continue;FailFast;Pause
type FailurePolicyType string

const (
	// FailurePolicyTypeContinue lets the job go on after a pod fails.
	FailurePolicyTypeContinue FailurePolicyType = "Continue"

	// FailurePolicyTypeFailFast fails the whole job at the first failed
	// pod. It is the default.
	FailurePolicyTypeFailFast FailurePolicyType = "FailFast"

	// FailurePolicyTypePause pauses the job (sets spec.paused) when a pod
	// fails.
	FailurePolicyTypePause FailurePolicyType = "Pause"
)

// JobConditionType names a kind of BroadcastJob condition.
type JobConditionType string

const (
	// JobComplete is set when the job's pods have been placed on every
	// eligible node and all of them have finished.
	JobComplete JobConditionType = "Complete"

	// JobFailed is set when the job has failed: its active deadline ran
	// out or a pod failed under the FailFast policy.
	JobFailed JobConditionType = "Failed"
)

// JobCondition is one thing observed about a BroadcastJob's state.
type JobCondition struct {
	// Type is the kind of condition: Complete or Failed.
	Type JobConditionType `json:"type"`

	// Status says whether the condition holds: True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`

	// LastProbeTime is when the condition was last looked at.
	//
	// +optional
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`

	// LastTransitionTime is when the condition's status last changed.
	//
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`

	// Reason is a single CamelCase word giving the cause of the last
	// change.
	//
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message explains the last change for people to read.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// BroadcastJob runs a pod to completion once on each eligible node of the
// cluster, the way a DaemonSet runs long-lived pods.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

	// Spec is what the job should do.
	Spec BroadcastJobSpec `json:"spec,omitempty"`
	// Status is what the controller last saw of the job.
	Status BroadcastJobStatus `json:"status,omitempty"`
}

// BroadcastJobList holds a list of BroadcastJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type BroadcastJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the BroadcastJobs in the list.
	Items []BroadcastJob `json:"items"`
}
