package inplace

import (
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// NewState is the inplace-update-state a pod carries while batch now of an
// in-place update runs, with next (nil: none) waiting. prev is the state
// of the batch before (nil for the first): its batch record is kept.
func NewState(pod *corev1.Pod, now, next *Spec, prev *pub.InPlaceUpdateState, at metav1.Time) pub.InPlaceUpdateState {
	st := pub.InPlaceUpdateState{
		Revision:              now.Revision,
		UpdateTimestamp:       at,
		LastContainerStatuses: map[string]pub.InPlaceUpdateContainerStatus{},
		UpdateImages:          len(now.Images) > 0,
		UpdateEnvFromMetadata: len(now.EnvFromMetadata) > 0,
	}
	for c := range now.Images {
		if s := containerStatus(pod, c); s != nil {
			st.LastContainerStatuses[c] = pub.InPlaceUpdateContainerStatus{ImageID: s.ImageID, ContainerID: s.ContainerID}
		}
	}
	if prev != nil && prev.Revision == now.Revision {
		st.ContainerBatchesRecord = append(st.ContainerBatchesRecord, prev.ContainerBatchesRecord...)
	}
	batch := now.containers()
	st.ContainerBatchesRecord = append(st.ContainerBatchesRecord, pub.InPlaceUpdateContainerBatch{Timestamp: at, Containers: batch})
	if next != nil {
		st.NextContainerImages = next.Images
		for c, refs := range next.EnvFromMetadata {
			if st.NextContainerRefMetadata == nil {
				st.NextContainerRefMetadata = map[string]metav1.ObjectMeta{}
			}
			st.NextContainerRefMetadata[c] = refMeta(refs, next)
		}
		st.PreCheckBeforeNext = &pub.InPlaceUpdatePreCheckBeforeNext{ContainersRequiredReady: batch}
	}
	return st
}

// refMeta is the metadata a waiting container reads: its keys' new values
// (a removed key is left out).
func refMeta(refs MetadataRefs, s *Spec) metav1.ObjectMeta {
	var m metav1.ObjectMeta
	for _, k := range refs.Labels {
		if v := s.Labels[k]; v != nil {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels[k] = *v
		}
	}
	for _, k := range refs.Annotations {
		if v := s.Annotations[k]; v != nil {
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			m.Annotations[k] = *v
		}
	}
	return m
}

// ReadState reads a pod's inplace-update-state annotation (or its old
// key), reporting whether it has one.
func ReadState(pod *corev1.Pod) (*pub.InPlaceUpdateState, bool, error) {
	for _, key := range []string{wellknown.AnnotationInPlaceUpdateState, wellknown.AnnotationInPlaceUpdateStateOld} {
		raw, ok := pod.Annotations[key]
		if !ok {
			continue
		}
		st := &pub.InPlaceUpdateState{}
		if err := json.Unmarshal([]byte(raw), st); err != nil {
			return nil, true, fmt.Errorf("pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, key, err)
		}
		return st, true, nil
	}
	return nil, false, nil
}

// Apply changes pod (a copy the caller owns) for batch now: the new
// images, the label and annotation changes, and the state annotation.
// Setting the InPlaceUpdateReady condition False before, and True when
// done, is the controller's (it writes status separately).
func Apply(pod *corev1.Pod, now *Spec, st pub.InPlaceUpdateState) error {
	for i := range pod.Spec.Containers {
		if img, ok := now.Images[pod.Spec.Containers[i].Name]; ok {
			pod.Spec.Containers[i].Image = img
		}
	}
	pod.Labels = applyChanges(pod.Labels, now.Labels)
	pod.Annotations = applyChanges(pod.Annotations, now.Annotations)
	raw, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode in-place update state: %w", err)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[wellknown.AnnotationInPlaceUpdateState] = string(raw)
	return nil
}

// applyChanges sets or removes keys of m.
func applyChanges(m map[string]string, changes map[string]*string) map[string]string {
	for k, v := range changes {
		if v == nil {
			delete(m, k)
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[k] = *v
	}
	return m
}

// ImagesUpdated reports whether every container whose image the batch of
// st changed runs the new image, and lists those that do not yet. A
// container has its new image when the kubelet reports another image ID
// than before, or reports the spec's image, or runs as another container
// of the same image ID (a new tag or a digest reference of the same
// image: the kubelet may go on reporting the old tag).
func ImagesUpdated(pod *corev1.Pod, st *pub.InPlaceUpdateState) (bool, []string) {
	var pending []string
	for c, last := range st.LastContainerStatuses {
		s := containerStatus(pod, c)
		spec := containerSpec(pod, c)
		if s == nil || spec == nil {
			pending = append(pending, c)
			continue
		}
		switch {
		case last.ImageID != "" && s.ImageID != "" && s.ImageID != last.ImageID:
			continue
		case s.Image == spec.Image:
			continue
		case last.ContainerID != "" && s.ContainerID != "" && s.ContainerID != last.ContainerID && s.ImageID == last.ImageID:
			continue
		}
		pending = append(pending, c)
	}
	sort.Strings(pending)
	return len(pending) == 0, pending
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}
