package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	"github.com/shoal-io/shoal/coordinator/imagepull/pullview"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// Where the coordinator's per-node view is, by default.
const (
	defaultCoordinatorNamespace = "shoal-system"
	defaultCoordinatorService   = "shoal-coordinator"
	// coordinatorPort is the name of the Service port of the
	// coordinator's metrics server, which serves the per-node view.
	coordinatorPort = "http"
)

// newGetCommand returns `kubectl kruise get`.
func newGetCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show Kruise objects with what the coordinator knows about them",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	cmd.AddCommand(newGetImagePullJobCommand(g), newGetPodProbeMarkerCommand(g), newGetResourceDistributionCommand(g), newGetSidecarSetCommand(g))
	return cmd
}

// getOptions are the flags of `kubectl kruise get imagepulljob`.
type getOptions struct {
	namespace            string
	nodes, watch         bool
	coordinatorNamespace string
	coordinatorService   string
}

// newGetImagePullJobCommand returns `kubectl kruise get imagepulljob`.
func newGetImagePullJobCommand(g *globalOptions) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:     "imagepulljob [NAME] [--nodes] [-w]",
		Aliases: []string{"imagepulljobs"},
		Short:   "Show ImagePullJobs and, with --nodes, each node's pull",
		Long: "Show an ImagePullJob's progress (all jobs of the namespace without NAME). With --nodes,\n" +
			"also show each node's pull as the coordinator leader sees it: phase, round, attempts,\n" +
			"bytes, image ID and the last message, read through the apiserver's service proxy\n" +
			"(which needs get on services/proxy in the coordinator's namespace). With -w, read\n" +
			"again every 2s and print what changed, until the job completes or Ctrl-C.",
		Example: "  kubectl kruise get imagepulljob\n" +
			"  kubectl kruise get imagepulljob warm-nginx --nodes -w",
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usageError{fmt.Errorf("%q takes at most one job name, got %d arguments", cmd.CommandPath(), len(args))}
			case len(args) == 0 && (o.nodes || o.watch):
				return usageError{errors.New("--nodes and -w need a job name: kubectl kruise get imagepulljob NAME --nodes")}
			}
			shoal, kube, ns, err := g.env.clients(g)
			if err != nil {
				return err
			}
			if o.namespace != "" {
				ns = o.namespace
			}
			if len(args) == 0 {
				return listImagePullJobs(cmd.Context(), g, shoal, ns, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return getImagePullJob(cmd.Context(), g, o, shoal, kube, ns, args[0], cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "the job's namespace (default: the kubeconfig context's)")
	f.BoolVar(&o.nodes, "nodes", false, "also show each node's pull, from the coordinator leader")
	f.BoolVarP(&o.watch, "watch", "w", false, "read again every 2s and print changes until the job completes")
	f.StringVar(&o.coordinatorNamespace, "coordinator-namespace", defaultCoordinatorNamespace, "the namespace of the coordinator's Service")
	f.StringVar(&o.coordinatorService, "coordinator-service", defaultCoordinatorService, "the coordinator's Service (it selects the leader)")
	return cmd
}

// listImagePullJobs prints the namespace's jobs.
func listImagePullJobs(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, ns string, out, errOut io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout)
	defer cancel()
	list, err := shoal.AppsV1alpha1().ImagePullJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ImagePullJobs in namespace %s: %w", ns, err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(errOut, "No ImagePullJobs found in namespace %s.\n", ns)
		return nil
	}
	jobs := make([]*v1alpha1.ImagePullJob, 0, len(list.Items))
	for i := range list.Items {
		jobs = append(jobs, &list.Items[i])
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].Name < jobs[j].Name })
	_, err = io.WriteString(out, jobTable(jobs, g.env.now()))
	return err
}

// getImagePullJob prints one job, with --nodes its nodes, and with -w
// again whenever something changed.
func getImagePullJob(ctx context.Context, g *globalOptions, o getOptions, shoal shoalclient.Interface, kube kubernetes.Interface, ns, name string, out io.Writer) error {
	var lastState string
	for first := true; ; first = false {
		job, err := getJob(ctx, g, shoal, ns, name)
		switch {
		case err == nil:
		case !first && ctx.Err() != nil:
			return nil // Ctrl-C
		case !first && errors.Is(err, errJobGone):
			// For example deleted by its TTL right after it completed.
			_, err = fmt.Fprintf(out, "\nImagePullJob %s/%s is gone (deleted)\n", ns, name)
			return err
		default:
			return err
		}
		var nodes *pullview.JobNodes
		var nodesErr error
		if o.nodes {
			nodes, nodesErr = fetchNodes(ctx, g, o, kube, ns, name)
			if nodesErr != nil && ctx.Err() != nil && !first {
				return nil
			}
		}
		if !o.watch {
			if _, err := io.WriteString(out, jobTable([]*v1alpha1.ImagePullJob{job}, g.env.now())); err != nil {
				return err
			}
			if nodesErr != nil {
				return nodesErr
			}
			if nodes != nil {
				_, err = io.WriteString(out, "\n"+nodeTable(nodes))
			}
			return err
		}
		if state := watchState(job, nodes, nodesErr); state != lastState {
			var b strings.Builder
			if !first {
				b.WriteString("\n")
			}
			b.WriteString(jobTable([]*v1alpha1.ImagePullJob{job}, g.env.now()))
			switch {
			case nodesErr != nil:
				b.WriteString("\nnodes: " + nodesErr.Error() + "\n")
			case nodes != nil:
				b.WriteString("\n" + nodeTable(nodes))
			}
			if _, err := io.WriteString(out, b.String()); err != nil {
				return err
			}
			lastState = state
		}
		if job.Status.CompletionTime != nil {
			return nil
		}
		t := time.NewTimer(g.env.refresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// errJobGone is in getJob's error when the job does not exist.
var errJobGone = errors.New("not found")

// getJob reads one ImagePullJob.
func getJob(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, ns, name string) (*v1alpha1.ImagePullJob, error) {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout)
	defer cancel()
	job, err := shoal.AppsV1alpha1().ImagePullJobs(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("ImagePullJob %q %w in namespace %s", name, errJobGone, ns)
	case err != nil:
		return nil, fmt.Errorf("get ImagePullJob %s/%s: %w", ns, name, err)
	}
	return job, nil
}

// watchState is what -w compares to decide whether to print again (not
// the AGE column, which changes at every refresh).
func watchState(job *v1alpha1.ImagePullJob, nodes *pullview.JobNodes, nodesErr error) string {
	b, _ := json.Marshal(struct {
		Status v1alpha1.ImagePullJobStatus
		Nodes  *pullview.JobNodes
		Err    string
	}{job.Status, nodes, errString(nodesErr)})
	return string(b)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// fetchNodes reads a job's per-node view from the coordinator leader
// through the apiserver's service proxy.
func fetchNodes(ctx context.Context, g *globalOptions, o getOptions, kube kubernetes.Interface, ns, name string) (*pullview.JobNodes, error) {
	ctx, cancel := context.WithTimeout(ctx, g.requestTimeout)
	defer cancel()
	raw, err := g.env.proxyGet(ctx, kube, o.coordinatorNamespace, o.coordinatorService, coordinatorPort, pullview.NodesPathPrefix+ns+"/"+name)
	if err != nil {
		return nil, nodesError(err, o, ns, name)
	}
	var nodes pullview.JobNodes
	if err := json.Unmarshal(raw, &nodes); err != nil {
		return nil, fmt.Errorf("decode the coordinator's view of ImagePullJob %s/%s: %w", ns, name, err)
	}
	return &nodes, nil
}

// nodesError explains a failed read of the per-node view.
func nodesError(err error, o getOptions, ns, name string) error {
	return coordinatorViewError(err, o.coordinatorNamespace, o.coordinatorService,
		fmt.Sprintf("the coordinator does not know ImagePullJob %s/%s yet (it has not processed the job, or the job is gone)", ns, name),
		fmt.Sprintf(" of ImagePullJob %s/%s", ns, name))
}

// coordinatorViewError explains a failed read of one of the coordinator's
// views through the apiserver's service proxy of service (in namespace):
// notKnown is what a 404 of the coordinator itself means, of names the
// object for other failures. An answer of the coordinator itself reaches
// the client as an unexpected (non-Status) response; the apiserver's own
// answers (no such Service, no endpoints) are Status objects.
func coordinatorViewError(err error, namespace, service, notKnown, of string) error {
	svc := namespace + "/" + service
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return fmt.Errorf("no coordinator leader reachable through service %s: %w", svc, err)
	}
	st := status.Status()
	msg, fromCoordinator := st.Message, false
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == metav1.CauseTypeUnexpectedServerResponse {
				msg, fromCoordinator = c.Message, true
			}
		}
	}
	msg = strings.TrimSpace(msg)
	switch {
	case st.Code == 404 && fromCoordinator:
		return errors.New(notKnown)
	case st.Code == 404:
		return fmt.Errorf("no coordinator leader reachable: service %s: %s (see --coordinator-namespace, --coordinator-service)", svc, msg)
	case st.Code == 503:
		return fmt.Errorf("no coordinator leader reachable: service %s: %s (a leader may be being elected; try again)", svc, msg)
	case st.Code == 403:
		return fmt.Errorf("read the coordinator's view through service %s: %w (this needs get on services/proxy in namespace %s)", svc, err, namespace)
	default:
		return fmt.Errorf("read the coordinator's view%s through service %s: %w", of, svc, err)
	}
}

// table aligns rows of tab-separated cells the way kubectl does, without
// trailing blanks.
func table(rows func(w io.Writer)) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 6, 4, 3, ' ', 0)
	rows(w)
	_ = w.Flush()
	lines := strings.SplitAfter(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \n")
		if strings.HasSuffix(l, "\n") {
			lines[i] += "\n"
		}
	}
	return strings.Join(lines, "")
}

// jobTable renders jobs like `kubectl get imagepulljobs` (the CRD's
// printer columns).
func jobTable(jobs []*v1alpha1.ImagePullJob, now time.Time) string {
	return table(func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tTOTAL\tACTIVE\tSUCCEED\tFAILED\tAGE\tMESSAGE")
		for _, j := range jobs {
			s := j.Status
			age := "<unknown>"
			if !j.CreationTimestamp.IsZero() {
				age = duration.HumanDuration(now.Sub(j.CreationTimestamp.Time))
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", j.Name, s.Desired, s.Active, s.Succeeded, s.Failed, age, oneLine(s.Message))
		}
	})
}

// nodeTable renders a job's per-node view.
func nodeTable(n *pullview.JobNodes) string {
	if len(n.Nodes) == 0 {
		return "No nodes: the job selects none.\n"
	}
	return table(func(w io.Writer) {
		fmt.Fprintln(w, "NODE\tPHASE\tROUND\tATTEMPTS\tPROGRESS\tIMAGE-ID\tMESSAGE")
		for _, s := range n.Nodes {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", s.Node, s.Phase, s.Round, s.Attempts, progress(s), shortImageID(s.ImageID), oneLine(s.Message))
		}
	})
}

// progress renders a node's bytes: "120.0 MiB / 300.0 MiB (40%)".
func progress(s pullview.NodeState) string {
	var p string
	switch {
	case s.BytesTotal > 0:
		pct := s.BytesDone * 100 / s.BytesTotal
		p = fmt.Sprintf("%s / %s (%d%%)", humanBytes(s.BytesDone), humanBytes(s.BytesTotal), min(pct, 100))
	case s.BytesDone > 0:
		p = humanBytes(s.BytesDone)
	case s.Present:
		p = "already present"
	default:
		p = "-"
	}
	if s.Shared {
		p += ", shared"
	}
	return p
}

// humanBytes renders n in binary units with one decimal: "120.0 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n)/unit, 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// shortImageID cuts a sha256 image ID to 12 hex digits, as docker does;
// other IDs are shown whole.
func shortImageID(id string) string {
	switch {
	case id == "":
		return "-"
	case strings.HasPrefix(id, "sha256:") && len(id) > len("sha256:")+12:
		return id[:len("sha256:")+12]
	}
	return id
}

// oneLine keeps a message on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
