package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	"github.com/shoal-io/shoal/coordinator/resourcedistribution"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
)

// newGetResourceDistributionCommand returns `kubectl kruise get
// resourcedistribution`.
func newGetResourceDistributionCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "resourcedistribution [NAME]",
		Aliases: []string{"resourcedistributions", "rd"},
		Short:   "Show ResourceDistributions and, for one, the state of its copy in each target namespace",
		Long: "Without NAME, list the ResourceDistributions. With NAME, show the distribution and one row\n" +
			"per target namespace: synced (the copy holds the current resource), outdated (an older\n" +
			"one), missing, conflict (an object of the same name that the distribution does not own),\n" +
			"or the failure the controller reported there.",
		Example: "  kubectl kruise get resourcedistribution\n" +
			"  kubectl kruise get rd shared-secret",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("%q takes at most one name, got %d arguments", cmd.CommandPath(), len(args))}
			}
			shoal, kube, _, err := g.env.clients(g)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			if len(args) == 0 {
				return listDistributions(ctx, g, shoal, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return showDistribution(ctx, g, shoal, kube, args[0], cmd.OutOrStdout())
		},
	}
}

// listDistributions prints every ResourceDistribution.
func listDistributions(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, out, errOut io.Writer) error {
	list, err := shoal.AppsV1alpha1().ResourceDistributions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceDistributions: %w", err)
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintln(errOut, "No ResourceDistributions found.")
		return err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	now := g.env.now()
	_, err = io.WriteString(out, table(func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tRESOURCE\tDESIRED\tSUCCEEDED\tFAILED\tAGE")
		for i := range list.Items {
			rd := &list.Items[i]
			res := "<invalid>"
			if kind, name, err := resourcedistribution.Resource(rd); err == nil {
				res = kind + "/" + name
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\n", rd.Name, res, rd.Status.Desired, rd.Status.Succeeded, rd.Status.Failed, age(rd.CreationTimestamp, now))
		}
	}))
	return err
}

// age is how long ago t was, as kubectl prints it.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// distributionRow is one target namespace of a distribution.
type distributionRow struct {
	namespace, state, distributed string
}

// showDistribution prints one distribution and its copies by namespace.
func showDistribution(ctx context.Context, g *globalOptions, shoal shoalclient.Interface, kube kubernetes.Interface, name string, out io.Writer) error {
	rd, err := shoal.AppsV1alpha1().ResourceDistributions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get resourcedistribution %s: %w", name, err)
	}
	kind, resName, err := resourcedistribution.Resource(rd)
	if err != nil {
		return fmt.Errorf("resourcedistribution %s: %w", name, err)
	}
	nsList, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	namespaces := make([]*corev1.Namespace, 0, len(nsList.Items))
	for i := range nsList.Items {
		namespaces = append(namespaces, &nsList.Items[i])
	}
	targets, missing, err := resourcedistribution.TargetNamespaces(rd, namespaces)
	if err != nil {
		return fmt.Errorf("resourcedistribution %s: %w", name, err)
	}
	copies, err := listCopies(ctx, kube, kind, resName)
	if err != nil {
		return err
	}
	rows := distributionRows(rd, targets, missing, copies, g.env.now())
	header := fmt.Sprintf("ResourceDistribution %s: %s/%s to %d namespaces, %d succeeded, %d failed (observed generation %d of %d)\n",
		rd.Name, kind, resName, rd.Status.Desired, rd.Status.Succeeded, rd.Status.Failed, rd.Status.ObservedGeneration, rd.Generation)
	_, err = io.WriteString(out, header+table(func(w io.Writer) {
		fmt.Fprintln(w, "NAMESPACE\tSTATE\tDISTRIBUTED")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%s\n", r.namespace, r.state, r.distributed)
		}
	}))
	return err
}

// listCopies returns the metadata of the objects named name of kind in
// every namespace, by namespace (one cluster-wide list).
func listCopies(ctx context.Context, kube kubernetes.Interface, kind, name string) (map[string]metav1.ObjectMeta, error) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	out := map[string]metav1.ObjectMeta{}
	switch kind {
	case "Secret":
		list, err := kube.CoreV1().Secrets("").List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list Secrets named %s: %w", name, err)
		}
		for _, s := range list.Items {
			if s.Name == name {
				out[s.Namespace] = s.ObjectMeta
			}
		}
	default:
		list, err := kube.CoreV1().ConfigMaps("").List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list ConfigMaps named %s: %w", name, err)
		}
		for _, c := range list.Items {
			if c.Name == name {
				out[c.Namespace] = c.ObjectMeta
			}
		}
	}
	return out, nil
}

// distributionRows is the state of rd's copy in each target namespace
// (and each included namespace that does not exist), sorted by namespace.
func distributionRows(rd *v1alpha1.ResourceDistribution, targets, missing []string, copies map[string]metav1.ObjectMeta, now time.Time) []distributionRow {
	failed := map[string]string{}
	for _, c := range rd.Status.Conditions {
		if c.Status != v1alpha1.ResourceDistributionConditionTrue {
			continue
		}
		for _, ns := range c.FailedNamespaces {
			failed[ns] = string(c.Type)
		}
	}
	hash := resourcedistribution.HashCode(rd.Spec.Resource.Raw)
	var rows []distributionRow
	for _, ns := range targets {
		r := distributionRow{namespace: ns, distributed: "-"}
		m, ok := copies[ns]
		switch {
		case !ok:
			r.state = "missing"
		case m.Annotations[wellknown.AnnotationResourceDistributionFrom] != rd.Name:
			r.state = "conflict"
		case m.Annotations[wellknown.AnnotationResourceDistributionHashCode] != hash:
			r.state = "outdated"
		default:
			r.state = "synced"
		}
		if ok {
			if at, err := time.Parse(time.RFC3339, m.Annotations[wellknown.AnnotationResourceDistributionDistributedTimestamp]); err == nil {
				r.distributed = duration.HumanDuration(now.Sub(at)) + " ago"
			}
		}
		if f, isFailed := failed[ns]; isFailed && r.state != "synced" {
			r.state += " (" + f + ")"
		}
		rows = append(rows, r)
	}
	for _, ns := range missing {
		rows = append(rows, distributionRow{namespace: ns, state: "namespace not found", distributed: "-"})
	}
	slices.SortFunc(rows, func(a, b distributionRow) int {
		switch {
		case a.namespace < b.namespace:
			return -1
		case a.namespace > b.namespace:
			return 1
		}
		return 0
	})
	return rows
}
