package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// commandExamples returns the Examples of `kubectl kruise --help`: every
// command of root's tree that does something itself (not a group such as
// create or rollout), by its path and short description, with the first
// example of its own help.
func commandExamples(root *cobra.Command) string {
	var entries []string
	for _, c := range leafCommands(root) {
		entry := fmt.Sprintf("  # %s: %s", commandPath(c), c.Short)
		if ex := firstExample(c); ex != "" {
			entry += "\n  " + ex
		}
		entries = append(entries, entry)
	}
	return strings.Join(entries, "\n\n")
}

// leafCommands returns the commands under root, depth first in cobra's
// (name) order, that have no subcommands of their own: the ones a user
// runs. Hidden and deprecated commands and help are left out.
func leafCommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		if c.HasAvailableSubCommands() {
			out = append(out, leafCommands(c)...)
			continue
		}
		out = append(out, c)
	}
	return out
}

// commandPath returns c's path below the root: "rollout status".
func commandPath(c *cobra.Command) string {
	var names []string
	for ; c.HasParent(); c = c.Parent() {
		names = append([]string{c.Name()}, names...)
	}
	return strings.Join(names, " ")
}

// firstExample returns the first line of c's Example, without its
// indentation, or "" when it has none.
func firstExample(c *cobra.Command) string {
	for line := range strings.Lines(c.Example) {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}
