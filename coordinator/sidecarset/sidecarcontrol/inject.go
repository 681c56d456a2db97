package sidecarcontrol

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1beta1 "github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// RevisionGetter lists the ControllerRevisions of a SidecarSet.
type RevisionGetter interface {
	// Revisions returns the ControllerRevisions labeled
	// kruise.io/sidecarset-name=<setName>, in any order.
	Revisions(setName string) ([]*appsv1.ControllerRevision, error)
}

// RevisionGetterFunc adapts a function to RevisionGetter.
type RevisionGetterFunc func(setName string) ([]*appsv1.ControllerRevision, error)

// Revisions calls f.
func (f RevisionGetterFunc) Revisions(setName string) ([]*appsv1.ControllerRevision, error) {
	return f(setName)
}

// Inject injects into pod, which is being created, the sidecars of the
// SidecarSets among sets that select it, the way OpenKruise's pod webhook
// does. sets are all SidecarSets; Inject matches them (see Matches, with
// ns the pod's namespace object) in name order and skips those with
// injectionStrategy.paused. It returns the names of the SidecarSets whose
// sidecars it injected, sorted. pod is changed in place only on success.
// Pods being deleted or finished are left alone.
//
// For each matching SidecarSet, Inject uses the spec of the revision
// injectionStrategy.revision names (revisionName, or else the newest
// revision labeled with customVersion, both listed through revs) when its
// policy picks it for this pod: always when updateStrategy.paused;
// otherwise with Always for every pod that updateStrategy.selector (if
// any) does not select, and with Partial for every pod that selector
// does not select and, of the others, for the share updateStrategy
// partition gives as a percentage ("90%"). Other pods get the current
// spec. A named revision that does not exist is an error.
//
// What the pod gets from each SidecarSet:
//
//   - its patchPodMetadata (see PatchPodMetadata), applied first, so
//     that transferEnv can read the patched annotations;
//   - initContainers after the pod's own, all SidecarSets' together in
//     name order;
//   - containers before the pod's own (podInjectPolicy
//     BeforeAppContainer, the default) or after them (AfterAppContainer);
//   - on every injected container, IS_INJECTED=true; the volumeMounts of
//     the pod's own containers and init containers when
//     shareVolumePolicy is enabled (skipping mount paths the sidecar
//     already has), with the variables their subPathExpr uses; their
//     volumeDevices when shareVolumeDevicePolicy is enabled; and the
//     variables transferEnv copies from the pod's containers (a
//     sidecar's own variables win);
//   - a hot-upgrade container (or native sidecar init container) as the
//     pair <name>-1, working with the real image, and <name>-2 with
//     hotUpgradeEmptyImage, both with SIDECARSET_VERSION and
//     SIDECARSET_VERSION_ALT read from their version annotations, which
//     start at "1"/"0" for <name>-1 and "0"/"1" for <name>-2, and
//     kruise.io/sidecarset-working-hotupgrade-container naming <name>-1;
//   - the SidecarSet volumes its injected containers mount or use as
//     devices, unless the pod has a volume of that name;
//   - its imagePullSecrets the pod does not have yet;
//   - its entries in kruise.io/sidecarset-hash and
//     kruise.io/sidecarset-hash-without-image, and its name in
//     kruise.io/sidecarset-injected-list.
//
// A container the pod already has by name is replaced in place when it
// is an injected one (IS_INJECTED=true: a pod recreated from a template
// that already holds sidecars) and otherwise left alone, with the
// sidecar not injected. Two SidecarSets injecting a container of the
// same name is an error naming both.
func Inject(pod *corev1.Pod, ns *corev1.Namespace, sets []*appsv1beta1.SidecarSet, revs RevisionGetter, now metav1.Time) (injected []string, err error) {
	return injector{random: rand.Float64}.inject(pod, ns, sets, revs, now)
}

// injector is Inject with its source of randomness (for the Partial
// revision policy) made replaceable.
type injector struct {
	// random returns a number in [0, 1).
	random func() float64
}

// source is what one SidecarSet injects: its current spec or a restored
// revision, with the hashes and revision name recorded on the pod.
type source struct {
	// set is the SidecarSet, restored to a revision when one was picked.
	set *appsv1beta1.SidecarSet
	// hash and hashWithoutImage are recorded in the pod's annotations.
	hash, hashWithoutImage string
	// revision is the ControllerRevision recorded, when known.
	revision string
}

// unit is one SidecarSet container as it goes into the pod: one
// container, or the two of a hot-upgrade pair.
type unit struct {
	// sidecar is the container's name in the SidecarSet.
	sidecar string
	// containers are the pod containers.
	containers []corev1.Container
	// init is set for an init container.
	init bool
	// after is set for podInjectPolicy AfterAppContainer.
	after bool
	// listed is set when the container counts in the sidecarList of the
	// hash annotations (containers and native sidecar init containers).
	listed bool
	// hot is set for a hot-upgrade pair.
	hot bool
	// volumes are the SidecarSet volumes the containers use.
	volumes []corev1.Volume
	// annotations are the hot-upgrade version annotations.
	annotations map[string]string
}

// slot is where the pod already has a container of some name.
type slot struct {
	// init is set for an init container.
	init bool
	// index is the container's index in its list.
	index int
	// injected is set when the container carries IS_INJECTED=true.
	injected bool
}

func (in injector) inject(pod *corev1.Pod, ns *corev1.Namespace, sets []*appsv1beta1.SidecarSet, revs RevisionGetter, now metav1.Time) ([]string, error) {
	if pod == nil {
		return nil, fmt.Errorf("inject sidecars: nil pod")
	}
	if !isActive(pod) {
		return nil, nil
	}
	ordered := make([]*appsv1beta1.SidecarSet, 0, len(sets))
	for _, s := range sets {
		if s != nil {
			ordered = append(ordered, s)
		}
	}
	slices.SortFunc(ordered, func(a, b *appsv1beta1.SidecarSet) int { return cmp.Compare(a.Name, b.Name) })

	var matched []*appsv1beta1.SidecarSet
	for _, set := range ordered {
		if set.Spec.InjectionStrategy.Paused {
			continue
		}
		ok, err := Matches(set, pod, ns)
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, set)
		}
	}
	// A canary SidecarSet that selects the pod takes its base's place.
	replaced := map[string]bool{}
	for _, set := range matched {
		if base, ok := CanaryBase(set); ok {
			replaced[base] = true
		}
	}
	var sources []*source
	for _, set := range matched {
		if replaced[set.Name] {
			continue
		}
		src, err := in.pick(set, pod, revs)
		if err != nil {
			return nil, fmt.Errorf("SidecarSet %s: %w", set.Name, err)
		}
		sources = append(sources, src)
	}
	if len(sources) == 0 {
		return nil, nil
	}

	work := pod.DeepCopy()
	for _, src := range sources {
		if _, err := PatchPodMetadata(&work.ObjectMeta, src.set.Spec.PatchPodMetadata); err != nil {
			return nil, fmt.Errorf("SidecarSet %s: spec.%w", src.set.Name, err)
		}
	}

	// Build every SidecarSet's containers against the pod as it came, so
	// that shared volumes and transferred variables come from the pod's
	// own containers only.
	units := make([][]unit, len(sources))
	owner := map[string]string{}
	for i, src := range sources {
		units[i] = buildUnits(src.set, work)
		for _, u := range units[i] {
			for _, c := range u.containers {
				if other, ok := owner[c.Name]; ok && other != src.set.Name {
					return nil, fmt.Errorf("SidecarSets %s and %s both inject a container named %q into pod %s; rename one of the containers or make the SidecarSets' selectors disjoint",
						other, src.set.Name, c.Name, podName(pod))
				}
				owner[c.Name] = src.set.Name
			}
		}
	}

	existing := map[string]slot{}
	for i := range work.Spec.InitContainers {
		c := &work.Spec.InitContainers[i]
		existing[c.Name] = slot{init: true, index: i, injected: isInjected(c)}
	}
	for i := range work.Spec.Containers {
		c := &work.Spec.Containers[i]
		existing[c.Name] = slot{index: i, injected: isInjected(c)}
	}
	// blocked reports whether the pod has one of u's containers as its
	// own (or in the other list), so that u is not injected.
	blocked := func(u *unit) bool {
		for _, c := range u.containers {
			if s, ok := existing[c.Name]; ok && (!s.injected || s.init != u.init) {
				return true
			}
		}
		return false
	}

	var before, after, newInit []corev1.Container
	var volumes []corev1.Volume
	var secrets []corev1.LocalObjectReference
	versions := map[string]string{}
	working := WorkingHotUpgradeContainers(work)
	hotChanged := false
	var injected []string
	specs := make([]UpgradeSpec, 0, len(sources))
	for i, src := range sources {
		list := []string{}
		injecting := false
		for j := range units[i] {
			u := &units[i][j]
			if blocked(u) {
				continue
			}
			injecting = true
			if u.listed {
				list = append(list, u.sidecar)
			}
			for _, c := range u.containers {
				if s, ok := existing[c.Name]; ok {
					if s.init {
						work.Spec.InitContainers[s.index] = c
					} else {
						work.Spec.Containers[s.index] = c
					}
					continue
				}
				switch {
				case u.init:
					newInit = append(newInit, c)
				case u.after:
					after = append(after, c)
				default:
					before = append(before, c)
				}
			}
			volumes = append(volumes, u.volumes...)
			maps.Copy(versions, u.annotations)
			if u.hot {
				working[u.sidecar] = u.containers[0].Name
				hotChanged = true
			}
		}
		if !injecting {
			continue
		}
		secrets = append(secrets, src.set.Spec.ImagePullSecrets...)
		slices.Sort(list)
		list = slices.Compact(list)
		injected = append(injected, src.set.Name)
		specs = append(specs, UpgradeSpec{
			UpdateTimestamp:    now,
			Hash:               src.hash,
			SidecarSetName:     src.set.Name,
			SidecarList:        list,
			ControllerRevision: src.revision,
		}, UpgradeSpec{
			UpdateTimestamp: now,
			Hash:            src.hashWithoutImage,
			SidecarSetName:  src.set.Name,
			SidecarList:     list,
		})
	}

	if len(injected) > 0 {
		slices.SortStableFunc(newInit, func(a, b corev1.Container) int { return cmp.Compare(a.Name, b.Name) })
		work.Spec.InitContainers = append(work.Spec.InitContainers, newInit...)
		containers := make([]corev1.Container, 0, len(before)+len(work.Spec.Containers)+len(after))
		containers = append(containers, before...)
		containers = append(containers, work.Spec.Containers...)
		work.Spec.Containers = append(containers, after...)
		work.Spec.Volumes = mergeVolumes(work.Spec.Volumes, volumes)
		work.Spec.ImagePullSecrets = mergeSecrets(work.Spec.ImagePullSecrets, secrets)

		if work.Annotations == nil {
			work.Annotations = map[string]string{}
		}
		maps.Copy(work.Annotations, versions)
		if hotChanged {
			raw, err := json.Marshal(working)
			if err != nil {
				return nil, fmt.Errorf("encode annotation %s: %w", wellknown.AnnotationSidecarSetWorkingHotUpgradeContainer, err)
			}
			work.Annotations[wellknown.AnnotationSidecarSetWorkingHotUpgradeContainer] = string(raw)
		}
		for k := 0; k < len(specs); k += 2 {
			if err := SetPodUpgradeSpec(work, wellknown.AnnotationSidecarSetHash, specs[k]); err != nil {
				return nil, err
			}
			if err := SetPodUpgradeSpec(work, wellknown.AnnotationSidecarSetHashWithoutImage, specs[k+1]); err != nil {
				return nil, err
			}
		}
		names := append(InjectedSidecarSets(work), injected...)
		slices.Sort(names)
		work.Annotations[wellknown.AnnotationSidecarSetInjectedList] = strings.Join(slices.Compact(names), ",")
	}
	*pod = *work
	return injected, nil
}

// isActive reports whether pod is neither being deleted nor finished.
func isActive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// isInjected reports whether c was injected from a SidecarSet
// (IS_INJECTED=true).
func isInjected(c *corev1.Container) bool {
	e := findEnv(c.Env, wellknown.EnvIsInjected)
	return e != nil && e.Value == "true"
}

// pick chooses what set injects into pod: its current spec, or the
// revision injectionStrategy.revision names.
func (in injector) pick(set *appsv1beta1.SidecarSet, pod *corev1.Pod, revs RevisionGetter) (*source, error) {
	ri := set.Spec.InjectionStrategy.Revision
	var name, version string
	if ri != nil {
		if ri.RevisionName != nil {
			name = *ri.RevisionName
		}
		if ri.CustomVersion != nil {
			version = *ri.CustomVersion
		}
	}
	if name == "" && version == "" {
		hash, hashWithoutImage, err := Hashes(set)
		if err != nil {
			return nil, err
		}
		return &source{set: set, hash: hash, hashWithoutImage: hashWithoutImage, revision: set.Status.LatestRevision}, nil
	}
	rev, err := findRevision(set, name, version, revs)
	if err != nil {
		return nil, err
	}
	use, err := in.useRevision(set, pod, ri.Policy)
	if err != nil {
		return nil, err
	}
	if !use {
		hash, hashWithoutImage, err := Hashes(set)
		if err != nil {
			return nil, err
		}
		return &source{set: set, hash: hash, hashWithoutImage: hashWithoutImage, revision: set.Status.LatestRevision}, nil
	}
	restored, err := ApplyRevision(set, rev)
	if err != nil {
		return nil, err
	}
	return &source{
		set:              restored,
		hash:             restored.Annotations[wellknown.AnnotationSidecarSetHash],
		hashWithoutImage: restored.Annotations[wellknown.AnnotationSidecarSetHashWithoutImage],
		revision:         rev.Name,
	}, nil
}

// findRevision finds the revision of set called name or, when name is
// empty, the newest one labeled with the custom version.
func findRevision(set *appsv1beta1.SidecarSet, name, version string, revs RevisionGetter) (*appsv1.ControllerRevision, error) {
	if revs == nil {
		return nil, fmt.Errorf("spec.injectionStrategy.revision is set but the revisions of SidecarSets cannot be read")
	}
	list, err := revs.Revisions(set.Name)
	if err != nil {
		return nil, fmt.Errorf("spec.injectionStrategy.revision: list the ControllerRevisions of SidecarSet %s: %w", set.Name, err)
	}
	if name != "" {
		for _, r := range list {
			if r != nil && r.Name == name {
				return r, nil
			}
		}
		return nil, fmt.Errorf("spec.injectionStrategy.revision.revisionName: ControllerRevision %q is not a revision of SidecarSet %s", name, set.Name)
	}
	var best *appsv1.ControllerRevision
	for _, r := range list {
		if r == nil || r.Labels[wellknown.LabelSidecarSetCustomVersion] != version {
			continue
		}
		if best == nil || r.Revision > best.Revision || (r.Revision == best.Revision && r.Name > best.Name) {
			best = r
		}
	}
	if best == nil {
		return nil, fmt.Errorf("spec.injectionStrategy.revision.customVersion: no ControllerRevision of SidecarSet %s has custom version %q", set.Name, version)
	}
	return best, nil
}

// useRevision decides whether pod gets the revision named in set's
// injectionStrategy.revision (true) or the current spec (false).
func (in injector) useRevision(set *appsv1beta1.SidecarSet, pod *corev1.Pod, policy appsv1beta1.SidecarSetInjectRevisionPolicy) (bool, error) {
	us := &set.Spec.UpdateStrategy
	if us.Paused {
		return true, nil
	}
	selected := false
	if us.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(us.Selector)
		if err != nil {
			return false, fmt.Errorf("spec.updateStrategy.selector: %w", err)
		}
		selected = sel.Matches(labels.Set(pod.Labels))
	}
	if selected {
		if policy != appsv1beta1.PartialSidecarSetInjectRevisionPolicy {
			return false, nil
		}
	} else if us.Selector != nil || policy != appsv1beta1.PartialSidecarSetInjectRevisionPolicy {
		return true, nil
	}
	share, err := partitionShare(us.Partition)
	if err != nil {
		return false, err
	}
	return in.random() < share, nil
}

// partitionShare is the share of new pods a Partial revision policy gives
// the named revision: updateStrategy.partition as a fraction when it is a
// percentage, else 0 (an absolute partition says nothing about new pods).
func partitionShare(p *intstr.IntOrString) (float64, error) {
	if p == nil || p.Type == intstr.Int {
		return 0, nil
	}
	s, ok := strings.CutSuffix(strings.TrimSpace(p.StrVal), "%")
	if !ok {
		return 0, fmt.Errorf("spec.updateStrategy.partition %q: want an integer or a percentage", p.StrVal)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v > 100 {
		return 0, fmt.Errorf("spec.updateStrategy.partition %q: want a percentage from 0%% to 100%%", p.StrVal)
	}
	return v / 100, nil
}

// buildUnits prepares set's init containers and containers for pod.
func buildUnits(set *appsv1beta1.SidecarSet, pod *corev1.Pod) []unit {
	vols := make(map[string]corev1.Volume, len(set.Spec.Volumes))
	for _, v := range set.Spec.Volumes {
		if _, ok := vols[v.Name]; !ok {
			vols[v.Name] = v
		}
	}
	out := make([]unit, 0, len(set.Spec.InitContainers)+len(set.Spec.Containers))
	for i := range set.Spec.InitContainers {
		sc := &set.Spec.InitContainers[i]
		out = append(out, buildUnit(sc, pod, vols, true, IsNativeSidecar(&sc.Container)))
	}
	for i := range set.Spec.Containers {
		out = append(out, buildUnit(&set.Spec.Containers[i], pod, vols, false, true))
	}
	return out
}

// buildUnit prepares one SidecarSet container sc for pod; vols are the
// SidecarSet's volumes by name, init says sc is an init container, and
// listed that it runs alongside the app (a container or a native
// sidecar).
func buildUnit(sc *appsv1beta1.SidecarContainer, pod *corev1.Pod, vols map[string]corev1.Volume, init, listed bool) unit {
	c := *sc.Container.DeepCopy()
	u := unit{sidecar: sc.Name, init: init, listed: listed, after: sc.PodInjectPolicy == appsv1beta1.AfterAppContainerType}

	used := map[string]bool{}
	for _, m := range c.VolumeMounts {
		used[m.Name] = true
	}
	for _, d := range c.VolumeDevices {
		used[d.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		if v, ok := vols[name]; ok {
			u.volumes = append(u.volumes, *v.DeepCopy())
		}
	}

	mounts, subPathEnvs := sharedMounts(sc, pod)
	devices := sharedDevices(sc, pod)
	transfer := mergeEnv(transferEnvs(sc, pod), subPathEnvs)
	c.VolumeMounts = mergeMounts(c.VolumeMounts, mounts, c.VolumeDevices)
	c.VolumeDevices = mergeDevices(c.VolumeDevices, devices, c.VolumeMounts)
	c.Env = setEnv(c.Env, corev1.EnvVar{Name: wellknown.EnvIsInjected, Value: "true"})
	c.Env = mergeEnv(c.Env, transfer)

	if IsHotUpgrade(sc) && listed {
		n1, n2 := HotUpgradeNames(sc.Name)
		c1, c2 := c.DeepCopy(), c.DeepCopy()
		c1.Name, c2.Name = n1, n2
		c2.Image = sc.UpgradeStrategy.HotUpgradeEmptyImage
		c1.Env = versionEnvs(c1.Env, n1)
		c2.Env = versionEnvs(c2.Env, n2)
		u.containers = []corev1.Container{*c1, *c2}
		u.hot = true
		u.annotations = map[string]string{
			VersionAnnotation(n1): "1", VersionAltAnnotation(n1): "0",
			VersionAnnotation(n2): "0", VersionAltAnnotation(n2): "1",
		}
		return u
	}
	u.containers = []corev1.Container{c}
	return u
}

// versionEnvs sets SIDECARSET_VERSION and SIDECARSET_VERSION_ALT on the
// hot-upgrade container called name, read from its version annotations.
func versionEnvs(env []corev1.EnvVar, name string) []corev1.EnvVar {
	fromAnnotation := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.annotations['%s']", key)}}
	}
	env = setEnv(env, corev1.EnvVar{Name: wellknown.EnvSidecarSetVersion, ValueFrom: fromAnnotation(VersionAnnotation(name))})
	return setEnv(env, corev1.EnvVar{Name: wellknown.EnvSidecarSetVersionAlt, ValueFrom: fromAnnotation(VersionAltAnnotation(name))})
}

// appContainers are the pod's own containers and then its own init
// containers (those not injected from a SidecarSet).
func appContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if !isInjected(&list[i]) {
				out = append(out, &list[i])
			}
		}
	}
	return out
}

// sharedMounts returns, when sc shares volumes, the volumeMounts of the
// pod's own containers and the variables their subPathExpr refer to.
func sharedMounts(sc *appsv1beta1.SidecarContainer, pod *corev1.Pod) ([]corev1.VolumeMount, []corev1.EnvVar) {
	if sc.ShareVolumePolicy.Type != appsv1beta1.ShareVolumePolicyEnabled {
		return nil, nil
	}
	var mounts []corev1.VolumeMount
	var envs []corev1.EnvVar
	for _, app := range appContainers(pod) {
		for _, m := range app.VolumeMounts {
			mounts = append(mounts, *m.DeepCopy())
			for _, ref := range subPathExprVar.FindAllStringSubmatch(m.SubPathExpr, -1) {
				if e := findEnv(app.Env, ref[1]); e != nil {
					envs = mergeEnv(envs, []corev1.EnvVar{*e.DeepCopy()})
				}
			}
		}
	}
	return mounts, envs
}

// sharedDevices returns, when sc shares volume devices, the volumeDevices
// of the pod's own containers.
func sharedDevices(sc *appsv1beta1.SidecarContainer, pod *corev1.Pod) []corev1.VolumeDevice {
	if sc.ShareVolumeDevicePolicy == nil || sc.ShareVolumeDevicePolicy.Type != appsv1beta1.ShareVolumePolicyEnabled {
		return nil
	}
	var out []corev1.VolumeDevice
	for _, app := range appContainers(pod) {
		out = append(out, app.VolumeDevices...)
	}
	return out
}

// mergeMounts appends the mounts of extra whose mount path own does not
// have yet, leaving out volumes own uses as devices (a container cannot
// have a volume both ways).
func mergeMounts(own, extra []corev1.VolumeMount, devices []corev1.VolumeDevice) []corev1.VolumeMount {
	paths := map[string]bool{}
	for _, m := range own {
		paths[m.MountPath] = true
	}
	asDevice := map[string]bool{}
	for _, d := range devices {
		asDevice[d.Name] = true
	}
	for _, m := range extra {
		if paths[m.MountPath] || asDevice[m.Name] {
			continue
		}
		paths[m.MountPath] = true
		own = append(own, m)
	}
	return own
}

// mergeDevices appends the devices of extra whose name and device path
// own does not have yet, leaving out volumes own mounts.
func mergeDevices(own, extra []corev1.VolumeDevice, mounts []corev1.VolumeMount) []corev1.VolumeDevice {
	seen := map[string]bool{}
	paths := map[string]bool{}
	for _, d := range own {
		seen[d.Name], paths[d.DevicePath] = true, true
	}
	for _, m := range mounts {
		seen[m.Name] = true
	}
	for _, d := range extra {
		if seen[d.Name] || paths[d.DevicePath] {
			continue
		}
		seen[d.Name], paths[d.DevicePath] = true, true
		own = append(own, d)
	}
	return own
}

// mergeVolumes appends the volumes of extra whose name pod does not have
// yet; the pod's own (and the first SidecarSet's) win.
func mergeVolumes(pod, extra []corev1.Volume) []corev1.Volume {
	seen := map[string]bool{}
	for _, v := range pod {
		seen[v.Name] = true
	}
	for _, v := range extra {
		if !seen[v.Name] {
			seen[v.Name] = true
			pod = append(pod, v)
		}
	}
	return pod
}

// mergeSecrets appends the image pull secrets of extra the pod does not
// reference yet.
func mergeSecrets(pod, extra []corev1.LocalObjectReference) []corev1.LocalObjectReference {
	seen := map[string]bool{}
	for _, s := range pod {
		seen[s.Name] = true
	}
	for _, s := range extra {
		if !seen[s.Name] {
			seen[s.Name] = true
			pod = append(pod, s)
		}
	}
	return pod
}

// CanaryBase returns the SidecarSet set is a canary of: the value of its
// apps.kruise.io/sidecarset-base annotation when its
// apps.kruise.io/sidecarset-canary annotation is "true". A pod that both
// select gets the canary's sidecars instead of the base's.
func CanaryBase(set *appsv1beta1.SidecarSet) (string, bool) {
	if set.Annotations[wellknown.AnnotationSidecarSetCanary] != "true" {
		return "", false
	}
	base := set.Annotations[wellknown.AnnotationSidecarSetBase]
	return base, base != "" && base != set.Name
}
