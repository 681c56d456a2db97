package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// allCommands returns every available command under c, depth first.
func allCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			out = append(append(out, sub), allCommands(sub)...)
		}
	}
	return out
}

// TestHelpListsEveryCommandWithAnExample walks the command tree, so a
// command added without an Example fails here: `kubectl kruise --help`
// lists every command, each with one example that runs that command.
func TestHelpListsEveryCommandWithAnExample(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(t.Context(), []string{"--help"}, &stdout, &stderr), stderr.String())
	help := stdout.String()

	var bare bytes.Buffer
	require.Equal(t, exitOK, run(t.Context(), nil, &bare, &stderr), stderr.String())
	require.Equal(t, help, bare.String(), "kubectl kruise without arguments prints the same help")

	root := newRootCommand(io.Discard, io.Discard)
	leaves := leafCommands(root)
	// The walk sees the whole tree: nested and top-level commands.
	var paths []string
	for _, c := range leaves {
		paths = append(paths, commandPath(c))
	}
	require.Subset(t, paths, []string{"version", "rollout approve", "create containerrecreaterequest", "get sidecarset", "set image", "migrate"})

	// Top-level commands in Available Commands; every command, groups too,
	// in an example's heading.
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			require.Regexp(t, `(?m)^  `+regexp.QuoteMeta(c.Name())+` +`+regexp.QuoteMeta(c.Short)+`$`, help)
		}
	}
	for _, c := range allCommands(root) {
		require.Contains(t, help, "  # "+commandPath(c), "kubectl kruise --help does not list %q", c.CommandPath())
	}

	for _, c := range leaves {
		t.Run(commandPath(c), func(t *testing.T) {
			ex := firstExample(c)
			require.NotEmpty(t, ex, "%q has no Example: give it one, --help lists it", c.CommandPath())
			require.Contains(t, help, "  # "+commandPath(c)+": "+c.Short+"\n  "+ex+"\n")
			require.Equal(t, 1, strings.Count(help, "# "+commandPath(c)+": "), "one example per command")

			// The example runs this very command, with flags it has.
			args, ok := strings.CutPrefix(ex, "kubectl kruise ")
			require.True(t, ok, "example %q does not start with kubectl kruise", ex)
			found, rest, err := newRootCommand(io.Discard, io.Discard).Find(strings.Fields(args))
			require.NoError(t, err)
			require.Equal(t, c.CommandPath(), found.CommandPath(), "example %q", ex)
			require.NoError(t, found.ParseFlags(rest), "example %q", ex)
		})
	}
}
