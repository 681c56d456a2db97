// Command kubectl-kruise is Shoal's kubectl plugin: on the PATH as
// kubectl-kruise it answers `kubectl kruise ...`.
//
//	kubectl kruise version   the plugin's version and, when the kubeconfig
//	                         reaches a cluster, the server's version and
//	                         which Kruise API groups it serves
//	kubectl kruise create crr POD --containers a,b [--ordered ...] [--wait 2m]
//	                         recreate containers of a pod in place
//	kubectl kruise create imagepulljob NAME --image IMG [--nodes a,b ...] [--wait]
//	kubectl kruise create imagelistpulljob NAME --images A,B [--nodes a,b ...] [--wait]
//	                         pull images onto nodes ahead of time
//	kubectl kruise get imagepulljob [NAME] [--nodes] [-w]
//	                         a job's progress and, with --nodes, each node's
//	                         pull as the coordinator sees it
//	kubectl kruise get podprobemarker [NAME] [--pods]
//	                         the probes and, with --pods, their state per pod
//	kubectl kruise get resourcedistribution [NAME]
//	                         each target namespace's copy
//	kubectl kruise get sidecarset [NAME] [-w]
//	                         which pods run which revision of a SidecarSet
//	kubectl kruise --help    every command (rollout, set, migrate, ...), each
//	                         with an example
//
// Exit status: 0 on success, 1 when a command fails, 2 on a usage error
// (an unknown command or flag).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is the plugin's version, set at build time with
// -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the plugin with args and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return execute(ctx, newRootCommand(stdout, stderr), args, stderr)
}

// execute runs the command tree cmd with args and returns the exit status,
// printing a failure to stderr.
func execute(ctx context.Context, cmd *cobra.Command, args []string, stderr io.Writer) int {
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "error:", err)
	var usage usageError
	if errors.As(err, &usage) {
		fmt.Fprintln(stderr, "Run 'kubectl kruise --help' for usage.")
		return exitUsage
	}
	return exitError
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ error }

// Unwrap returns the wrapped error.
func (u usageError) Unwrap() error { return u.error }
