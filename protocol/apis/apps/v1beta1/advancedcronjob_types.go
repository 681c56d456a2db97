package v1beta1

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdvancedCronJobKind is the name of the AdvancedCronJob kind.
const AdvancedCronJobKind = "AdvancedCronJob"

// AdvancedCronJobSpec is what an AdvancedCronJob should do: on which
// schedule, what to create at each run, and how many finished runs to
// keep.
//
// +kubebuilder:validation:XValidation:rule="!has(self.timeZone) || !self.schedule.contains('TZ')",message="spec.schedule: TZ= or CRON_TZ= cannot be used in the schedule when spec.timeZone is set"
type AdvancedCronJobSpec struct {
	// Schedule says when runs happen, in cron syntax ("minute hour
	// day-of-month month day-of-week", such as "*/15 * * * *"); shortcuts
	// such as "@hourly" work too. Required.
	//
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone the schedule is read in, such as
	// "Europe/Berlin"; "Local" is refused. Unset means the time zone of
	// the controller process.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii() != 'local'",message="spec.timeZone: must be an explicit IANA time zone such as \"Europe/Berlin\", not Local"
	TimeZone *string `json:"timeZone,omitempty"`

	// StartingDeadlineSeconds is how many seconds after its scheduled time
	// a run may still start; a run that misses it is skipped and counted
	// as failed. Unset means no deadline.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// ConcurrencyPolicy says what to do when a run is due and the last one
	// is still going: Allow (the default) starts it anyway, Forbid skips
	// it, Replace stops the running one and starts the new one.
	//
	// +optional
	// +kubebuilder:default=Allow
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// Paused, while true, keeps new runs from starting; runs already
	// started go on. Defaults to false.
	//
	// +optional
	// +kubebuilder:default=false
	Paused *bool `json:"paused,omitempty"`

	// SuccessfulJobsHistoryLimit is how many runs that succeeded are kept;
	// older ones are deleted. Defaults to 3.
	//
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`

	// FailedJobsHistoryLimit is how many runs that failed are kept; older
	// ones are deleted. Defaults to 1.
	//
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`

	// Template is what each run creates: a Job, a BroadcastJob or an
	// ImageListPullJob.
	Template CronJobTemplate `json:"template"`
}

// CronJobTemplate holds the object an AdvancedCronJob creates at each run.
// Exactly one of jobTemplate, broadcastJobTemplate and
// imageListPullJobTemplate must be set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.jobTemplate), has(self.broadcastJobTemplate), has(self.imageListPullJobTemplate)].filter(x, x).size() == 1",message="spec.template: set exactly one of jobTemplate, broadcastJobTemplate or imageListPullJobTemplate"
type CronJobTemplate struct {
	// JobTemplate is the batch/v1 Job each run creates (metadata and spec,
	// as in a CronJob's jobTemplate). The admission webhook checks it.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	JobTemplate *batchv1.JobTemplateSpec `json:"jobTemplate,omitempty"`

	// BroadcastJobTemplate is the BroadcastJob each run creates.
	//
	// +optional
	BroadcastJobTemplate *BroadcastJobTemplateSpec `json:"broadcastJobTemplate,omitempty"`

	// ImageListPullJobTemplate is the ImageListPullJob each run creates,
	// for example to refresh images on nodes every night.
	//
	// +optional
	ImageListPullJobTemplate *ImageListPullJobTemplateSpec `json:"imageListPullJobTemplate,omitempty"`
}

// TemplateKind names the kind of object an AdvancedCronJob creates.
type TemplateKind string

const (
	// JobTemplate is reported when the AdvancedCronJob creates batch/v1
	// Jobs.
	JobTemplate TemplateKind = "Job"

	// BroadcastJobTemplate is reported when the AdvancedCronJob creates
	// BroadcastJobs.
	BroadcastJobTemplate TemplateKind = "BroadcastJob"

	// ImageListPullJobTemplate is reported when the AdvancedCronJob creates
	// ImageListPullJobs.
	ImageListPullJobTemplate TemplateKind = "ImageListPullJob"
)

// BroadcastJobTemplateSpec is the metadata and spec given to each
// BroadcastJob an AdvancedCronJob creates.
type BroadcastJobTemplateSpec struct {
	// Metadata (labels and annotations) copied onto each BroadcastJob.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec of each BroadcastJob.
	//
	// +optional
	Spec BroadcastJobSpec `json:"spec,omitempty"`
}

// ImageListPullJobTemplateSpec is the metadata and spec given to each
// ImageListPullJob an AdvancedCronJob creates.
type ImageListPullJobTemplateSpec struct {
	// Metadata (labels and annotations) copied onto each ImageListPullJob.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec of each ImageListPullJob.
	//
	// +optional
	Spec ImageListPullJobSpec `json:"spec,omitempty"`
}

// ConcurrencyPolicy is what to do with overlapping runs: Allow, Forbid or
// Replace.
//
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	// AllowConcurrent lets a new run start while earlier ones still go. It
	// is the default.
	AllowConcurrent ConcurrencyPolicy = "Allow"

	// ForbidConcurrent skips a run while the one before it still goes.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"

	// ReplaceConcurrent stops the run that still goes and starts the new
	// one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// AdvancedCronJobStatus is what the controller last saw of an
// AdvancedCronJob.
type AdvancedCronJobStatus struct {
	// Type is the kind of object the AdvancedCronJob creates: Job,
	// BroadcastJob or ImageListPullJob.
	//
	// +optional
	Type TemplateKind `json:"type,omitempty"`

	// Active points to the runs (Jobs, BroadcastJobs or ImageListPullJobs)
	// that have not finished.
	//
	// +optional
	// +listType=atomic
	Active []corev1.ObjectReference `json:"active,omitempty"`

	// LastScheduleTime is when the latest run was started.
	//
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
}

// AdvancedCronJob creates a Job, a BroadcastJob or an ImageListPullJob on
// a cron schedule.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=acj,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Schedule",type="string",JSONPath=".spec.schedule",description="The cron schedule."
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".status.type",description="Kind of object created on each run: Job, BroadcastJob or ImageListPullJob."
// +kubebuilder:printcolumn:name="LastScheduleTime",type="date",JSONPath=".status.lastScheduleTime",description="When a run was last started."
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp",description="Time since the AdvancedCronJob was created."
type AdvancedCronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the AdvancedCronJob should do.
	Spec AdvancedCronJobSpec `json:"spec,omitempty"`
	// Status is what the controller last saw of the AdvancedCronJob.
	Status AdvancedCronJobStatus `json:"status,omitempty"`
}

// AdvancedCronJobList holds a list of AdvancedCronJobs.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type AdvancedCronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the AdvancedCronJobs in the list.
	Items []AdvancedCronJob `json:"items"`
}
