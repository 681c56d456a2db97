package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shoal-io/shoal/coordinator/podprobemarker/probeview"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// maxProbeMessage is how many characters of a probe's message the pods
// table shows; longer ones are cut and marked truncatedMark.
const maxProbeMessage = 60

// truncatedMark ends a message cut to maxProbeMessage characters.
const truncatedMark = "... (truncated)"

// probeMarkerOptions are the flags of `kubectl kruise get podprobemarker`.
type probeMarkerOptions struct {
	namespace            string
	pods                 bool
	coordinatorNamespace string
	coordinatorService   string
}

// newGetPodProbeMarkerCommand returns `kubectl kruise get podprobemarker`.
func newGetPodProbeMarkerCommand(g *globalOptions) *cobra.Command {
	var o probeMarkerOptions
	cmd := &cobra.Command{
		Use:     "podprobemarker [NAME] [--pods]",
		Aliases: []string{"podprobemarkers"},
		Short:   "Show PodProbeMarkers and, with --pods, each pod's probe states",
		Long: "Without NAME, list the PodProbeMarkers of the namespace. With NAME, show the marker's\n" +
			"probes: container, handler, the pod condition and the labels and annotations they set.\n" +
			"With --pods, also show each pod the marker probes, with each probe's state and last\n" +
			"message as the node agents last reported them to the coordinator leader, read through\n" +
			"the apiserver's service proxy (which needs get on services/proxy in the coordinator's\n" +
			"namespace). Messages longer than 60 characters are cut and marked \"(truncated)\".",
		Example: "  kubectl kruise get podprobemarker -n games\n" +
			"  kubectl kruise get podprobemarker game-server-probe -n games --pods",
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usageError{fmt.Errorf("%q takes at most one name, got %d arguments", cmd.CommandPath(), len(args))}
			case len(args) == 0 && o.pods:
				return usageError{errors.New("--pods needs a PodProbeMarker name: kubectl kruise get podprobemarker NAME --pods")}
			}
			shoal, kube, ns, err := g.env.clients(g)
			if err != nil {
				return err
			}
			if o.namespace != "" {
				ns = o.namespace
			}
			if len(args) == 0 {
				return listPodProbeMarkers(cmd.Context(), g, shoal, ns, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return showPodProbeMarker(cmd.Context(), g, o, shoal, kube, ns, args[0], cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "the marker's namespace (default: the kubeconfig context's)")
	f.BoolVar(&o.pods, "pods", false, "also show each pod's probe states, from the coordinator leader")
	f.StringVar(&o.coordinatorNamespace, "coordinator-namespace", defaultCoordinatorNamespace, "the namespace of the coordinator's Service")
	f.StringVar(&o.coordinatorService, "coordinator-service", defaultCoordinatorService, "the coordinator's Service (it selects the leader)")
	return cmd
}

// listPodProbeMarkers prints the namespace's markers.
func listPodProbeMarkers(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, ns string, out, errOut io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout)
	defer cancel()
	list, err := shoal.AppsV1alpha1().PodProbeMarkers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list PodProbeMarkers in namespace %s: %w", ns, err)
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintf(errOut, "No PodProbeMarkers found in namespace %s.\n", ns)
		return err
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.PodProbeMarker) int { return strings.Compare(a.Name, b.Name) })
	now := g.env.now()
	_, err = io.WriteString(out, table(func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tPROBES\tMATCHED\tAGE")
		for i := range list.Items {
			m := &list.Items[i]
			fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", m.Name, len(m.Spec.Probes), m.Status.MatchedPods, age(m.CreationTimestamp, now))
		}
	}))
	return err
}

// showPodProbeMarker prints one marker's probes and, with --pods, its
// pods as the coordinator sees them. When the coordinator cannot be read,
// the marker is printed and the error says why the pods are missing.
func showPodProbeMarker(ctx context.Context, g *globalOptions, o probeMarkerOptions, shoal shoalclient.Interface, kube kubernetes.Interface, ns, name string, out io.Writer) error {
	m, err := getPodProbeMarker(ctx, g, shoal, ns, name)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(out, probeMarkerView(m)); err != nil {
		return err
	}
	if !o.pods {
		return nil
	}
	view, err := fetchMarkerPods(ctx, g, o, kube, ns, name)
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, "\n"+markerPodsTable(m, view, g.env.now()))
	return err
}

// getPodProbeMarker reads one PodProbeMarker.
func getPodProbeMarker(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, ns, name string) (*v1alpha1.PodProbeMarker, error) {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout)
	defer cancel()
	m, err := shoal.AppsV1alpha1().PodProbeMarkers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get PodProbeMarker %s/%s: %w", ns, name, err)
	}
	return m, nil
}

// fetchMarkerPods reads a marker's per-pod view from the coordinator
// leader through the apiserver's service proxy.
func fetchMarkerPods(ctx context.Context, g *globalOptions, o probeMarkerOptions, kube kubernetes.Interface, ns, name string) (*probeview.MarkerPods, error) {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout)
	defer cancel()
	raw, err := g.env.proxyGet(ctx, kube, o.coordinatorNamespace, o.coordinatorService, coordinatorPort, probeview.PodsPathPrefix+ns+"/"+name)
	if err != nil {
		return nil, markerPodsError(err, o, ns, name)
	}
	var view probeview.MarkerPods
	if err := json.Unmarshal(raw, &view); err != nil {
		return nil, fmt.Errorf("pods of PodProbeMarker %s/%s: decode the coordinator's view: %w", ns, name, err)
	}
	return &view, nil
}

// markerPodsError explains a failed read of a marker's per-pod view
// (coordinatorViewError), naming the marker.
func markerPodsError(err error, o probeMarkerOptions, ns, name string) error {
	what := fmt.Sprintf("pods of PodProbeMarker %s/%s", ns, name)
	return fmt.Errorf("%s: %w", what, coordinatorViewError(err, o.coordinatorNamespace, o.coordinatorService,
		"the coordinator does not know the marker yet (it has not seen it, or it was just deleted); try again", ""))
}

// probeMarkerView renders a marker: a header line, then a row per probe.
func probeMarkerView(m *v1alpha1.PodProbeMarker) string {
	sel := "<none>"
	if m.Spec.Selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(m.Spec.Selector); err == nil {
			sel = s.String()
		} else {
			sel = "<invalid>"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "PodProbeMarker %s/%s: selector %s, %d matched pods (observed generation %d of %d)\n",
		m.Namespace, m.Name, sel, m.Status.MatchedPods, m.Status.ObservedGeneration, m.Generation)
	b.WriteString(table(func(w io.Writer) {
		fmt.Fprintln(w, "PROBE\tCONTAINER\tHANDLER\tCONDITION\tMARKERS")
		for _, p := range m.Spec.Probes {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.ContainerName, probeHandler(&p.Probe.Probe), orNone(p.PodConditionType), markerPolicies(p.MarkerPolicy))
		}
	}))
	return b.String()
}

// probeHandler summarises what a probe runs: "exec: /home/game/idle.sh",
// "tcp :8080", "http GET :8080/healthz", "grpc :9090".
func probeHandler(p *corev1.Probe) string {
	h := &p.ProbeHandler
	switch {
	case h.Exec != nil:
		args := make([]string, 0, len(h.Exec.Command))
		for _, a := range h.Exec.Command {
			if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
				a = strconv.Quote(a)
			}
			args = append(args, a)
		}
		return "exec: " + strings.Join(args, " ")
	case h.TCPSocket != nil:
		return "tcp " + h.TCPSocket.Host + ":" + h.TCPSocket.Port.String()
	case h.HTTPGet != nil:
		scheme := "http"
		if h.HTTPGet.Scheme != "" {
			scheme = strings.ToLower(string(h.HTTPGet.Scheme))
		}
		return scheme + " GET " + h.HTTPGet.Host + ":" + h.HTTPGet.Port.String() + h.HTTPGet.Path
	case h.GRPC != nil:
		s := "grpc :" + strconv.Itoa(int(h.GRPC.Port))
		if h.GRPC.Service != nil && *h.GRPC.Service != "" {
			s += " service " + *h.GRPC.Service
		}
		return s
	}
	return "<none>"
}

// markerPolicies summarises a probe's marker policy, one entry per state
// in spec order: "Succeeded: label idle=true, annotation cost=-10;
// Failed: label idle=false".
func markerPolicies(policies []v1alpha1.ProbeMarkerPolicy) string {
	parts := make([]string, 0, len(policies))
	for _, p := range policies {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
			kv = append(kv, "label "+k+"="+p.Labels[k])
		}
		for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
			kv = append(kv, "annotation "+k+"="+p.Annotations[k])
		}
		parts = append(parts, string(p.State)+": "+strings.Join(kv, ", "))
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, "; ")
}

// markerPodsTable renders a marker's per-pod view: a row per pod with its
// node, each probe's state, when a probe last ran on it, and each probe's
// last message. The probes are the marker's, in spec order; with more
// than one, their columns are named after them, e.g. STATE(idle).
func markerPodsTable(m *v1alpha1.PodProbeMarker, view *probeview.MarkerPods, now time.Time) string {
	if len(view.Pods) == 0 {
		return fmt.Sprintf("No pods: PodProbeMarker %s/%s selects no scheduled, initialized pods.\n", m.Namespace, m.Name)
	}
	names := make([]string, 0, len(m.Spec.Probes))
	for _, p := range m.Spec.Probes {
		names = append(names, p.Name)
	}
	column := func(title, probe string) string {
		if len(names) == 1 {
			return title
		}
		return title + "(" + probe + ")"
	}
	return table(func(w io.Writer) {
		header := []string{"POD", "NODE"}
		for _, n := range names {
			header = append(header, column("STATE", n))
		}
		header = append(header, "LAST-PROBE")
		for _, n := range names {
			header = append(header, column("MESSAGE", n))
		}
		fmt.Fprintln(w, strings.Join(header, "\t"))
		for _, pod := range view.Pods {
			byName := make(map[string]probeview.ProbeState, len(pod.Probes))
			var last time.Time
			for _, s := range pod.Probes {
				byName[s.Name] = s
				if s.LastProbeTime.After(last) {
					last = s.LastProbeTime
				}
			}
			row := []string{pod.Name, orNone(pod.Node)}
			for _, n := range names {
				state := "-" // not in the view: the marker changed between the two reads
				if s, ok := byName[n]; ok {
					state = s.State
				}
				row = append(row, state)
			}
			lastProbe := "-"
			if !last.IsZero() {
				lastProbe = age(metav1.NewTime(last), now)
			}
			row = append(row, lastProbe)
			for i, n := range names {
				msg := probeMessage(byName[n].Message)
				if msg == "" && i < len(names)-1 {
					msg = "-"
				}
				row = append(row, msg)
			}
			fmt.Fprintln(w, strings.Join(row, "\t"))
		}
	})
}

// probeMessage is a probe's message on one line, cut to maxProbeMessage
// characters and marked truncatedMark when longer.
func probeMessage(s string) string {
	s = oneLine(s)
	r := []rune(s)
	if len(r) <= maxProbeMessage {
		return s
	}
	return strings.TrimRight(string(r[:maxProbeMessage]), " ") + truncatedMark
}
