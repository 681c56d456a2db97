package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// globalOptions are the flags every command takes, and the environment
// the commands run in.
type globalOptions struct {
	kubeconfig     string
	context        string
	requestTimeout time.Duration
	env            env
}

// newRootCommand returns the `kubectl kruise` command tree writing to stdout
// and stderr.
func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	return newRootCommandEnv(stdout, stderr, defaultEnv())
}

// newRootCommandEnv is newRootCommand in the environment e.
func newRootCommandEnv(stdout, stderr io.Writer, e env) *cobra.Command {
	g := globalOptions{env: e}
	root := &cobra.Command{
		Use:   "kubectl-kruise",
		Short: "Work with OpenKruise-compatible workloads served by Shoal",
		Long: "kubectl kruise works with the OpenKruise API (apps.kruise.io, policy.kruise.io)\n" +
			"as served by Shoal. Install it by putting kubectl-kruise on the PATH.",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl kruise"},
		// Unknown subcommands land here (Args accepts anything) so that they
		// become usage errors, not cobra's untyped ones.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
		SuggestionsMinimumDistance: 2,
		SilenceErrors:              true,
		SilenceUsage:               true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	pf.StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	pf.StringVar(&g.context, "context", "", "the kubeconfig context to use")
	pf.DurationVar(&g.requestTimeout, "request-timeout", 10*time.Second, "how long to wait for the server")

	root.AddCommand(newVersionCommand(&g), newCreateCommand(&g), newGetCommand(&g), newRolloutCommand(&g),
		newSetCommand(&g), newScaleDownCommand(&g), newMigrateCommand(&g))
	// --help lists every command with an example, from the commands' own.
	root.Example = commandExamples(root)
	return root
}

// unknownCommand returns the usage error for an unknown subcommand name of
// cmd, with suggestions when a command's name is close.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.DisplayName())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return usageError{fmt.Errorf("%s", msg)}
}

// noArgs rejects any positional argument as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%q takes no arguments, got %q", cmd.CommandPath(), args)}
	}
	return nil
}
