// Command privrec trains, evaluates and audits differentially private
// recommenders. Run "privrec help" for the list of commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// command is one subcommand. run gets the arguments after the command name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, out io.Writer) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// usageError marks a command-line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// exitError carries a specific exit status (e.g. audit violations exit 1
// after printing their report).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	stopProfile, err := startProfile(os.Getenv("PRIVREC_CPUPROFILE"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "privrec: %v\n", err)
		os.Exit(1)
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	if err := writeHeapProfile(os.Getenv("PRIVREC_MEMPROFILE")); err != nil {
		fmt.Fprintf(os.Stderr, "privrec: %v\n", err)
	}
	stop()
	os.Exit(code)
}

// startProfile writes a CPU profile of the whole command to path (for
// `go tool pprof`) when path is not empty: PRIVREC_CPUPROFILE=cpu.out
// privrec train …. The returned function stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("PRIVREC_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("PRIVREC_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "privrec: closing the CPU profile: %v\n", err)
		}
	}, nil
}

// writeHeapProfile writes the heap profile to path when path is not empty:
// PRIVREC_MEMPROFILE=mem.out privrec train …, then `go tool pprof
// -sample_index=alloc_space mem.out` says where the command allocated its
// bytes (peak memory is the sum of what is live together; /usr/bin/time -v
// gives the peak itself).
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("PRIVREC_MEMPROFILE: %w", err)
	}
	werr := pprof.Lookup("allocs").WriteTo(f, 0)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("PRIVREC_MEMPROFILE: %w", werr)
	}
	return nil
}

// run dispatches and maps errors to exit statuses: 0 ok, 1 failure, 2 usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printHelp(stderr)
		return 2
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "-help" {
		name = "help"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "privrec: unknown command %q\n\n", name)
		printHelp(stderr)
		return 2
	}
	helpOut = stdout
	err := c.run(ctx, args[1:], stdout)
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, flag.ErrHelp) || errors.Is(err, errParsed) {
		return 0
	}
	fmt.Fprintf(stderr, "privrec %s: %s\n", name, errorText(name, err))
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run 'privrec %s --help' for usage.\n", name)
		return 2
	}
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}

// errorText is err's message without leading "NAME: " prefixes that repeat
// the command's name: the client and dap packages (and the serve roles)
// begin their errors with it, as Go packages do, and "privrec client:
// client: …" says it twice.
func errorText(name string, err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, name+": ") {
		msg = strings.TrimPrefix(msg, name+": ")
	}
	return msg
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `privrec — differentially private recommendation.

Usage: privrec COMMAND [flags]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Every command takes --help, which explains it with a worked example, and
every command that prints results takes --json for a machine-readable object.
Privacy noise comes from crypto/rand unless --seed is given (experiments only).
`)
}

// newFlags makes a flag set whose --help prints the synopsis, a worked
// example and the flags.
func newFlags(name, synopsis, example string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: privrec %s\n\n%s\n", name, strings.TrimSpace(synopsis))
		if example != "" {
			fmt.Fprintf(w, "\nExample:\n%s\n", example)
		}
		fmt.Fprint(w, "\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// helpOut receives --help text (stdout; run sets it so tests can capture it).
var helpOut io.Writer = os.Stdout

// parse parses flags and rejects stray positional arguments unless allowed.
// --help prints the usage on stdout; a bad flag is a usage error whose
// message points to --help rather than dumping every flag.
func parse(fs *flag.FlagSet, args []string, positional bool) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(helpOut)
			fs.Usage()
			return err
		}
		return usageError{err.Error()}
	}
	if !positional && fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if parseOnly {
		return errParsed
	}
	return nil
}

// parseOnly makes every command stop right after parsing its flags, with
// errParsed (exit status 0): the help test runs each example command of
// the help texts this way, to check that it parses without running it.
var parseOnly bool

var errParsed = errors.New("flags parsed (parse-only mode)")

// parseDispatch is parse for a command whose remaining arguments name a
// subcommand with flags of its own (client): it never stops in parse-only
// mode, the subcommand's parse does.
func parseDispatch(fs *flag.FlagSet, args []string) error {
	was := parseOnly
	parseOnly = false
	defer func() { parseOnly = was }()
	return parse(fs, args, true)
}

func init() {
	register(&command{name: "help", summary: "list commands, or explain one: privrec help COMMAND", run: func(ctx context.Context, args []string, out io.Writer) error {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-help" || args[0] == "-h") {
			args = nil // privrec help --help: the list of commands
		}
		if len(args) > 0 {
			c, ok := commands[args[0]]
			if !ok {
				return usagef("unknown command %q", args[0])
			}
			return c.run(ctx, []string{"--help"}, out)
		}
		printHelp(out)
		return nil
	}})
	register(&command{name: "version", summary: "print the version", run: func(ctx context.Context, args []string, out io.Writer) error {
		fs := newFlags("version [--json]", "Print privrec's version (and, with --json, the Go version it was built with).", "  privrec version\n  privrec version --json")
		jsonOut := fs.Bool("json", false, "print a JSON object")
		if err := parse(fs, args, false); err != nil {
			return err
		}
		if *jsonOut {
			return writeJSON(out, map[string]string{"version": version, "go": runtime.Version()})
		}
		fmt.Fprintf(out, "privrec %s\n", version)
		return nil
	}})
}
