package main

import (
	"context"
	"fmt"
	"io"
	"sort"
)

// dataCommands are the subcommands of "privrec data"; each file registers its own.
var dataCommands = map[string]*command{}

func registerData(c *command) { dataCommands[c.name] = c }

func init() {
	register(&command{name: "data", summary: "inspect and prepare rating data: stats, split, synth, convert", run: runData})
}

func runData(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(out, "Usage: privrec data SUBCOMMAND [flags]\n\nSubcommands:\n")
		names := make([]string, 0, len(dataCommands))
		for n := range dataCommands {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(out, "  %-8s %s\n", n, dataCommands[n].summary)
		}
		fmt.Fprint(out, "\nRun 'privrec data SUBCOMMAND --help' for a worked example.\n")
		if len(args) == 0 {
			return usagef("missing subcommand")
		}
		return nil
	}
	c, ok := dataCommands[args[0]]
	if !ok {
		return usagef("unknown data subcommand %q", args[0])
	}
	return c.run(ctx, args[1:], out)
}
