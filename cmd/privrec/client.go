package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/service/api"
)

func init() {
	register(&command{name: "client", summary: "the reference client of privrec serve: enroll, submit (randomized on this device in local mode; as entered, to the operator, in central mode), status, recommend (computed on this device)", run: runClient})
}

const clientSynopsis = `
The reference client of 'privrec serve'. Commands:

  enroll                      enrol a new user; prints her ID and secret token
                              (shown once: keep it; the server stores only its hash)
  submit --ratings FILE       local mode: randomize her ratings on this device
                              with the server's published mechanism and ε (the
                              same ldp code as 'privrec collect') and submit
                              the report; the server debits her ledger the
                              report's ε. Central mode: send her ratings as she
                              entered them to the operator, who is trusted
                              with them; a report costs nothing, each release
                              the operator publishes is charged. Exits 1 when
                              refused
  status                      her ledger: local mode, ε spent and remaining and
                              her reports (with --ledger, this device's own
                              count beside it); central mode, what the releases
                              charged her, as ε at the budget's δ with the
                              ledger's zCDP ρ beside it
  recommend --ratings FILE    her top-k, computed here from the latest public
                              release and her own ratings (nothing is sent):
                              predicted ratings, or a ranking for a top-N
                              model; warns when the release is mostly noise
  publish --method NAME       (admin token) train a release on the stored data
                              and publish it
  export                      everything the server stores about her (JSON)
  leave --yes                 delete her reports and states at the server and
                              revoke her token; her ledger (what she spent)
                              stays, since published releases used her reports

The token comes from --token, --token-file or $PRIVREC_TOKEN. A ratings file
holds one user's ratings: "item rating" per line (tab, comma or spaces), or
"user item rating" lines of one user; # comments. Before randomizing, the
client checks with its own code that the server's mechanism parameters give
the ε it publishes, and refuses otherwise.

The device keeps its own ledger (by default; --ledger FILE or
$PRIVREC_LEDGER names it, else one file per server and token under
$PRIVREC_LEDGER_DIR or the user's configuration directory, privrec/ledgers;
--ledger none turns it off). It is made when she enrols (or on her first
submit) and pins the collection she joined: mode, mechanism, per-report
and per-item ε, scale, catalogue, budget. submit refuses, sending nothing
(exit 1, JSON code collection_changed), a server whose configuration
weakens it — central mode in place of local (true ratings), a larger ε,
another catalogue. In local mode submit records each report there before
sending it and refuses, on the device, one that would pass the budget she
accepted; a server that counts less, or raises the budget, is reported on
stderr.`

func runClient(ctx context.Context, args []string, out io.Writer) error {
	cc, err := parseClient(args, out)
	if err != nil {
		return err
	}
	run, ok := clientCommands[cc.sub]
	if !ok {
		return usagef("unknown client command %q (want enroll, submit, status, recommend, publish, export or leave)", cc.sub)
	}
	return run(ctx, cc)
}

const clientExample = `  privrec client --server http://127.0.0.1:8080 enroll --json
  export PRIVREC_TOKEN=prt_…
  privrec client --server http://127.0.0.1:8080 submit --ratings mine.tsv --json
  privrec client --server http://127.0.0.1:8080 status --json
  privrec client --server http://127.0.0.1:8080 recommend --ratings mine.tsv -k 10`

// clientCmd is one client command: the server and her token, the command
// and its own flag set (with --json, and --ledger where the command keeps
// the device ledger) and arguments, still to be parsed.
type clientCmd struct {
	c       *client.Client
	server  string
	tok     string
	sub     string
	sfs     *flag.FlagSet
	args    []string
	jsonOut *bool
	ledger  *string
	out     io.Writer
}

// clientCommands are the client's commands by name.
var clientCommands = map[string]func(context.Context, *clientCmd) error{
	"enroll":    clientEnroll,
	"submit":    clientSubmit,
	"status":    clientStatus,
	"recommend": clientRecommend,
	"publish":   clientPublish,
	"export":    clientExport,
	"leave":     clientLeave,
}

// parseClient parses the client's common flags (--server, the token,
// --json) and sets up the command's own flag set.
func parseClient(args []string, out io.Writer) (*clientCmd, error) {
	fs := newFlags("client --server URL [--token T] enroll|submit|status|recommend|publish|export|leave [flags]", clientSynopsis, clientExample)
	server := fs.String("server", "", "the server's base URL, e.g. http://127.0.0.1:8080")
	token := fs.String("token", "", "the user's token (default: $PRIVREC_TOKEN)")
	tokenFile := fs.String("token-file", "", "file holding the user's token")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parseDispatch(fs, args); err != nil {
		return nil, err
	}
	if *server == "" {
		return nil, usagef("--server URL is required")
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, usagef("a command is required: enroll, submit, status, recommend or publish")
	}
	tok, err := clientToken(*token, *tokenFile)
	if err != nil {
		return nil, err
	}
	cc := &clientCmd{c: client.New(*server, tok), server: *server, tok: tok, sub: rest[0], args: rest[1:],
		jsonOut: jsonOut, ledger: new(string), out: out}
	cc.sfs = newFlags("client "+cc.sub, clientSynopsis, clientExample)
	cc.sfs.BoolVar(jsonOut, "json", *jsonOut, "print JSON")
	if cc.sub == "enroll" || cc.sub == "submit" || cc.sub == "status" {
		cc.sfs.StringVar(cc.ledger, "ledger", os.Getenv("PRIVREC_LEDGER"), "the device's own ledger file (default $PRIVREC_LEDGER, else one per server and token under $PRIVREC_LEDGER_DIR or your configuration directory; none: no device ledger): it pins the collection you joined and, in local mode, records every report before it is sent; a report past the budget you accepted, or a configuration that weakens the collection, is refused on this device")
	}
	return cc, nil
}

// parseAuthed parses the command's flags and requires her token.
func (cc *clientCmd) parseAuthed() error {
	if err := parse(cc.sfs, cc.args, false); err != nil {
		return err
	}
	return needToken(cc.tok)
}

// refused reports a server's refusal (clientErr) in the command's format.
func (cc *clientCmd) refused(err error) error { return clientErr(cc.out, *cc.jsonOut, err) }

// clientEnroll enrols a new user, makes the device ledger pinning the
// collection she joins, and prints her ID and token (shown once).
func clientEnroll(ctx context.Context, cc *clientCmd) error {
	if err := parse(cc.sfs, cc.args, false); err != nil {
		return err
	}
	cfg, err := cc.c.Config(ctx)
	if err != nil {
		return cc.refused(err)
	}
	if err := client.CheckConfig(cfg); err != nil {
		return err
	}
	e, err := cc.c.Enroll(ctx)
	if err != nil {
		return cc.refused(err)
	}
	path := cc.pinOnEnrol(e.Token, cfg)
	if *cc.jsonOut {
		res := map[string]any{"user": e.User, "token": e.Token}
		if path != "" {
			res["device_ledger"] = path
		}
		return writeJSON(cc.out, res)
	}
	fmt.Fprintf(cc.out, "Enrolled as %s.\nYour token (shown once; keep it secret — it is the only way to act as you):\n%s\n", e.User, e.Token)
	if path != "" {
		fmt.Fprintf(cc.out, "This device's ledger (it pins the collection you joined): %s\n", path)
	}
	return nil
}

// pinOnEnrol makes the device ledger pinning the collection she joins now
// and returns its path ("" for none). Failing to make it must not lose
// the token (shown once): it warns and goes on; her first submit makes it.
func (cc *clientCmd) pinOnEnrol(token string, cfg *api.Config) string {
	path, err := ledgerPath(*cc.ledger, cc.server, token)
	if err == nil && path != "" {
		err = newDeviceLedger(path, cc.server, cfg)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "privrec client: enrolled, but the device ledger was not made (it will be at the first submit): %v\n", err)
		return ""
	}
	return path
}

// clientSubmit sends one report of her ratings: checked on the device
// against the collection she joined, randomized here in local mode (and
// recorded in the device ledger first), sent as entered in central mode.
func clientSubmit(ctx context.Context, cc *clientCmd) error {
	ratings := cc.sfs.String("ratings", "", "your ratings file")
	cc.sfs.StringVar(ratings, "data", "", "same as --ratings")
	id := cc.sfs.String("id", "", "the report ID (default: a fresh random one; resubmitting an ID is never charged twice)")
	retries := cc.sfs.Int("retries", 5, "attempts on a network failure or 5xx (the same report ID each time)")
	if err := cc.parseAuthed(); err != nil {
		return err
	}
	if *ratings == "" {
		return usagef("submit: --ratings FILE is required")
	}
	mine, err := client.LoadRatings(*ratings)
	if err != nil {
		return err
	}
	cfg, ledger, path, err := cc.joinedCollection(ctx)
	if err != nil {
		return err
	}
	rep, err := cc.prepareReport(cfg, mine, *id)
	if err != nil {
		return err
	}
	err = reserveOnDevice(ledger, path, cc.server, cfg, rep)
	if be := (*client.BudgetError)(nil); errors.As(err, &be) {
		return deviceRefusal(cc.out, *cc.jsonOut, "device_budget_exceeded", be,
			map[string]any{"device_spent": be.Spent, "device_budget": be.Budget, "epsilon": be.Epsilon})
	}
	if err != nil {
		return err
	}
	if ledger != nil && cfg.Mode != api.ModeLocal {
		ledger = nil // pins only: no count to show
	}
	ack, replayed, err := cc.c.SubmitRetry(ctx, rep, *retries)
	if err != nil {
		return cc.refused(err)
	}
	return cc.printSubmitted(cfg, ack, replayed, ledger)
}

// joinedCollection reads the server's configuration and checks it, before
// anything is randomized or sent, against the collection the device
// ledger pins: a configuration that weakens it is refused here.
func (cc *clientCmd) joinedCollection(ctx context.Context) (*api.Config, *client.Ledger, string, error) {
	cfg, err := cc.c.Config(ctx)
	if err != nil {
		return nil, nil, "", cc.refused(err)
	}
	path, err := ledgerPath(*cc.ledger, cc.server, cc.tok)
	if err != nil {
		return nil, nil, "", err
	}
	ledger, err := checkOnDevice(path, cc.server, cfg)
	if client.IsWeakened(err) {
		return nil, nil, "", deviceRefusal(cc.out, *cc.jsonOut, "collection_changed", err, nil)
	}
	if err != nil {
		return nil, nil, "", err
	}
	return cfg, ledger, path, nil
}

// prepareReport makes her report (ID id, or a fresh one): randomized on
// this device in local mode, her ratings as entered in central mode.
func (cc *clientCmd) prepareReport(cfg *api.Config, mine client.Ratings, id string) (api.Report, error) {
	if cfg.Mode == api.ModeCentral {
		fmt.Fprintln(os.Stderr, "client: this server runs in central mode: your ratings are sent as they are to a curator you trust; each release is charged to your budget.")
	}
	if id == "" {
		id = client.NewReportID()
	}
	rep, outside, err := client.Randomize(cfg, mine, noise.Secure(), id)
	if err != nil {
		return api.Report{}, err
	}
	if outside > 0 {
		fmt.Fprintf(os.Stderr, "client: %d of your ratings are of items outside the server's catalogue and are not reported\n", outside)
	}
	return rep, nil
}

// printSubmitted prints the server's acknowledgement in the collection's
// terms, and the device ledger's own count beside it.
func (cc *clientCmd) printSubmitted(cfg *api.Config, ack api.Ack, replayed bool, ledger *client.Ledger) error {
	var disagree error
	if ledger != nil {
		if disagree = ledger.Compare(api.Status{Spent: ack.Spent, Budget: ack.Budget}); disagree != nil {
			fmt.Fprintln(os.Stderr, disagree)
		}
	}
	if *cc.jsonOut {
		res := map[string]any{"accepted": ack.Accepted, "id": ack.ID, "seq": ack.Seq, "epsilon": ack.Epsilon,
			"spent": ack.Spent, "remaining": ack.Remaining, "budget": ack.Budget, "unit": cfg.LedgerUnit, "replayed": replayed}
		addDeviceLedger(res, ledger, disagree)
		return writeJSON(cc.out, res)
	}
	what := "accepted"
	if replayed {
		what = "was already stored (nothing charged now)"
	}
	if cfg.Mode == api.ModeCentral {
		b, err := client.BudgetOf(cfg, ack.Spent, ack.Budget)
		if err != nil {
			return err
		}
		fmt.Fprintf(cc.out, "Report %s %s: your ratings, as you entered them, are with the operator (central mode). A report costs nothing; each release the operator publishes from everyone's ratings is charged to your budget. Spent so far: %s.\n",
			ack.ID, what, b)
	} else {
		fmt.Fprintf(cc.out, "Report %s %s: ε = %s; you have spent %s of your budget %s (%s remaining).\n", ack.ID, what, num(ack.Epsilon), num(ack.Spent), num(ack.Budget), num(ack.Remaining))
	}
	if ledger != nil {
		fmt.Fprintf(cc.out, "This device's own count: ε = %s of %s sent (%s remaining).\n", num(ledger.Spent()), num(ledger.Budget), num(ledger.Remaining()))
	}
	return nil
}

// clientStatus prints her ledger at the server, with the device's own
// count beside it (local mode).
func clientStatus(ctx context.Context, cc *clientCmd) error {
	if err := cc.parseAuthed(); err != nil {
		return err
	}
	st, err := cc.c.Status(ctx)
	if err != nil {
		return cc.refused(err)
	}
	ledger, disagree, err := cc.deviceCount(st)
	if err != nil {
		return err
	}
	if *cc.jsonOut {
		res := map[string]any{"user": st.User, "spent": st.Spent, "remaining": st.Remaining, "budget": st.Budget, "reports": st.Reports, "unit": st.Unit}
		if st.PeriodStart != nil {
			res["period_start"] = st.PeriodStart
		}
		addDeviceLedger(res, ledger, disagree)
		return writeJSON(cc.out, res)
	}
	if err := cc.printStatus(ctx, st); err != nil {
		return err
	}
	if ledger != nil {
		fmt.Fprintf(cc.out, "This device's own count: %d reports, ε = %s of %s sent (%s remaining).\n", len(ledger.Reports), num(ledger.Spent()), num(ledger.Budget), num(ledger.Remaining()))
	}
	return nil
}

// deviceCount loads the device ledger (local mode; a central one only
// pins the collection) and compares it with the server's status st,
// warning on stderr where they disagree.
func (cc *clientCmd) deviceCount(st api.Status) (ledger *client.Ledger, disagree, err error) {
	path, err := ledgerPath(*cc.ledger, cc.server, cc.tok)
	if err != nil || path == "" {
		return nil, nil, err
	}
	if ledger, err = client.LoadLedger(path); err != nil {
		return nil, nil, err
	}
	if ledger == nil || (ledger.Collection != nil && ledger.Collection.Mode != api.ModeLocal) {
		return nil, nil, nil // pins only: no count to compare
	}
	disagree = ledger.Compare(st)
	if disagree != nil {
		fmt.Fprintln(os.Stderr, disagree)
	}
	return ledger, disagree, nil
}

// printStatus words her ledger in the unit her budget is stated in: ε in
// local mode; in central mode what the releases charged her (ε at the
// budget's δ, with ρ beside it).
func (cc *clientCmd) printStatus(ctx context.Context, st api.Status) error {
	period := ""
	if st.PeriodStart != nil {
		period = " in the budget period that began " + st.PeriodStart.Format(time.RFC3339)
	}
	if st.Unit != api.UnitRho {
		fmt.Fprintf(cc.out, "User %s: %d reports; spent ε = %s of %s%s (%s remaining).\n", st.User, st.Reports, num(st.Spent), num(st.Budget), period, num(st.Remaining))
		return nil
	}
	cfg, err := cc.c.Config(ctx)
	if err != nil {
		return cc.refused(err)
	}
	b, err := client.BudgetOf(cfg, st.Spent, st.Budget)
	if err != nil {
		return err
	}
	fmt.Fprintf(cc.out, "User %s: %d reports (central mode: your ratings as entered, held by the operator; reports cost nothing). Releases charged you %s%s.\n",
		st.User, st.Reports, b, period)
	return nil
}

// clientRecommend computes her top-k on this device from the latest
// public release and her own ratings (nothing is sent).
func clientRecommend(ctx context.Context, cc *clientCmd) error {
	ratings := cc.sfs.String("ratings", "", "your ratings file (stays on this device)")
	cc.sfs.StringVar(ratings, "data", "", "same as --ratings")
	k := cc.sfs.Int("k", 10, "how many items")
	if err := parse(cc.sfs, cc.args, false); err != nil {
		return err
	}
	if *ratings == "" {
		return usagef("recommend: --ratings FILE is required")
	}
	if *k < 1 {
		return usagef("recommend: -k must be ≥ 1")
	}
	mine, err := client.LoadRatings(*ratings)
	if err != nil {
		return err
	}
	rel, err := cc.c.LatestRelease(ctx)
	if err != nil {
		return cc.refused(err)
	}
	recs, err := client.Recommend(rel, mine, *k)
	if err != nil {
		return err
	}
	warnings, err := client.ReleaseWarnings(rel, *k)
	if err != nil {
		return err
	}
	if *cc.jsonOut {
		if warnings == nil {
			warnings = []release.Warning{}
		}
		return writeJSON(cc.out, map[string]any{"release": rel.ID, "method": rel.Method, "guarantee": rel.Guarantee, "recommendations": recs,
			"ranking": client.Ranks(rel), "warnings": warnings})
	}
	writeRecommendations(cc.out, rel, recs)
	fmt.Fprintf(cc.out, "Guarantee: %s\n", rel.GuaranteeText)
	return writeWarnings(cc.out, warnings)
}

// clientPublish (admin token) trains a release on the stored data and
// publishes it.
func clientPublish(ctx context.Context, cc *clientCmd) error {
	method := cc.sfs.String("method", "", "the method to train on the stored data (ldp-rr or ldp-laplace in local mode)")
	params := cc.sfs.String("params", "", "the method's parameters as a JSON object, e.g. '{\"max_rank\": 10}'")
	eps := cc.sfs.Float64("epsilon", 0, "the release's ε (central mode)")
	delta := cc.sfs.Float64("delta", defaultDelta, "the release's δ (central mode; the same default as train)")
	seed := cc.sfs.Uint64("seed", 0, "seed of the non-private randomness (0: random)")
	if err := cc.parseAuthed(); err != nil {
		return err
	}
	req := api.ReleaseRequest{Method: *method, Epsilon: *eps, Delta: *delta, Seed: *seed}
	if *params != "" {
		if err := json.Unmarshal([]byte(*params), &req.Params); err != nil {
			return usagef("--params: %v", err)
		}
	}
	res, err := cc.c.Publish(ctx, req)
	if err != nil {
		return cc.refused(err)
	}
	if *cc.jsonOut {
		v := map[string]any{"id": res.ID, "method": res.Release.Method, "reports": res.Reports, "users_charged": res.UsersCharged,
			"max_charge": res.MaxCharge, "unit": res.Unit, "seconds": res.Seconds, "guarantee": res.Release.Guarantee, "ledger": res.Release.Ledger,
			"warnings": publishWarnings(res)}
		if res.UsersSkipped > 0 {
			v["users_skipped"] = res.UsersSkipped
		}
		return writeJSON(cc.out, v)
	}
	fmt.Fprintf(cc.out, "Published release %d (%s) trained on %d reports in %.2f s.\n%s\nGuarantee: %s\n", res.ID, res.Release.Method, res.Reports, res.Seconds, res.Release.Ledger, res.Release.GuaranteeText)
	return writeWarnings(cc.out, publishWarnings(res))
}

// ledgerPath is the device ledger's file: the flag (or $PRIVREC_LEDGER),
// "none" for no ledger, else one file per server and token under
// $PRIVREC_LEDGER_DIR or the user's configuration directory.
func ledgerPath(flag, server, token string) (string, error) {
	switch flag {
	case "none":
		return "", nil
	case "":
	default:
		return flag, nil
	}
	if token == "" {
		return "", nil
	}
	dir := os.Getenv("PRIVREC_LEDGER_DIR")
	if dir == "" {
		cd, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("client: no place for the device ledger (%v): pass --ledger FILE, or --ledger none to go without one", err)
		}
		dir = filepath.Join(cd, "privrec", "ledgers")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("client: the device ledger's directory: %w", err)
	}
	h := sha256.Sum256([]byte(server + "\n" + token))
	return filepath.Join(dir, hex.EncodeToString(h[:12])+".json"), nil
}

// newDeviceLedger makes the device ledger at path, pinning cfg; an
// existing one is kept.
func newDeviceLedger(path, server string, cfg *api.Config) error {
	if l, err := client.LoadLedger(path); err != nil || l != nil {
		return err
	}
	l, err := client.NewLedger(server, cfg)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, 0o600, l.Write); err != nil {
		return fmt.Errorf("client: saving the device ledger: %w", err)
	}
	return nil
}

// checkOnDevice loads the device ledger at path (making it, pinning cfg,
// when missing) and checks cfg against the collection it pins; no path is
// no ledger.
func checkOnDevice(path, server string, cfg *api.Config) (*client.Ledger, error) {
	if path == "" {
		return nil, nil
	}
	l, err := client.LoadLedger(path)
	if err != nil {
		return nil, err
	}
	if l == nil {
		if l, err = client.NewLedger(server, cfg); err != nil {
			return nil, err
		}
	}
	if err := l.CheckConfig(server, cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// reserveOnDevice records rep in the device ledger (local mode) and saves
// the ledger at path before the report is sent; it refuses, sending
// nothing, when the device's own count would pass the budget. A central
// ledger records nothing (it pins the collection only; saved on first
// use).
func reserveOnDevice(l *client.Ledger, path, server string, cfg *api.Config, rep api.Report) error {
	if l == nil {
		return nil
	}
	if cfg.Mode == api.ModeLocal {
		if err := l.Reserve(server, rep.ID, rep.Epsilon); err != nil {
			return err
		}
	}
	if err := atomicfile.Write(path, 0o600, l.Write); err != nil {
		return fmt.Errorf("client: saving the device ledger before sending: %w", err)
	}
	return nil
}

// deviceRefusal reports a refusal made on the device (nothing was sent):
// exit 1; with --json, {"accepted": false, "code": code, "error": …} and
// the extra fields on stdout.
func deviceRefusal(out io.Writer, jsonOut bool, code string, err error, extra map[string]any) error {
	if !jsonOut {
		return fmt.Errorf("%w (nothing was sent)", err)
	}
	v := map[string]any{"accepted": false, "code": code, "error": err.Error()}
	for k, x := range extra {
		v[k] = x
	}
	if werr := writeJSON(out, v); werr != nil {
		return werr
	}
	fmt.Fprintf(os.Stderr, "privrec %s\n", err.Error())
	return exitError{1}
}

// addDeviceLedger adds the device ledger's account to a JSON answer.
func addDeviceLedger(res map[string]any, l *client.Ledger, disagree error) {
	if l == nil {
		return
	}
	res["device_spent"] = l.Spent()
	res["device_remaining"] = l.Remaining()
	res["device_budget"] = l.Budget
	if disagree != nil {
		res["ledger_disagreement"] = disagree.Error()
	}
}

func clientToken(tok, file string) (string, error) {
	if tok != "" {
		return tok, nil
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return strings.TrimSpace(os.Getenv("PRIVREC_TOKEN")), nil
}

func needToken(tok string) error {
	if tok == "" {
		return usagef("a token is required: --token T, --token-file FILE or $PRIVREC_TOKEN (from 'privrec client enroll')")
	}
	return nil
}

// clientErr reports a refusal: with --json the server's error object (and
// "accepted": false) on stdout; exit status 1 either way.
func clientErr(out io.Writer, jsonOut bool, err error) error {
	var e *api.Error
	if !errors.As(err, &e) {
		return err
	}
	if jsonOut {
		v := map[string]any{"accepted": false, "status": e.Status, "code": e.Code, "error": e.Message}
		if e.Field != "" {
			v["field"] = e.Field
		}
		for k, p := range map[string]*float64{"spent": e.Spent, "remaining": e.Remaining, "budget": e.Budget} {
			if p != nil {
				v[k] = *p
			}
		}
		if werr := writeJSON(out, v); werr != nil {
			return werr
		}
		fmt.Fprintf(os.Stderr, "privrec client: %s\n", e.Message)
		return exitError{1}
	}
	return fmt.Errorf("refused: %s", e.Error())
}

// publishWarnings are a published release's warnings: the admin's (with
// the population it covered, central mode) where the server gave them,
// else the public release's.
func publishWarnings(res api.ReleaseResult) []release.Warning {
	ws := res.Warnings
	if ws == nil {
		ws = res.Release.Warnings
	}
	if ws == nil {
		ws = []release.Warning{}
	}
	return ws
}

// writeWarnings prints a release's warnings (release.Warnings), one
// "WARNING:" line each; nothing when there are none.
func writeWarnings(out io.Writer, ws []release.Warning) error {
	for _, w := range ws {
		if _, err := fmt.Fprintf(out, "WARNING: %s\n", w.Message); err != nil {
			return err
		}
	}
	return nil
}

// writeRecommendations prints her list: predicted ratings for a rating
// model; for a top-N model a ranking, its scores left out (they only
// order the items and are not ratings).
func writeRecommendations(out io.Writer, rel *api.Release, recs []model.Recommendation) {
	if client.Ranks(rel) {
		fmt.Fprintf(out, "Your top %d from release %d (%s), computed on this device — a ranking, best first (a top-N model ranks items; it predicts no ratings):\n", len(recs), rel.ID, rel.Method)
	} else {
		fmt.Fprintf(out, "Your top %d from release %d (%s), computed on this device, with predicted ratings:\n", len(recs), rel.ID, rel.Method)
	}
	writeList(out, !client.Ranks(rel), recs)
}

// writeList prints a list one item a line: with its predicted rating for
// a rating model (rated), as a bare ranking for a top-N model.
func writeList(out io.Writer, rated bool, recs []model.Recommendation) {
	for i, r := range recs {
		title := ""
		if r.Title != "" {
			title = "  " + r.Title
		}
		if rated {
			fmt.Fprintf(out, "%3d. %s%s  (predicted rating %.2f)\n", i+1, r.Item, title, r.Score)
		} else {
			fmt.Fprintf(out, "%3d. %s%s\n", i+1, r.Item, title)
		}
	}
}
