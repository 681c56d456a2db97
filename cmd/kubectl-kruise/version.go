package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kruiseGroups are the API groups of OpenKruise that Shoal serves.
var kruiseGroups = []string{"apps.kruise.io", "policy.kruise.io"}

// newRESTClient returns a client of the cluster the kubeconfig (the
// --kubeconfig flag, else $KUBECONFIG, else ~/.kube/config) and --context
// name, for requests by absolute path.
func newRESTClient(g *globalOptions) (rest.Interface, error) {
	cfg, _, err := loadConfig(g)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return dc.RESTClient(), nil
}

// loadConfig reads the kubeconfig (the --kubeconfig flag, else $KUBECONFIG,
// else ~/.kube/config) with the --context override, and returns the client
// config and the context's namespace ("default" when it names none).
func loadConfig(g *globalOptions) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: g.context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-kruise/" + version
	return cfg, ns, nil
}

// newVersionCommand returns `kubectl kruise version`.
func newVersionCommand(g *globalOptions) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the cluster's (server version, Kruise API groups)",
		Long: "Print the plugin's version. When the kubeconfig reaches a cluster, also print the\n" +
			"server's version and whether the apps.kruise.io and policy.kruise.io APIs (the\n" +
			"CRDs Shoal installs) are served, with their versions and resource counts.",
		Example: "  kubectl kruise version\n  kubectl kruise version --client",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Plugin version: %s\n", version)
			if clientOnly {
				return nil
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.requestTimeout)
			defer cancel()
			lines, err := serverLines(ctx, g)
			if err != nil {
				// The plugin's own version is printed; a cluster that
				// cannot be reached is a note, not a failure.
				fmt.Fprintf(cmd.ErrOrStderr(), "Server: unavailable: %v\n", err)
				return nil
			}
			for _, l := range lines {
				fmt.Fprintln(out, l)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the plugin's version, without contacting a cluster")
	return cmd
}

// serverLines returns the lines describing the cluster: its version and
// one line per Kruise API group.
func serverLines(ctx context.Context, g *globalOptions) ([]string, error) {
	c, err := newRESTClient(g)
	if err != nil {
		return nil, err
	}
	var sv apiversion.Info
	if err := getJSON(ctx, c, "/version", &sv); err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	lines := []string{"Server version: " + sv.GitVersion}
	var groups metav1.APIGroupList
	if err := getJSON(ctx, c, "/apis", &groups); err != nil {
		return nil, fmt.Errorf("server API groups: %w", err)
	}
	for _, name := range kruiseGroups {
		var group *metav1.APIGroup
		for i := range groups.Groups {
			if groups.Groups[i].Name == name {
				group = &groups.Groups[i]
			}
		}
		if group == nil {
			lines = append(lines, fmt.Sprintf("%s CRDs: not installed", name))
			continue
		}
		var versions []string
		for _, v := range group.Versions {
			var list metav1.APIResourceList
			if err := getJSON(ctx, c, "/apis/"+v.GroupVersion, &list); err != nil {
				return nil, fmt.Errorf("resources of %s: %w", v.GroupVersion, err)
			}
			versions = append(versions, fmt.Sprintf("%s (%d resources)", v.Version, countResources(list)))
		}
		lines = append(lines, fmt.Sprintf("%s CRDs: installed: %s", name, strings.Join(versions, ", ")))
	}
	return lines, nil
}

// countResources returns how many resources, not subresources, list has.
func countResources(list metav1.APIResourceList) int {
	n := 0
	for _, r := range list.APIResources {
		if !strings.Contains(r.Name, "/") {
			n++
		}
	}
	return n
}

// getJSON GETs path as JSON into v.
func getJSON(ctx context.Context, c rest.Interface, path string, v any) error {
	raw, err := c.Get().AbsPath(path).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}
