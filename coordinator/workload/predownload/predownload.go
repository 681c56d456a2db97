// Package predownload warms a workload's new images on the nodes of its
// pods before they are updated, through ImagePullJobs the agents' swarm
// pulls: one job per changed container image, named
// <revision>-<container>, selecting the workload's pods not yet at the
// update revision, owned by the workload. The update revision is then
// labelled (apps.kruise.io/pre-predownload-created, or
// apps.kruise.io/image-predownload-ignored when a workload decides there
// is nothing to warm), so the decision is made once; when the workload's
// revisions converge, its jobs are deleted. CloneSet and Advanced
// DaemonSet use it; each decides when.
package predownload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Defaults, as OpenKruise's.
const (
	// DefaultTimeoutSeconds is a job's pull timeout unless set.
	DefaultTimeoutSeconds = 300
	// ttlSeconds: a finished job is removed after this long.
	ttlSeconds = 600
)

// Settings are a workload's pre-download knobs.
type Settings struct {
	// Parallelism is how many nodes pull at once (default 1); 0 (or
	// "0%") turns the workload's pre-download off.
	Parallelism intstr.IntOrString
	// TimeoutSeconds bounds each pull (default DefaultTimeoutSeconds).
	TimeoutSeconds int32
	// MinUpdatedReadyPods is how many updated pods must be ready before
	// the pre-download starts (default 0).
	MinUpdatedReadyPods int32
}

// SettingsOf reads the knobs from the v1beta1 strategy fields (nil for
// none), else the v1alpha1 annotations of the workload, else the defaults.
func SettingsOf(annotations map[string]string, strategy *pub.InPlaceUpdateStrategy) Settings {
	s := Settings{Parallelism: intstr.FromInt32(1), TimeoutSeconds: DefaultTimeoutSeconds}
	if strategy != nil && strategy.ImagePreDownloadParallelism != nil {
		s.Parallelism = *strategy.ImagePreDownloadParallelism
	} else if n, err := strconv.Atoi(annotations[wellknown.AnnotationImagePreDownloadParallelism]); err == nil {
		s.Parallelism = intstr.FromInt(n)
	}
	if strategy != nil && strategy.ImagePreDownloadTimeoutSeconds != nil {
		s.TimeoutSeconds = *strategy.ImagePreDownloadTimeoutSeconds
	} else if n, err := strconv.ParseInt(annotations[wellknown.AnnotationImagePreDownloadTimeoutSeconds], 10, 32); err == nil {
		s.TimeoutSeconds = int32(n)
	}
	if strategy != nil && strategy.ImagePreDownloadMinUpdatedReadyPods != nil {
		s.MinUpdatedReadyPods = *strategy.ImagePreDownloadMinUpdatedReadyPods
	} else if n, err := strconv.ParseInt(annotations[wellknown.AnnotationImagePreDownloadMinUpdatedReadyPods], 10, 32); err == nil {
		s.MinUpdatedReadyPods = int32(n)
	}
	return s
}

// Off reports whether the settings turn pre-download off (parallelism 0).
func (s Settings) Off() bool {
	return s.Parallelism.IntValue() == 0 && (s.Parallelism.Type == intstr.Int || s.Parallelism.StrVal == "0%")
}

// ChangedImages are the images of to's containers that from runs
// differently (or not at all), by container name.
func ChangedImages(from, to *corev1.PodTemplateSpec) map[string]string {
	out := map[string]string{}
	for _, c := range to.Spec.Containers {
		i := slices.IndexFunc(from.Spec.Containers, func(o corev1.Container) bool { return o.Name == c.Name })
		if i < 0 || from.Spec.Containers[i].Image != c.Image {
			out[c.Name] = c.Image
		}
	}
	return out
}

// Decided reports whether the pre-download of revision r was decided
// (jobs created, or nothing to do).
func Decided(r *appsv1.ControllerRevision) bool {
	return r.Labels[wellknown.LabelImagePreDownloadCreated] != "" || r.Labels[wellknown.LabelImagePreDownloadIgnored] != ""
}

// Manager creates and deletes a kind's pre-download jobs.
type Manager struct {
	// Client labels ControllerRevisions.
	Client kubernetes.Interface
	// Shoal creates and deletes ImagePullJobs.
	Shoal shoalclient.Interface
	// Recorder records events on the workload.
	Recorder events.EventRecorder
	// Jobs is the ImagePullJob informer's store with Index, an index by
	// the owning workload's UID; nil leaves finished rollouts' jobs to
	// their TTL.
	Jobs  cache.Indexer
	Index string
}

// Workload is the object the jobs belong to.
type Workload interface {
	metav1.Object
	runtime.Object
}

// Request is one workload's pre-download of its update revision.
type Request struct {
	// Owner is the workload, of Kind.
	Owner Workload
	Kind  schema.GroupVersionKind
	// Update is the update revision; Hash is its
	// controller-revision-hash value.
	Update *appsv1.ControllerRevision
	Hash   string
	// From and To are the old and the new pod template.
	From, To *corev1.PodTemplateSpec
	// Selector selects the workload's pods; the jobs select those not at
	// the update revision.
	Selector *metav1.LabelSelector
	// Settings are the workload's knobs.
	Settings Settings
}

// Create creates one ImagePullJob per image r changes, then labels the
// update revision created.
func (m *Manager) Create(ctx context.Context, r Request) error {
	selector := r.Selector.DeepCopy()
	selector.MatchExpressions = append(selector.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: wellknown.LabelControllerRevisionHash, Operator: metav1.LabelSelectorOpNotIn, Values: []string{r.Update.Name, r.Hash},
	})
	labels := maps.Clone(r.To.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[wellknown.LabelControllerRevisionHash] = r.Hash
	var secrets []string
	for _, s := range r.To.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	images := ChangedImages(r.From, r.To)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(images)) {
		job := &v1alpha1.ImagePullJob{
			ObjectMeta: metav1.ObjectMeta{
				Name: r.Update.Name + "-" + name, Namespace: r.Owner.GetNamespace(), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(r.Owner, r.Kind)},
			},
			Spec: v1alpha1.ImagePullJobSpec{
				Image: images[name],
				ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{
					PullSecrets: secrets,
					PodSelector: &v1alpha1.ImagePullJobPodSelector{LabelSelector: *selector},
					Parallelism: &r.Settings.Parallelism,
					PullPolicy:  &v1alpha1.PullPolicy{BackoffLimit: ptr.To[int32](1), TimeoutSeconds: &r.Settings.TimeoutSeconds},
					CompletionPolicy: v1alpha1.CompletionPolicy{
						Type: v1alpha1.Always, TTLSecondsAfterFinished: ptr.To[int32](ttlSeconds),
					},
				},
			},
		}
		_, err := m.Shoal.AppsV1alpha1().ImagePullJobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			m.Recorder.Eventf(r.Owner, nil, corev1.EventTypeWarning, "FailedCreateImagePullJob", "PreDownload", "create ImagePullJob %s: %v", job.Name, err)
			errs = append(errs, fmt.Errorf("create ImagePullJob %s: %w", job.Name, err))
		default:
			m.Recorder.Eventf(r.Owner, nil, corev1.EventTypeNormal, "CreatedImagePullJob", "PreDownload",
				"created ImagePullJob %s to pre-download %s on the nodes of the pods not yet at revision %s", job.Name, job.Spec.Image, r.Update.Name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return m.label(ctx, r.Update, wellknown.LabelImagePreDownloadCreated)
}

// Skip labels the update revision ignored: nothing to warm.
func (m *Manager) Skip(ctx context.Context, update *appsv1.ControllerRevision) error {
	return m.label(ctx, update, wellknown.LabelImagePreDownloadIgnored)
}

// label sets label key to "true" on a revision.
func (m *Manager) label(ctx context.Context, r *appsv1.ControllerRevision, key string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: "true"}}})
	if err != nil {
		return err
	}
	_, err = m.Client.AppsV1().ControllerRevisions(r.Namespace).Patch(ctx, r.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("label ControllerRevision %s %s: %w", r.Name, key, err)
	}
	return nil
}

// DeleteAll deletes the ImagePullJobs owner owns (its rollout is over), as
// the informer shows them.
func (m *Manager) DeleteAll(ctx context.Context, owner metav1.Object) error {
	if m.Jobs == nil {
		return nil
	}
	objs, err := m.Jobs.ByIndex(m.Index, string(owner.GetUID()))
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		job, ok := o.(*v1alpha1.ImagePullJob)
		if !ok || job.DeletionTimestamp != nil {
			continue
		}
		err := m.Shoal.AppsV1alpha1().ImagePullJobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &job.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete ImagePullJob %s: %w", job.Name, err))
		}
	}
	return errors.Join(errs...)
}
