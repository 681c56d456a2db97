package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// ppmSeedGameServerProbe is seed 000's game-server-probe manifest (the
// OpenKruise 1.3 release notes), word for word; the seed text lost its
// indentation, which is restored here. Its probe.exec is a string, which
// the API (OpenKruise's included) does not accept: exec is an object with a
// command list. ppmSeedGameServerProbeFixed changes that one line only.
const ppmSeedGameServerProbe = `apiVersion: apps.kruise.io/v1alpha1
kind: PodProbeMarker
metadata:
  name: game-server-probe
  namespace: ns
spec:
  selector:
    matchLabels:
      app: game-server
  probes:
  - name: Idle
    containerName: game-server
    probe:
      exec: /home/game/idle.sh
      initialDelaySeconds: 10
      timeoutSeconds: 3
      periodSeconds: 10
      successThreshold: 1
      failureThreshold: 3
    markerPolicy:
    - state: Succeeded
      labels:
        gameserver-idle: 'true'
      annotations:
        controller.kubernetes.io/pod-deletion-cost: '-10'
    - state: Failed
      labels:
        gameserver-idle: 'false'
      annotations:
        controller.kubernetes.io/pod-deletion-cost: '10'
    podConditionType: game.io/idle
`

// ppmSeedExecLine is the seed's exec line, and ppmSeedExecFixed what
// replaces it.
const (
	ppmSeedExecLine  = "      exec: /home/game/idle.sh\n"
	ppmSeedExecFixed = "      exec:\n        command: [/home/game/idle.sh]\n"
)

// ppmSeedGameServerProbeFixed decodes the seed manifest with its exec as a
// command.
func ppmSeedGameServerProbeFixed(t *testing.T) *v1alpha1.PodProbeMarker {
	t.Helper()
	require.Equal(t, 1, strings.Count(ppmSeedGameServerProbe, ppmSeedExecLine))
	ppm := &v1alpha1.PodProbeMarker{}
	require.NoError(t, yaml.Unmarshal([]byte(strings.Replace(ppmSeedGameServerProbe, ppmSeedExecLine, ppmSeedExecFixed, 1)), ppm))
	return ppm
}

// ppmTestMarker is a valid PodProbeMarker, OpenKruise's test demo.
func ppmTestMarker() *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "PodProbeMarker"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ppm-test"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "test"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name:          "healthy",
				ContainerName: "main",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "/healthy.sh"}}},
				}},
				PodConditionType: "game.kruise.io/healthy",
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
					{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"server-healthy": "true"},
						Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "10"}},
					{State: v1alpha1.ProbeFailed, Labels: map[string]string{"server-healthy": "false"},
						Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-10"}},
				},
			}},
		},
	}
}

// ppmRequest builds the admission request for ppm, an UPDATE from old when
// old is set.
func ppmRequest(t *testing.T, ppm, old *v1alpha1.PodProbeMarker) *admissionv1.AdmissionRequest {
	t.Helper()
	req := &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: ppm.Namespace, Name: ppm.Name,
		Kind: metav1.GroupVersionKind{Group: "apps.kruise.io", Version: "v1alpha1", Kind: "PodProbeMarker"}}
	raw, err := json.Marshal(ppm)
	require.NoError(t, err)
	req.Object.Raw = raw
	if old != nil {
		req.Operation = admissionv1.Update
		raw, err := json.Marshal(old)
		require.NoError(t, err)
		req.OldObject.Raw = raw
	}
	return req
}

// ppmCase is one case of the validation tables: change applies to
// ppmTestMarker; an UPDATE from ppmTestMarker when update is set.
type ppmCase struct {
	name   string
	update bool
	change func(*v1alpha1.PodProbeMarker)
	want   []string // parts of the denial message
}

func (tc ppmCase) run(t *testing.T) *admissionv1.AdmissionResponse {
	t.Helper()
	ppm := ppmTestMarker()
	if tc.change != nil {
		tc.change(ppm)
	}
	var old *v1alpha1.PodProbeMarker
	if tc.update {
		old = ppmTestMarker()
	}
	return ValidatePodProbeMarker(t.Context(), ppmRequest(t, ppm, old))
}

func TestValidatePodProbeMarkerBadInput(t *testing.T) {
	probe := func(f func(*v1alpha1.PodContainerProbe)) func(*v1alpha1.PodProbeMarker) {
		return func(m *v1alpha1.PodProbeMarker) { f(&m.Spec.Probes[0]) }
	}
	handler := func(h corev1.ProbeHandler) func(*v1alpha1.PodProbeMarker) {
		return probe(func(p *v1alpha1.PodContainerProbe) { p.Probe.ProbeHandler = h })
	}
	tcp := func(port intstr.IntOrString) func(*v1alpha1.PodProbeMarker) {
		return handler(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}})
	}
	httpGet := func(f func(*corev1.HTTPGetAction)) func(*v1alpha1.PodProbeMarker) {
		h := &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}
		f(h)
		return handler(corev1.ProbeHandler{HTTPGet: h})
	}
	policy := func(f func(*v1alpha1.ProbeMarkerPolicy)) func(*v1alpha1.PodProbeMarker) {
		return probe(func(p *v1alpha1.PodContainerProbe) { f(&p.MarkerPolicy[0]) })
	}
	second := func(f func(*v1alpha1.PodContainerProbe)) func(*v1alpha1.PodProbeMarker) {
		return func(m *v1alpha1.PodProbeMarker) {
			p := *m.Spec.Probes[0].DeepCopy()
			p.Name, p.PodConditionType = "other", "game.kruise.io/other"
			f(&p)
			m.Spec.Probes = append(m.Spec.Probes, p)
		}
	}

	cases := []ppmCase{
		// spec.selector
		{name: "no selector", change: func(m *v1alpha1.PodProbeMarker) { m.Spec.Selector = nil },
			want: []string{"spec.selector: Required value: a PodProbeMarker needs a selector for the pods to probe; set matchLabels"}},
		{name: "empty selector", change: func(m *v1alpha1.PodProbeMarker) { m.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{`spec.selector: Invalid value: "{}": an empty selector would probe every pod of the namespace; add matchLabels or matchExpressions`}},
		{name: "selector with a bad operator", change: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals", Values: []string{"a"}}}}
		}, want: []string{`spec.selector.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator; use In, NotIn, Exists or DoesNotExist`}},
		{name: "selector In without values", change: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}
		}, want: []string{"spec.selector.matchExpressions[0].values: Required value"}},
		{name: "selector with a bad label value", change: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "not ok!"}}
		}, want: []string{`spec.selector.matchLabels: Invalid value: "not ok!"`}},
		{name: "UPDATE: selector changed", update: true, change: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector.MatchLabels["app"] = "other"
		}, want: []string{`spec.selector: Forbidden: cannot be changed after creation; set it back to {"matchLabels":{"app":"test"}}, or delete the PodProbeMarker and create a new one`}},
		{name: "UPDATE: selector removed", update: true, change: func(m *v1alpha1.PodProbeMarker) { m.Spec.Selector = nil },
			want: []string{"spec.selector: Forbidden: cannot be changed after creation", "spec.selector: Required value"}},

		// spec.probes
		{name: "no probes", change: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes = nil },
			want: []string{"spec.probes: Required value: add at least one probe"}},
		{name: "probe without name", change: probe(func(p *v1alpha1.PodContainerProbe) { p.Name = "" }),
			want: []string{"spec.probes[0].name: Required value: name the probe"}},
		{name: "probe name with '#'", change: probe(func(p *v1alpha1.PodContainerProbe) { p.Name = "idle#1" }),
			want: []string{`spec.probes[0].name: Invalid value: "idle#1": must not contain '#'`, `rename it, for example to "idle-1"`}},
		{name: "probe name used twice", change: second(func(p *v1alpha1.PodContainerProbe) { p.Name = "healthy" }),
			want: []string{`spec.probes[1].name: Duplicate value: "healthy": spec.probes[0] has this name already`, "rename one of them"}},
		{name: "probe without containerName", change: probe(func(p *v1alpha1.PodContainerProbe) { p.ContainerName = "" }),
			want: []string{"spec.probes[0].containerName: Required value: set the name of the container to probe"}},

		// spec.probes[].probe handlers
		{name: "no handler", change: handler(corev1.ProbeHandler{}),
			want: []string{"spec.probes[0].probe: Required value: set exactly one of exec, tcpSocket or httpGet"}},
		{name: "two handlers", change: handler(corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"true"}}, TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)},
		}), want: []string{"spec.probes[0].probe: Forbidden: has exec and tcpSocket, but a probe runs exactly one handler; keep one and move the others to probes of their own"}},
		{name: "three handlers", change: handler(corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"true"}}, TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)},
			HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP},
		}), want: []string{"spec.probes[0].probe: Forbidden: has exec and tcpSocket and httpGet"}},
		{name: "grpc", change: handler(corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}),
			want: []string{"spec.probes[0].probe.grpc: Forbidden: gRPC probes are not supported by PodProbeMarker; use exec with a gRPC health client"}},
		{name: "grpc next to exec", change: handler(corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"true"}}, GRPC: &corev1.GRPCAction{Port: 9090},
		}), want: []string{"spec.probes[0].probe.grpc: Forbidden: gRPC probes are not supported"}},
		{name: "exec without command", change: handler(corev1.ProbeHandler{Exec: &corev1.ExecAction{}}),
			want: []string{"spec.probes[0].probe.exec.command: Required value: set the command to run in the container"}},
		{name: "tcpSocket host", change: handler(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80), Host: "127.0.0.1"}}),
			want: []string{"spec.probes[0].probe.tcpSocket.host: Forbidden: the probe always connects to the pod's IP and may reach nothing else; remove host"}},
		{name: "tcpSocket port 0", change: tcp(intstr.FromInt32(0)),
			want: []string{"spec.probes[0].probe.tcpSocket.port: Invalid value: 0: must be between 1 and 65535, inclusive; or use the name of a port of the container"}},
		{name: "tcpSocket port -1", change: tcp(intstr.FromInt32(-1)),
			want: []string{"spec.probes[0].probe.tcpSocket.port: Invalid value: -1"}},
		{name: "tcpSocket port name too long", change: tcp(intstr.FromString("aaaaabbbbbcccccd")),
			want: []string{`spec.probes[0].probe.tcpSocket.port: Invalid value: "aaaaabbbbbcccccd": must be no more than 15 characters`, "or the name of a port of the container"}},
		{name: "tcpSocket empty port name", change: tcp(intstr.FromString("")),
			want: []string{`spec.probes[0].probe.tcpSocket.port: Invalid value: ""`}},
		{name: "tcpSocket port number in quotes", change: tcp(intstr.FromString("8080")),
			want: []string{`spec.probes[0].probe.tcpSocket.port: Invalid value: "8080": must contain at least one letter`, "a port number is written without quotes: port: 8080"}},
		{name: "httpGet host", change: httpGet(func(h *corev1.HTTPGetAction) { h.Host = "169.254.169.254" }),
			want: []string{"spec.probes[0].probe.httpGet.host: Forbidden: the probe always connects to the pod's IP"}},
		{name: "httpGet without path", change: httpGet(func(h *corev1.HTTPGetAction) { h.Path = "" }),
			want: []string{"spec.probes[0].probe.httpGet.path: Required value: set the URL path to GET, for example /healthz"}},
		{name: "httpGet path that does not parse", change: httpGet(func(h *corev1.HTTPGetAction) { h.Path = "path%notvalid" }),
			want: []string{`spec.probes[0].probe.httpGet.path: Invalid value: "path%notvalid": is not a valid URL path (invalid URL escape "%no")`}},
		{name: "httpGet without scheme", change: httpGet(func(h *corev1.HTTPGetAction) { h.Scheme = "" }),
			want: []string{"spec.probes[0].probe.httpGet.scheme: Required value: set scheme: HTTP or HTTPS"}},
		{name: "httpGet scheme FTP", change: httpGet(func(h *corev1.HTTPGetAction) { h.Scheme = "FTP" }),
			want: []string{`spec.probes[0].probe.httpGet.scheme: Unsupported value: "FTP": supported values: "HTTP", "HTTPS"`}},
		{name: "httpGet lowercase scheme", change: httpGet(func(h *corev1.HTTPGetAction) { h.Scheme = "http" }),
			want: []string{`spec.probes[0].probe.httpGet.scheme: Unsupported value: "http"`}},
		{name: "httpGet bad header name", change: httpGet(func(h *corev1.HTTPGetAction) {
			h.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-Ok", Value: "1"}, {Name: "Invalid Header:Name", Value: "v"}}
		}), want: []string{`spec.probes[0].probe.httpGet.httpHeaders[1].name: Invalid value: "Invalid Header:Name"`, "use a header name such as X-Probe"}},
		{name: "httpGet port 65536", change: httpGet(func(h *corev1.HTTPGetAction) { h.Port = intstr.FromInt32(65536) }),
			want: []string{"spec.probes[0].probe.httpGet.port: Invalid value: 65536: must be between 1 and 65535"}},
		{name: "httpGet bad port name", change: httpGet(func(h *corev1.HTTPGetAction) { h.Port = intstr.FromString("web_port") }),
			want: []string{`spec.probes[0].probe.httpGet.port: Invalid value: "web_port"`}},
		{name: "several httpGet problems, one line each", change: httpGet(func(h *corev1.HTTPGetAction) {
			h.Path, h.Port, h.Scheme = "", intstr.FromInt32(99999), "FTP"
		}), want: []string{": spec.probes[0].probe.httpGet.path: Required value", "\nspec.probes[0].probe.httpGet.port: Invalid value: 99999", "\nspec.probes[0].probe.httpGet.scheme: Unsupported value"}},

		// spec.probes[].probe timing
		{name: "negative initialDelaySeconds", change: probe(func(p *v1alpha1.PodContainerProbe) { p.Probe.InitialDelaySeconds = -1 }),
			want: []string{"spec.probes[0].probe.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0; leave it unset (taken as 1) or set a positive number"}},
		{name: "negative timeoutSeconds", change: probe(func(p *v1alpha1.PodContainerProbe) { p.Probe.TimeoutSeconds = -1 }),
			want: []string{"spec.probes[0].probe.timeoutSeconds: Invalid value: -1"}},
		{name: "negative periodSeconds", change: probe(func(p *v1alpha1.PodContainerProbe) { p.Probe.PeriodSeconds = -10 }),
			want: []string{"spec.probes[0].probe.periodSeconds: Invalid value: -10"}},
		{name: "negative successThreshold", change: probe(func(p *v1alpha1.PodContainerProbe) { p.Probe.SuccessThreshold = -1 }),
			want: []string{"spec.probes[0].probe.successThreshold: Invalid value: -1"}},
		{name: "negative failureThreshold", change: probe(func(p *v1alpha1.PodContainerProbe) { p.Probe.FailureThreshold = -3 }),
			want: []string{"spec.probes[0].probe.failureThreshold: Invalid value: -3"}},

		// spec.probes[].podConditionType
		{name: "neither podConditionType nor markerPolicy", change: probe(func(p *v1alpha1.PodContainerProbe) {
			p.PodConditionType, p.MarkerPolicy = "", nil
		}), want: []string{"spec.probes[0]: Required value: set podConditionType (a pod condition records the result), markerPolicy"}},
		{name: "podConditionType not a qualified name", change: probe(func(p *v1alpha1.PodContainerProbe) { p.PodConditionType = "#5invalid" }),
			want: []string{`spec.probes[0].podConditionType: Invalid value: "#5invalid": name part must consist of alphanumeric characters`, `use a qualified name such as "game.example.com/idle"`}},
		{name: "podConditionType with a bad prefix", change: probe(func(p *v1alpha1.PodContainerProbe) { p.PodConditionType = "Game_IO/idle" }),
			want: []string{`spec.probes[0].podConditionType: Invalid value: "Game_IO/idle": prefix part`}},
		{name: "podConditionType used twice", change: second(func(p *v1alpha1.PodContainerProbe) { p.PodConditionType = "game.kruise.io/healthy" }),
			want: []string{`spec.probes[1].podConditionType: Duplicate value: "game.kruise.io/healthy": spec.probes[0] writes this pod condition already`}},
		{name: "podConditionType Ready", change: probe(func(p *v1alpha1.PodContainerProbe) { p.PodConditionType = "Ready" }),
			want: []string{`spec.probes[0].podConditionType: Invalid value: "Ready": is a built-in pod condition that Kubernetes or Shoal writes; use a condition of your own, for example "game.example.com/ready"`}},

		// spec.probes[].markerPolicy
		{name: "markerPolicy state Unknown", change: policy(func(mp *v1alpha1.ProbeMarkerPolicy) { mp.State = v1alpha1.ProbeUnknown }),
			want: []string{`spec.probes[0].markerPolicy[0].state: Unsupported value: "Unknown": supported values: "Succeeded", "Failed"`}},
		{name: "markerPolicy without state", change: policy(func(mp *v1alpha1.ProbeMarkerPolicy) { mp.State = "" }),
			want: []string{`spec.probes[0].markerPolicy[0].state: Unsupported value: ""`}},
		{name: "markerPolicy state twice", change: probe(func(p *v1alpha1.PodContainerProbe) { p.MarkerPolicy[1].State = v1alpha1.ProbeSucceeded }),
			want: []string{`spec.probes[0].markerPolicy[1].state: Duplicate value: "Succeeded": spec.probes[0].markerPolicy[0] has an entry for this state already; merge`}},
		{name: "markerPolicy without labels and annotations", change: policy(func(mp *v1alpha1.ProbeMarkerPolicy) {
			mp.Labels, mp.Annotations = nil, map[string]string{}
		}), want: []string{"spec.probes[0].markerPolicy[0]: Required value: set labels, annotations or both, to put on the pod while the probe is Succeeded"}},
		{name: "markerPolicy bad label key", change: policy(func(mp *v1alpha1.ProbeMarkerPolicy) { mp.Labels = map[string]string{"server-/$healthy": "true"} }),
			want: []string{`spec.probes[0].markerPolicy[0].labels: Invalid value: "server-/$healthy"`}},
		{name: "markerPolicy bad label value", change: policy(func(mp *v1alpha1.ProbeMarkerPolicy) { mp.Labels = map[string]string{"idle": "yes please"} }),
			want: []string{`spec.probes[0].markerPolicy[0].labels: Invalid value: "yes please"`}},
		{name: "markerPolicy label value too long", change: policy(func(mp *v1alpha1.ProbeMarkerPolicy) {
			mp.Labels = map[string]string{"idle": strings.Repeat("a", 64)}
		}), want: []string{"spec.probes[0].markerPolicy[0].labels: Invalid value:", "must be no more than 63 bytes"}},
		{name: "markerPolicy bad annotation key", change: policy(func(mp *v1alpha1.ProbeMarkerPolicy) { mp.Annotations = map[string]string{"bad key": "1"} }),
			want: []string{`spec.probes[0].markerPolicy[0].annotations: Invalid value: "bad key"`}},

		{name: "problems in two probes, one line each", change: func(m *v1alpha1.PodProbeMarker) {
			second(func(p *v1alpha1.PodContainerProbe) { p.ContainerName = "" })(m)
			m.Spec.Probes[0].Probe.Exec.Command = nil
		}, want: []string{"spec.probes[0].probe.exec.command: Required value", "\nspec.probes[1].containerName: Required value"}},
		{name: "UPDATE: the create rules apply too", update: true, change: handler(corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}),
			want: []string{"spec.probes[0].probe.grpc: Forbidden"}},
	}
	for _, name := range ppmBuiltinConditions {
		cases = append(cases, ppmCase{name: "probe named " + name, change: probe(func(p *v1alpha1.PodContainerProbe) { p.Name = name }),
			want: []string{`spec.probes[0].name: Invalid value: "` + name + `": must not be a built-in pod condition (PodScheduled, Initialized, Ready, ContainersReady, KruisePodReady, InPlaceUpdateReady); choose another name`}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.run(t)
			require.False(t, resp.Allowed, "expected a denial")
			require.NotNil(t, resp.Result)
			require.EqualValues(t, 422, resp.Result.Code)
			require.Contains(t, resp.Result.Message, `PodProbeMarker "ppm-test" is invalid: `)
			for _, part := range tc.want {
				require.Contains(t, resp.Result.Message, part)
			}
		})
	}
}

func TestValidatePodProbeMarkerAllowed(t *testing.T) {
	probe := func(f func(*v1alpha1.PodContainerProbe)) func(*v1alpha1.PodProbeMarker) {
		return func(m *v1alpha1.PodProbeMarker) { f(&m.Spec.Probes[0]) }
	}
	for _, tc := range []ppmCase{
		{name: "OpenKruise's demo"},
		{name: "seed 000 game-server-probe (exec as a command)", change: func(m *v1alpha1.PodProbeMarker) { *m = *ppmSeedGameServerProbeFixed(t) }},
		{name: "tcpSocket on a named port, markerPolicy only", change: probe(func(p *v1alpha1.PodContainerProbe) {
			p.Probe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("game")}}
			p.PodConditionType = ""
		})},
		{name: "httpGet HTTPS with headers and a query, podConditionType only", change: probe(func(p *v1alpha1.PodContainerProbe) {
			p.Probe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/index.html?probe=1", Port: intstr.FromInt32(443),
				Scheme: corev1.URISchemeHTTPS, HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "kruise"}, {Name: "Host", Value: "game.local"}}}}
			p.MarkerPolicy = nil
		})},
		{name: "timing all zero (taken as 1) and a one-entry markerPolicy", change: probe(func(p *v1alpha1.PodContainerProbe) {
			p.Probe.InitialDelaySeconds, p.Probe.PeriodSeconds = 0, 0
			p.MarkerPolicy = p.MarkerPolicy[:1]
		})},
		{name: "matchExpressions selector and several probes", change: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}
			p := *m.Spec.Probes[0].DeepCopy()
			p.Name, p.ContainerName, p.PodConditionType = "main-secondary", "sidecar", "example.com/role"
			m.Spec.Probes = append(m.Spec.Probes, p)
		}},
		{name: "UPDATE: probes changed", update: true, change: probe(func(p *v1alpha1.PodContainerProbe) {
			p.Probe.PeriodSeconds = 30
			p.MarkerPolicy = nil
		})},
		{name: "UPDATE: an equivalent selector", update: true, change: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.run(t)
			require.True(t, resp.Allowed, "%v", resp.Result)
		})
	}

	t.Run("UPDATE of metadata only, under a spec admitted by older rules", func(t *testing.T) {
		old := ppmTestMarker()
		old.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80), Host: "10.0.0.1"}}
		ppm := old.DeepCopy()
		ppm.Finalizers = nil
		old.Finalizers = []string{"kruise.io/node-pod-probe-cleanup"}
		require.True(t, ValidatePodProbeMarker(t.Context(), ppmRequest(t, ppm, old)).Allowed)

		ppm.Spec.Probes[0].Probe.PeriodSeconds = 5 // a spec change brings the rules back
		resp := ValidatePodProbeMarker(t.Context(), ppmRequest(t, ppm, old))
		require.False(t, resp.Allowed)
		require.Contains(t, resp.Result.Message, "spec.probes[0].probe.tcpSocket.host: Forbidden")
	})

	t.Run("status updates and deletes are not checked", func(t *testing.T) {
		resp := ValidatePodProbeMarker(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Update, SubResource: "status"})
		require.True(t, resp.Allowed)
		resp = ValidatePodProbeMarker(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Delete})
		require.True(t, resp.Allowed)
	})
}

// TestValidatePodProbeMarkerSeedVerbatim shows why the seed's manifest is
// tested with one line changed: its exec is a string, which does not decode
// into the API (the apiserver's schema refuses it before any webhook); if
// it reached the webhook, the webhook would answer 400.
func TestValidatePodProbeMarkerSeedVerbatim(t *testing.T) {
	err := yaml.Unmarshal([]byte(ppmSeedGameServerProbe), &v1alpha1.PodProbeMarker{})
	require.ErrorContains(t, err, "exec")

	raw, err := yaml.YAMLToJSON([]byte(ppmSeedGameServerProbe))
	require.NoError(t, err)
	resp := ValidatePodProbeMarker(t.Context(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}})
	require.False(t, resp.Allowed)
	require.EqualValues(t, 400, resp.Result.Code)
	require.Contains(t, resp.Result.Message, "could not decode the PodProbeMarker")

	ppm := ppmSeedGameServerProbeFixed(t)
	require.Equal(t, "game-server-probe", ppm.Name)
	require.Equal(t, []string{"/home/game/idle.sh"}, ppm.Spec.Probes[0].Probe.Exec.Command)
	require.Equal(t, "game.io/idle", ppm.Spec.Probes[0].PodConditionType)
	require.Len(t, ppm.Spec.Probes[0].MarkerPolicy, 2)
}
