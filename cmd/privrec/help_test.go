package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/privrec/privrec/methods"
)

// helpPage is one --help text and the command line that printed it.
type helpPage struct {
	args []string
	text string
}

var (
	commandLine = regexp.MustCompile(`(?m)^  ([a-z][a-z0-9-]*)\s`)
	flagLine    = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`)
	flagMention = regexp.MustCompile(`(?:^|[\s(\[|,'"=])--([a-z][a-z0-9-]*)`)
)

// helpPages runs privrec help and every COMMAND --help it lists, every
// data and serve subcommand's, every client subcommand's and every
// training method's (train --method NAME --help).
func helpPages(t *testing.T) []helpPage {
	t.Helper()
	var pages []helpPage
	get := func(args ...string) string {
		t.Helper()
		out, errs, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("privrec %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		pages = append(pages, helpPage{args, out})
		return out
	}
	top := get("help")
	var names []string
	for _, m := range commandLine.FindAllStringSubmatch(top, -1) {
		names = append(names, m[1])
	}
	if len(names) < 10 {
		t.Fatalf("privrec help lists %d commands: %s", len(names), top)
	}
	for _, name := range names {
		text := get(name, "--help")
		switch name {
		case "data":
			for _, m := range commandLine.FindAllStringSubmatch(text, -1) {
				get("data", m[1], "--help")
			}
		case "serve":
			for _, sub := range []string{"stats", "bench", "backup", "restore", "token"} {
				get("serve", sub, "--help")
			}
			for _, role := range []string{"leader", "helper"} {
				get("serve", "--role", role, "--help")
			}
		case "dap":
			for _, sub := range []string{"enrol", "contribute", "task", "collect", "simulate"} {
				get("dap", sub, "--help")
			}
			get("dap", "task", "create", "--help")
		case "client":
			for _, sub := range []string{"enroll", "submit", "status", "recommend", "publish", "export", "leave"} {
				if !strings.Contains(text, sub) {
					t.Errorf("client --help does not mention its subcommand %s", sub)
				}
				get("client", "--server", "http://127.0.0.1:1", sub, "--help")
			}
		case "train":
			for _, m := range methods.All() {
				get("train", "--method", m.Name, "--help")
			}
		}
	}
	return pages
}

// definedFlags are the flags a help page's Flags section lists.
func definedFlags(text string) map[string]bool {
	set := map[string]bool{}
	if _, flags, ok := strings.Cut(text, "\nFlags:\n"); ok {
		for _, m := range flagLine.FindAllStringSubmatch(flags, -1) {
			set[m[1]] = true
		}
	}
	return set
}

// placeholder marks a synopsis rather than an example: an optional part
// in brackets or a word in capitals standing for a value (NAME, FILE).
var placeholder = regexp.MustCompile(`\[|\b[A-Z]{2,}\b`)

// examples are the command lines a help page shows (lines indented by two
// spaces that start with "privrec ", continuation backslashes joined,
// comments and redirections cut off), outside its usage block and flag
// list, and without placeholders.
func examples(text string) []string {
	body, _, _ := strings.Cut(text, "\nFlags:\n")
	if _, rest, ok := strings.Cut(body, "\n\n"); ok && strings.HasPrefix(body, "Usage:") {
		body = rest
	}
	lines := strings.Split(body, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(lines[i], "  privrec ") || strings.HasPrefix(lines[i], "   ") {
			continue
		}
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, "\\") + " " + strings.TrimSpace(lines[i])
		}
		for _, cut := range []string{" #", " >", " |", " <", " &&"} {
			if k := strings.Index(l, cut); k >= 0 {
				l = l[:k]
			}
		}
		if placeholder.MatchString(l) {
			continue
		}
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// shellWords splits a command line like a shell: spaces separate words,
// single and double quotes group them.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	if n := len(words); n > 0 && words[n-1] == "&" { // run in the background
		words = words[:n-1]
	}
	return words
}

// TestHelpPagesAreTrue walks privrec help and every --help page: each flag
// a page's usage line documents exists in its flag set, each flag its text
// mentions exists in some command, and each example command parses (run
// in parse-only mode: flags parsed, nothing executed).
func TestHelpPagesAreTrue(t *testing.T) {
	pages := helpPages(t)
	all := map[string]bool{}
	for _, p := range pages {
		for f := range definedFlags(p.text) {
			all[f] = true
		}
	}
	parseOnly = true
	t.Cleanup(func() { parseOnly = false })
	checked := map[string]bool{}
	for _, p := range pages {
		name := strings.Join(p.args, " ")
		defined := definedFlags(p.text)
		body, _, _ := strings.Cut(p.text, "\nFlags:\n")
		usage, _, _ := strings.Cut(body, "\n\n")
		if strings.HasPrefix(usage, "Usage: privrec ") && len(defined) > 0 {
			for _, m := range flagMention.FindAllStringSubmatch(usage, -1) {
				if !defined[m[1]] && m[1] != "help" {
					t.Errorf("%s: the usage line documents --%s, which the command does not define", name, m[1])
				}
			}
		}
		for _, m := range flagMention.FindAllStringSubmatch(body, -1) {
			if !all[m[1]] && m[1] != "help" {
				t.Errorf("%s: the help text mentions --%s, which no command defines", name, m[1])
			}
		}
		for _, ex := range examples(p.text) {
			if checked[ex] {
				continue
			}
			checked[ex] = true
			checkExample(t, name, ex)
		}
	}
	if len(checked) < 40 {
		keys := make([]string, 0, len(checked))
		for k := range checked {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Errorf("only %d example commands found:\n%s", len(checked), strings.Join(keys, "\n"))
	}
}

// TestInputFlagAliases: the ratings file is --data everywhere, with --in
// and --ratings as aliases that read the same file.
func TestInputFlagAliases(t *testing.T) {
	dir := t.TempDir()
	data := writeRatings(t, dir, "r.tsv", func(int, int) bool { return true })
	var first string
	for _, flag := range []string{"--data", "--in", "--ratings"} {
		out, errs, code := runCLI(t, "data", "stats", flag, data, "--json")
		if code != 0 {
			t.Fatalf("data stats %s: exit %d: %s", flag, code, errs)
		}
		if first == "" {
			first = out
		} else if out != first {
			t.Errorf("data stats %s differs from --data", flag)
		}
	}
	for _, cmd := range [][]string{{"train"}, {"eval"}, {"collect"}, {"recommend"}, {"data", "stats"}, {"data", "split"}, {"data", "convert"}} {
		out, _, _ := runCLI(t, append(cmd, "--help")...)
		flags := definedFlags(out)
		if !flags["data"] || !flags["in"] || !flags["ratings"] {
			t.Errorf("%v: input flags %v, want data with the aliases in and ratings", cmd, flags)
		}
	}
}

// TestOneDeltaDefault: train and client publish default δ alike (a
// private publish without --delta used to fail on δ = 0).
func TestOneDeltaDefault(t *testing.T) {
	deltaDefault := func(args ...string) string {
		out, errs, code := runCLI(t, append(args, "--help")...)
		if code != 0 {
			t.Fatalf("%v --help: %s", args, errs)
		}
		_, flags, _ := strings.Cut(out, "\nFlags:\n")
		_, rest, ok := strings.Cut(flags, "  -delta")
		if !ok {
			t.Fatalf("%v has no --delta", args)
		}
		line, _, _ := strings.Cut(strings.SplitN(rest, "\n  -", 2)[0], "\n  -")
		_, def, ok := strings.Cut(line, "(default ")
		if !ok {
			t.Fatalf("%v: --delta has no default: %q", args, line)
		}
		return strings.TrimSuffix(strings.TrimSpace(def), ")")
	}
	train := deltaDefault("train", "--method", "dp-bias")
	publish := deltaDefault("client", "--server", "http://127.0.0.1:1", "publish")
	if train != "1e-06" || publish != train {
		t.Errorf("δ defaults: train %q, client publish %q; want both 1e-06", train, publish)
	}
}

// TestReadmeCommandsParse: every privrec command in the README's shell
// blocks parses (flags parsed in parse-only mode, nothing run).
func TestReadmeCommandsParse(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "```sh"):
			in = true
		case strings.HasPrefix(l, "```"):
			in = false
		case in:
			block = append(block, "  "+l)
		}
	}
	parseOnly = true
	t.Cleanup(func() { parseOnly = false })
	cmds := examples(strings.Join(block, "\n"))
	if len(cmds) < 10 {
		t.Fatalf("only %d privrec commands in the README: %q", len(cmds), cmds)
	}
	for _, ex := range cmds {
		checkExample(t, "README", ex)
	}
}

// checkExample runs an example command in parse-only mode and checks that
// a training of a private method states --epsilon (parsing alone would
// not catch its absence: train refuses it after parsing).
func checkExample(t *testing.T, where, ex string) {
	t.Helper()
	words := shellWords(ex)[1:]
	if _, errs, code := runCLI(t, words...); code != 0 {
		t.Errorf("%s: example %q does not parse (exit %d): %s", where, ex, code, errs)
	}
	if len(words) == 0 || words[0] != "train" {
		return
	}
	if m, err := methods.Lookup(methodFromArgs(words)); err == nil && m.Private && !m.EpsilonFromInput && !slices.Contains(words, "--epsilon") {
		t.Errorf("%s: example %q trains the private method %s without --epsilon", where, ex, m.Name)
	}
}
