package v1alpha1

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdvancedCronJobKind is the kind name of AdvancedCronJob.
const AdvancedCronJobKind = "AdvancedCronJob"

// AdvancedCronJobSpec is the desired state of an AdvancedCronJob: when to
// run, what to create each time, and how many finished runs to keep.
//
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || !self.schedule.contains('TZ')",message="spec.schedule: TZ= or CRON_TZ= cannot be used in the schedule when spec.timeZone is set"
type AdvancedCronJobSpec struct {
	// Schedule is when to run, in cron format ("minute hour day-of-month
	// month day-of-week", for example "*/15 * * * *"); descriptors such as
	// "@hourly" are accepted too. Required.
	//
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone the schedule is read in, for example
	// "Europe/Berlin". "Local" is not accepted. Unset means the time zone of
	// the controller process.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii() != 'local'",message="spec.timeZone: must be an explicit IANA time zone such as \"Europe/Berlin\", not Local"
	TimeZone *string `json:"timeZone,omitempty"`

	// StartingDeadlineSeconds is how late, in seconds, a run may still start
	// after its scheduled time; a run that misses it is skipped and counted
	// as failed. Unset means no deadline.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// ConcurrencyPolicy decides what happens when a run is due while the
	// previous one is still going: Allow (default) runs both, Forbid skips
	// the new run, Replace stops the running one and starts the new one.
	//
	// +optional
	// +kubebuilder:default=Allow
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// Paused, when true, stops new runs from being started; runs already
	// started are not affected. Default false.
	//
	// +optional
	// +kubebuilder:default=false
	Paused *bool `json:"paused,omitempty"`

	// SuccessfulJobsHistoryLimit is how many successfully finished runs are
	// kept; older ones are deleted. Default 3.
	//
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// FailedJobsHistoryLimit is how many failed runs are kept; older ones
	// are deleted. Default 1.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`

	// Template is what each run creates: a Job or a BroadcastJob.
	Template CronJobTemplate `json:"template"`
}

// CronJobTemplate holds the object an AdvancedCronJob creates on each run.
// Exactly one of jobTemplate and broadcastJobTemplate must be set.
//
// +kubebuilder:validation:XValidation:rule="has(self.jobTemplate) != has(self.broadcastJobTemplate)",message="spec.template: set exactly one of jobTemplate or broadcastJobTemplate"
type CronJobTemplate struct {
	// JobTemplate is the batch/v1 Job created on each run (metadata and
	// spec, as in a CronJob's jobTemplate). The admission webhook validates
	// it.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	JobTemplate *batchv1.JobTemplateSpec `json:"jobTemplate,omitempty"`

	// BroadcastJobTemplate is the BroadcastJob created on each run.
	//
	// +optional
	BroadcastJobTemplate *BroadcastJobTemplateSpec `json:"broadcastJobTemplate,omitempty"`
}

// TemplateKind is the kind of object an AdvancedCronJob creates.
type TemplateKind string

const (
	// JobTemplate means the AdvancedCronJob creates batch/v1 Jobs.
	JobTemplate TemplateKind = "Job"

	// BroadcastJobTemplate means the AdvancedCronJob creates BroadcastJobs.
	BroadcastJobTemplate TemplateKind = "BroadcastJob"
)

// BroadcastJobTemplateSpec is the metadata and spec of the BroadcastJobs an
// AdvancedCronJob creates.
type BroadcastJobTemplateSpec struct {
	// Metadata (labels, annotations) given to each created BroadcastJob.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec of each created BroadcastJob.
	//
	// +optional
	Spec BroadcastJobSpec `json:"spec,omitempty"`
}

// ConcurrencyPolicy is Allow, Forbid or Replace.
//
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	// AllowConcurrent lets runs overlap. This is the default.
	AllowConcurrent ConcurrencyPolicy = "Allow"

	// ForbidConcurrent skips a run while the previous one is still going.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"

	// ReplaceConcurrent stops the running run and starts the new one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// AdvancedCronJobStatus is the observed state of an AdvancedCronJob.
type AdvancedCronJobStatus struct {
	// Type is the kind of object the AdvancedCronJob creates: Job or
	// BroadcastJob.
	//
	// +optional
	Type TemplateKind `json:"type,omitempty"`

	// Active references the runs (Jobs or BroadcastJobs) that are still
	// going.
	//
	// +optional
	// +listType=atomic
	Active []corev1.ObjectReference `json:"active,omitempty"`

	// LastScheduleTime is when a run was last started.
	//
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
}

// AdvancedCronJob creates a Job or a BroadcastJob on a cron schedule.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=acj,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Schedule",type="string",JSONPath=".spec.schedule",description="The cron schedule."
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".status.type",description="Kind of object created on each run: Job or BroadcastJob."
// +kubebuilder:printcolumn:name="LastScheduleTime",type="date",JSONPath=".status.lastScheduleTime",description="When a run was last started."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the AdvancedCronJob was created."
type AdvancedCronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the AdvancedCronJob.
	Spec AdvancedCronJobSpec `json:"spec,omitempty"`
	// Status is the observed state of the AdvancedCronJob, written by the
	// controller.
	Status AdvancedCronJobStatus `json:"status,omitempty"`
}

// AdvancedCronJobList is a list of AdvancedCronJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type AdvancedCronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the AdvancedCronJobs.
	Items []AdvancedCronJob `json:"items"`
}
