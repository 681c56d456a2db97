package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// PodProbeMarkerValidatePath serves ValidatePodProbeMarker.
const PodProbeMarkerValidatePath = "/validate-podprobemarker"

// PodProbeMarker is served at v1alpha1 only (its storage version), so the
// webhook decodes v1alpha1. The CRD already checks, before this webhook
// runs, a non-empty selector that does not change, at least one probe,
// probe names without '#' that are not built-in condition names,
// markerPolicy states and entries with labels or annotations: the webhook
// checks them again (an old CRD may be installed) and adds what the schema
// cannot express. No defaults are applied to the probe fields.

// ppmBuiltinConditions are the pod conditions that Kubernetes and Shoal own:
// a probe may not be named after one (OpenKruise's rule), and, in Shoal, a
// probe may not write one as its podConditionType either.
var ppmBuiltinConditions = []string{
	string(corev1.PodScheduled), string(corev1.PodInitialized), string(corev1.PodReady), string(corev1.ContainersReady),
	string(wellknown.ConditionKruisePodReady), string(wellknown.ConditionInPlaceUpdateReady),
}

var _ Handler = ValidatePodProbeMarker

// ValidatePodProbeMarker handles CREATE and UPDATE of a PodProbeMarker,
// following OpenKruise's PodProbeMarker validating webhook. It denies, with
// HTTP 422 and one line per problem naming the field and the fix:
//   - a missing, empty or malformed spec.selector, and, on UPDATE, a
//     changed one (the selector is immutable);
//   - no probes;
//   - a probe name that is empty, contains '#', is a built-in pod
//     condition (PodScheduled, Initialized, Ready, ContainersReady,
//     KruisePodReady, InPlaceUpdateReady) or is used twice;
//   - an empty containerName;
//   - a probe without exactly one of exec, tcpSocket and httpGet (grpc is
//     refused: the node agent does not run gRPC probes); an exec without a
//     command; a tcpSocket or httpGet host (the probe always targets the
//     pod's IP); an httpGet without path, with a path that does not parse,
//     a scheme other than HTTP and HTTPS, or a malformed header name; a
//     port that is neither a number from 1 to 65535 nor a port name;
//     negative initialDelaySeconds, timeoutSeconds, periodSeconds,
//     successThreshold or failureThreshold;
//   - a probe with neither podConditionType nor markerPolicy; a
//     podConditionType that is not a qualified name, is written by another
//     probe of the PodProbeMarker, or (a Shoal addition) is a built-in pod
//     condition;
//   - a markerPolicy state other than Succeeded and Failed, a state given
//     twice, an entry without labels and annotations, and label keys,
//     label values or annotation keys Kubernetes would refuse on a pod.
//
// An UPDATE that leaves spec unchanged is allowed without these checks, so
// that metadata changes (the controller's finalizer) never fail on a spec
// admitted under older rules. Status updates and deletes are allowed.
func ValidatePodProbeMarker(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	ppm := &v1alpha1.PodProbeMarker{}
	if err := json.Unmarshal(req.Object.Raw, ppm); err != nil {
		return badRequest(fmt.Sprintf("could not decode the PodProbeMarker: %v", err))
	}
	var errs field.ErrorList
	if req.Operation == admissionv1.Update {
		old := &v1alpha1.PodProbeMarker{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return badRequest(fmt.Sprintf("could not decode the stored PodProbeMarker: %v", err))
		}
		if apiequality.Semantic.DeepEqual(ppm.Spec, old.Spec) {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		if !apiequality.Semantic.DeepEqual(ppm.Spec.Selector, old.Spec.Selector) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "selector"), fmt.Sprintf(
				"cannot be changed after creation; set it back to %s, or delete the PodProbeMarker and create a new one for the other pods",
				ppmSelectorString(old.Spec.Selector))))
		}
	}
	errs = append(errs, ppmValidateSpec(&ppm.Spec, field.NewPath("spec"))...)
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return Deny(fmt.Sprintf("PodProbeMarker %q is invalid: %s", cmp.Or(ppm.Name, req.Name), strings.Join(msgs, "\n")))
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// ppmSelectorString renders a selector for a message: its JSON, which
// kubectl edit users can paste back.
func ppmSelectorString(sel *metav1.LabelSelector) string {
	if sel == nil {
		return "nothing (remove it)"
	}
	raw, err := json.Marshal(sel)
	if err != nil {
		return fmt.Sprintf("%v", sel)
	}
	return string(raw)
}

// ppmValidateSpec checks a PodProbeMarker spec on its own.
func ppmValidateSpec(spec *v1alpha1.PodProbeMarkerSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := path.Child("selector")
	if spec.Selector == nil {
		errs = append(errs, field.Required(selPath,
			"a PodProbeMarker needs a selector for the pods to probe; set matchLabels, for example {app: game-server}"))
	} else {
		for _, e := range metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath) {
			if strings.HasSuffix(e.Field, ".operator") {
				e.Detail += "; use In, NotIn, Exists or DoesNotExist"
			}
			errs = append(errs, e)
		}
		if len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, "{}",
				"an empty selector would probe every pod of the namespace; add matchLabels or matchExpressions"))
		}
	}

	probesPath := path.Child("probes")
	if len(spec.Probes) == 0 {
		return append(errs, field.Required(probesPath,
			"add at least one probe with name, containerName, probe (exec, tcpSocket or httpGet) and podConditionType and/or markerPolicy"))
	}
	names := map[string]int{}
	conditions := map[string]int{}
	for i := range spec.Probes {
		p := &spec.Probes[i]
		pp := probesPath.Index(i)
		errs = append(errs, ppmValidateProbeName(p.Name, i, names, pp.Child("name"))...)
		if p.ContainerName == "" {
			errs = append(errs, field.Required(pp.Child("containerName"),
				"set the name of the container to probe (a container, or a restartable init container, of the selected pods)"))
		}
		errs = append(errs, ppmValidateProbe(&p.Probe, pp.Child("probe"))...)
		if p.PodConditionType == "" && len(p.MarkerPolicy) == 0 {
			errs = append(errs, field.Required(pp, "set podConditionType (a pod condition records the result), markerPolicy "+
				"(pod labels and annotations record it) or both; with neither the probe's result goes nowhere"))
		}
		if p.PodConditionType != "" {
			errs = append(errs, ppmValidateConditionType(p.PodConditionType, i, conditions, pp.Child("podConditionType"))...)
		}
		errs = append(errs, ppmValidateMarkerPolicy(p.MarkerPolicy, pp.Child("markerPolicy"))...)
	}
	return errs
}

// ppmValidateProbeName checks the name of probe i; names maps the names
// seen so far to their probe's index.
func ppmValidateProbeName(name string, i int, names map[string]int, path *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "name the probe, for example idle; names are unique within the PodProbeMarker")}
	case strings.Contains(name, "#"):
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf(
			"must not contain '#', which joins the PodProbeMarker's and the probe's names on the node; rename it, for example to %q",
			strings.ReplaceAll(name, "#", "-")))}
	case slices.Contains(ppmBuiltinConditions, name):
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf(
			"must not be a built-in pod condition (%s); choose another name, for example %q",
			strings.Join(ppmBuiltinConditions, ", "), "custom-"+strings.ToLower(name)))}
	}
	if first, ok := names[name]; ok {
		e := field.Duplicate(path, name)
		e.Detail = fmt.Sprintf("spec.probes[%d] has this name already; probe names are unique within the PodProbeMarker, rename one of them", first)
		return field.ErrorList{e}
	}
	names[name] = i
	return nil
}

// ppmValidateConditionType checks the podConditionType of probe i;
// conditions maps the condition types seen so far to their probe's index.
func ppmValidateConditionType(ct string, i int, conditions map[string]int, path *field.Path) field.ErrorList {
	if first, ok := conditions[ct]; ok {
		e := field.Duplicate(path, ct)
		e.Detail = fmt.Sprintf("spec.probes[%d] writes this pod condition already; give each probe a condition type of its own", first)
		return field.ErrorList{e}
	}
	conditions[ct] = i
	if slices.Contains(ppmBuiltinConditions, ct) {
		return field.ErrorList{field.Invalid(path, ct, fmt.Sprintf(
			"is a built-in pod condition that Kubernetes or Shoal writes; use a condition of your own, for example %q",
			"game.example.com/"+strings.ToLower(ct)))}
	}
	errs := metav1validation.ValidateLabelName(ct, path)
	for _, e := range errs {
		e.Detail += `; use a qualified name such as "game.example.com/idle"`
	}
	return errs
}

// ppmValidateProbe checks the handler and timing of a probe.
func ppmValidateProbe(probe *v1alpha1.ContainerProbeSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	var handlers []string
	if probe.Exec != nil {
		handlers = append(handlers, "exec")
		if len(probe.Exec.Command) == 0 {
			errs = append(errs, field.Required(path.Child("exec", "command"),
				`set the command to run in the container, for example ["/bin/sh", "-c", "/home/game/idle.sh"]; exit code 0 means Succeeded`))
		}
	}
	if probe.TCPSocket != nil {
		handlers = append(handlers, "tcpSocket")
		p := path.Child("tcpSocket")
		errs = append(errs, ppmValidateHost(probe.TCPSocket.Host, p.Child("host"))...)
		errs = append(errs, ppmValidatePort(probe.TCPSocket.Port, p.Child("port"))...)
	}
	if probe.HTTPGet != nil {
		handlers = append(handlers, "httpGet")
		errs = append(errs, ppmValidateHTTPGet(probe.HTTPGet, path.Child("httpGet"))...)
	}
	if probe.GRPC != nil {
		errs = append(errs, field.Forbidden(path.Child("grpc"),
			"gRPC probes are not supported by PodProbeMarker; use exec with a gRPC health client (for example grpc_health_probe -addr=:9090), or tcpSocket"))
	}
	switch {
	case len(handlers) == 0 && probe.GRPC == nil:
		errs = append(errs, field.Required(path, "set exactly one of exec, tcpSocket or httpGet"))
	case len(handlers) > 1:
		errs = append(errs, field.Forbidden(path, fmt.Sprintf(
			"has %s, but a probe runs exactly one handler; keep one and move the others to probes of their own", strings.Join(handlers, " and "))))
	}
	for _, t := range []struct {
		name  string
		value int32
	}{
		{"initialDelaySeconds", probe.InitialDelaySeconds},
		{"timeoutSeconds", probe.TimeoutSeconds},
		{"periodSeconds", probe.PeriodSeconds},
		{"successThreshold", probe.SuccessThreshold},
		{"failureThreshold", probe.FailureThreshold},
	} {
		for _, e := range apivalidation.ValidateNonnegativeField(int64(t.value), path.Child(t.name)) {
			e.Detail += "; leave it unset (taken as 1) or set a positive number"
			errs = append(errs, e)
		}
	}
	return errs
}

// ppmValidateHost forbids a tcpSocket or httpGet host: the node agent sends
// these probes to the pod's IP, and a host would let a probe reach other
// addresses from the node (OpenKruise PR #2309).
func ppmValidateHost(host string, path *field.Path) field.ErrorList {
	if host == "" {
		return nil
	}
	return field.ErrorList{field.Forbidden(path,
		"the probe always connects to the pod's IP and may reach nothing else; remove host")}
}

// ppmHTTPSchemes are the httpGet schemes the node agent supports.
var ppmHTTPSchemes = []string{string(corev1.URISchemeHTTP), string(corev1.URISchemeHTTPS)}

// ppmValidateHTTPGet checks an httpGet handler. Unlike in a pod, scheme has
// no default here.
func ppmValidateHTTPGet(h *corev1.HTTPGetAction, path *field.Path) field.ErrorList {
	errs := ppmValidateHost(h.Host, path.Child("host"))
	if h.Path == "" {
		errs = append(errs, field.Required(path.Child("path"), "set the URL path to GET, for example /healthz"))
	} else if _, err := url.Parse(h.Path); err != nil {
		errs = append(errs, field.Invalid(path.Child("path"), h.Path, fmt.Sprintf(
			"is not a valid URL path (%v); escape '%%' as %%25 and other special characters likewise", ppmURLError(err))))
	}
	errs = append(errs, ppmValidatePort(h.Port, path.Child("port"))...)
	switch {
	case h.Scheme == "":
		errs = append(errs, field.Required(path.Child("scheme"), "set scheme: HTTP or HTTPS (no default is applied)"))
	case !slices.Contains(ppmHTTPSchemes, string(h.Scheme)):
		errs = append(errs, field.NotSupported(path.Child("scheme"), h.Scheme, ppmHTTPSchemes))
	}
	for k, header := range h.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(header.Name) {
			errs = append(errs, field.Invalid(path.Child("httpHeaders").Index(k).Child("name"), header.Name,
				msg+"; use a header name such as X-Probe"))
		}
	}
	return errs
}

// ppmURLError drops the "parse <url>: " prefix of a url.Parse error.
func ppmURLError(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// ppmValidatePort checks a tcpSocket or httpGet port: a number from 1 to
// 65535, or the name of a port of the container (an IANA_SVC_NAME), which
// the controller resolves from the pod's spec.
func ppmValidatePort(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(path, port.IntValue(), msg+"; or use the name of a port of the container"))
		}
	case intstr.String:
		hint := "; use a port number from 1 to 65535 or the name of a port of the container, such as http"
		if port.StrVal != "" && strings.Trim(port.StrVal, "0123456789") == "" {
			hint = fmt.Sprintf("; a port number is written without quotes: port: %s", port.StrVal)
		}
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(path, port.StrVal, msg+hint))
		}
	default:
		errs = append(errs, field.Invalid(path, port, "must be a port number from 1 to 65535 or the name of a port of the container"))
	}
	return errs
}

// ppmValidateMarkerPolicy checks the markerPolicy entries of a probe.
func ppmValidateMarkerPolicy(policies []v1alpha1.ProbeMarkerPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	states := map[v1alpha1.ProbeState]int{}
	for j := range policies {
		mp := &policies[j]
		p := path.Index(j)
		switch mp.State {
		case v1alpha1.ProbeSucceeded, v1alpha1.ProbeFailed:
			if first, ok := states[mp.State]; ok {
				e := field.Duplicate(p.Child("state"), mp.State)
				e.Detail = fmt.Sprintf("%s has an entry for this state already; merge the two entries' labels and annotations into one",
					path.Index(first))
				errs = append(errs, e)
			}
			states[mp.State] = j
		default:
			errs = append(errs, field.NotSupported(p.Child("state"), mp.State,
				[]string{string(v1alpha1.ProbeSucceeded), string(v1alpha1.ProbeFailed)}))
		}
		if len(mp.Labels) == 0 && len(mp.Annotations) == 0 {
			errs = append(errs, field.Required(p, fmt.Sprintf(
				"set labels, annotations or both, to put on the pod while the probe is %s", cmp.Or(string(mp.State), "in this state"))))
			continue
		}
		errs = append(errs, metav1validation.ValidateLabels(mp.Labels, p.Child("labels"))...)
		errs = append(errs, apivalidation.ValidateAnnotations(mp.Annotations, p.Child("annotations"))...)
	}
	return errs
}
