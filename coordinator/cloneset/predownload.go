package cloneset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/features"
	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/coordinator/workload/predownload"
	"github.com/shoal-io/shoal/coordinator/workload/rollout"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Pre-download defaults, as OpenKruise's.
const (
	// preDownloadMinReplicas: a CloneSet of at most this many replicas
	// rolls without pre-download.
	preDownloadMinReplicas = 3
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
// pods before they are updated in place (package predownload): once the
// update revision differs from the current one and
// imagePreDownloadMinUpdatedReadyPods updated pods are ready. When the
// revisions converge the CloneSet's jobs are deleted.
func (c *Controller) preDownload(ctx context.Context, cs *v1beta1.CloneSet, update *appsv1.ControllerRevision, current string, updatedReady int32) error {
	if current == update.Name {
		return c.preDownloads.DeleteAll(ctx, cs)
	}
	if predownload.Decided(update) || !features.Enabled(c.o.Features, features.PreDownloadImageForInPlaceUpdate) {
		return nil
	}
	from, err := c.revisionTemplate(cs, current)
	if err != nil {
		return nil // the current revision is gone: nothing to compare
	}
	if why := preDownloadSkip(cs, from, &cs.Spec.Template, update.Name); why != "" {
		klog.FromContext(ctx).V(2).Info("No image pre-download for the update revision", "revision", update.Name, "why", why)
		return c.preDownloads.Skip(ctx, update)
	}
	settings := predownload.SettingsOf(cs.Annotations, cs.Spec.UpdateStrategy.RollingUpdate.InPlaceUpdateStrategy)
	if settings.Off() {
		return c.preDownloads.Skip(ctx, update)
	}
	if updatedReady < settings.MinUpdatedReadyPods {
		return nil // the new revision proves itself on a few pods first
	}
	return c.preDownloads.Create(ctx, predownload.Request{
		Owner: cs, Kind: v1beta1.SchemeGroupVersion.WithKind("CloneSet"),
		Update: update, Hash: update.Labels[wellknown.LabelControllerRevisionHash],
		From: from, To: &cs.Spec.Template, Selector: cs.Spec.Selector, Settings: settings,
	})
}
