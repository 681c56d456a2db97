package cloneset

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/features"
	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/coordinator/workload/rollout"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Pre-download defaults, as OpenKruise's.
const (
	// preDownloadMinReplicas: a CloneSet of at most this many replicas
	// rolls without pre-download.
	preDownloadMinReplicas = 3
	// preDownloadTimeoutSeconds is a job's pull timeout unless set.
	preDownloadTimeoutSeconds = 300
	// preDownloadTTLSeconds: a finished job is removed after this long.
	preDownloadTTLSeconds = 600
)

// preDownloadSkip says why cs's roll to update needs no pre-download, or
// "" when it does: a ReCreate update (the new pods pull anyway), a small
// CloneSet, every pod updated in one batch, or revisions that cannot be
// moved between in place.
func preDownloadSkip(cs *v1beta1.CloneSet, from, to *corev1.PodTemplateSpec, updateRev string) string {
	ru := cs.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		ru = &v1beta1.RollingUpdateCloneSetStrategy{}
	}
	replicas := ptr.Deref(cs.Spec.Replicas, 1)
	switch {
	case ru.PodUpdatePolicy == "" || ru.PodUpdatePolicy == v1beta1.RecreateCloneSetPodUpdateStrategyType:
		return "pods are recreated (podUpdatePolicy ReCreate)"
	case replicas <= preDownloadMinReplicas:
		return fmt.Sprintf("%d replicas (pre-download starts above %d)", replicas, preDownloadMinReplicas)
	}
	partition, _ := rollout.Partition(ru.Partition, replicas)
	limits, err := rollout.UpdateLimits(ru.MaxUnavailable, ru.MaxSurge, replicas)
	if err == nil && partition == 0 && limits.MaxUnavailable >= replicas {
		return "every pod is updated in one batch"
	}
	if _, err := inplace.Calculate(from, to, updateRev); err != nil {
		return "not an in-place update: " + err.Error()
	}
	return ""
}

// preDownload warms the images of cs's update revision on the nodes of its
// pods before they are updated in place: once the update revision differs
// from the current one (and imagePreDownloadMinUpdatedReadyPods updated
// pods are ready), one ImagePullJob per changed container image, named
// <revision>-<container>, for the nodes of the pods not yet updated, pulled
// through the agents' swarm. The update revision is then labelled, created
// or ignored, so the decision is made once. When the revisions converge
// the CloneSet's jobs are deleted.
func (c *Controller) preDownload(ctx context.Context, cs *v1beta1.CloneSet, update *appsv1.ControllerRevision, current string, updatedReady int32) error {
	if current == update.Name {
		return c.deletePreDownloads(ctx, cs)
	}
	if update.Labels[wellknown.LabelImagePreDownloadCreated] != "" || update.Labels[wellknown.LabelImagePreDownloadIgnored] != "" ||
		!features.Enabled(c.o.Features, features.PreDownloadImageForInPlaceUpdate) {
		return nil
	}
	from, err := c.revisionTemplate(cs, current)
	if err != nil {
		return nil // the current revision is gone: nothing to compare
	}
	if why := preDownloadSkip(cs, from, &cs.Spec.Template, update.Name); why != "" {
		klog.FromContext(ctx).V(2).Info("No image pre-download for the update revision", "revision", update.Name, "why", why)
		return c.labelRevision(ctx, update, wellknown.LabelImagePreDownloadIgnored)
	}
	strategy := cs.Spec.UpdateStrategy.RollingUpdate.InPlaceUpdateStrategy
	minReady := int32(0)
	if strategy != nil && strategy.ImagePreDownloadMinUpdatedReadyPods != nil {
		minReady = *strategy.ImagePreDownloadMinUpdatedReadyPods
	} else if n, err := strconv.ParseInt(cs.Annotations[wellknown.AnnotationImagePreDownloadMinUpdatedReadyPods], 10, 32); err == nil {
		minReady = int32(n)
	}
	if updatedReady < minReady {
		return nil // the new revision proves itself on a few pods first
	}

	hash := update.Labels[wellknown.LabelControllerRevisionHash]
	selector := cs.Spec.Selector.DeepCopy()
	selector.MatchExpressions = append(selector.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: wellknown.LabelControllerRevisionHash, Operator: metav1.LabelSelectorOpNotIn, Values: []string{update.Name, hash},
	})
	labels := maps.Clone(cs.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[wellknown.LabelControllerRevisionHash] = hash
	var secrets []string
	for _, s := range cs.Spec.Template.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	parallelism, timeout := intstr.FromInt32(1), int32(preDownloadTimeoutSeconds)
	if strategy != nil && strategy.ImagePreDownloadParallelism != nil {
		parallelism = *strategy.ImagePreDownloadParallelism
	} else if n, err := strconv.Atoi(cs.Annotations[wellknown.AnnotationImagePreDownloadParallelism]); err == nil {
		parallelism = intstr.FromInt(n)
	}
	if strategy != nil && strategy.ImagePreDownloadTimeoutSeconds != nil {
		timeout = *strategy.ImagePreDownloadTimeoutSeconds
	} else if n, err := strconv.ParseInt(cs.Annotations[wellknown.AnnotationImagePreDownloadTimeoutSeconds], 10, 32); err == nil {
		timeout = int32(n)
	}

	images := changedImages(from, &cs.Spec.Template)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(images)) {
		job := &v1alpha1.ImagePullJob{
			ObjectMeta: metav1.ObjectMeta{
				Name: update.Name + "-" + name, Namespace: cs.Namespace, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cs, v1beta1.SchemeGroupVersion.WithKind("CloneSet"))},
			},
			Spec: v1alpha1.ImagePullJobSpec{
				Image: images[name],
				ImagePullJobTemplate: v1alpha1.ImagePullJobTemplate{
					PullSecrets: secrets,
					PodSelector: &v1alpha1.ImagePullJobPodSelector{LabelSelector: *selector},
					Parallelism: &parallelism,
					PullPolicy:  &v1alpha1.PullPolicy{BackoffLimit: ptr.To[int32](1), TimeoutSeconds: &timeout},
					CompletionPolicy: v1alpha1.CompletionPolicy{
						Type: v1alpha1.Always, TTLSecondsAfterFinished: ptr.To[int32](preDownloadTTLSeconds),
					},
				},
			},
		}
		_, err := c.o.Shoal.AppsV1alpha1().ImagePullJobs(cs.Namespace).Create(ctx, job, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			c.o.Recorder.Eventf(cs, nil, corev1.EventTypeWarning, "FailedCreateImagePullJob", "PreDownload", "create ImagePullJob %s: %v", job.Name, err)
			errs = append(errs, fmt.Errorf("create ImagePullJob %s: %w", job.Name, err))
		default:
			c.o.Recorder.Eventf(cs, nil, corev1.EventTypeNormal, "CreatedImagePullJob", "PreDownload",
				"created ImagePullJob %s to pre-download %s on the nodes of the pods still at revision %s", job.Name, job.Spec.Image, current)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.labelRevision(ctx, update, wellknown.LabelImagePreDownloadCreated)
}

// changedImages are the images of to's containers that from runs
// differently (or not at all), by container name.
func changedImages(from, to *corev1.PodTemplateSpec) map[string]string {
	out := map[string]string{}
	for _, c := range to.Spec.Containers {
		i := slices.IndexFunc(from.Spec.Containers, func(o corev1.Container) bool { return o.Name == c.Name })
		if i < 0 || from.Spec.Containers[i].Image != c.Image {
			out[c.Name] = c.Image
		}
	}
	return out
}

// labelRevision sets label key to "true" on a revision.
func (c *Controller) labelRevision(ctx context.Context, r *appsv1.ControllerRevision, key string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: "true"}}})
	if err != nil {
		return err
	}
	_, err = c.o.Client.AppsV1().ControllerRevisions(r.Namespace).Patch(ctx, r.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("label ControllerRevision %s %s: %w", r.Name, key, err)
	}
	return nil
}

// deletePreDownloads deletes the ImagePullJobs cs owns (its rollout is
// over), as the informer shows them.
func (c *Controller) deletePreDownloads(ctx context.Context, cs *v1beta1.CloneSet) error {
	if c.jobs == nil {
		return nil
	}
	objs, err := c.jobs.ByIndex(byOwner, string(cs.UID))
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		job, ok := o.(*v1alpha1.ImagePullJob)
		if !ok || job.DeletionTimestamp != nil {
			continue
		}
		err := c.o.Shoal.AppsV1alpha1().ImagePullJobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &job.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete ImagePullJob %s: %w", job.Name, err))
		}
	}
	return errors.Join(errs...)
}
