package webhook

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// defaultContainer fills in what the apiserver defaults in a pod's
// container (k8s.io/kubernetes/pkg/apis/core/v1 SetDefaults_Container and
// the defaults of the types it holds), for containers the apiserver stores
// outside a pod, such as a SidecarSet's sidecars:
//   - imagePullPolicy: Always for a :latest or untagged image, else
//     IfNotPresent;
//   - terminationMessagePath /dev/termination-log, terminationMessagePolicy
//     File;
//   - each port's protocol TCP;
//   - each env fieldRef's apiVersion v1;
//   - resource quantities rounded up to milli units;
//   - probes: timeoutSeconds 1, periodSeconds 10, successThreshold 1,
//     failureThreshold 3, and httpGet path / and scheme HTTP (lifecycle
//     hooks' httpGet too).
func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil {
			defaultFieldRef(from.FieldRef)
		}
	}
	roundUpToMilli(c.Resources.Limits)
	roundUpToMilli(c.Resources.Requests)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p == nil {
			continue
		}
		defaultProbe(p)
		defaultHTTPGet(p.HTTPGet)
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultPullPolicy is the apiserver's default pull policy for image: an
// image without a tag is :latest, unless it names a digest.
func defaultPullPolicy(image string) corev1.PullPolicy {
	if image == "" {
		return corev1.PullIfNotPresent // not a valid image; validation says so
	}
	ref, digest, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	if tag == "latest" || (tag == "" && digest == "") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// defaultFieldRef sets an object field selector's apiVersion to v1.
func defaultFieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// roundUpToMilli rounds every quantity of l up to milli units, as the
// apiserver stores them.
func roundUpToMilli(l corev1.ResourceList) {
	for name, q := range l {
		q.RoundUp(-3)
		l[name] = q
	}
}

// defaultProbe sets a probe's unset timings.
func defaultProbe(p *corev1.Probe) {
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
}

// defaultHTTPGet sets an HTTP GET action's unset path and scheme.
func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}
