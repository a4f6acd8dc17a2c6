package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/service/api"
)

func init() {
	register(&command{name: "client", summary: "the reference client of privrec serve: enroll, submit (randomized on this device), status, recommend (computed on this device)", run: runClient})
}

const clientSynopsis = `
The reference client of 'privrec serve'. Commands:

  enroll                      enrol a new user; prints her ID and secret token
                              (shown once: keep it; the server stores only its hash)
  submit --ratings FILE       randomize her ratings on this device with the
                              server's published mechanism and ε (the same ldp
                              code as 'privrec collect') and submit the report;
                              the server debits her ledger; exits 1 when refused
  status                      her ledger: ε spent, ε remaining, reports
  recommend --ratings FILE    her top-k, computed here from the latest public
                              release and her own ratings (nothing is sent)
  publish --method NAME       (admin token) train a release on the stored data
                              and publish it

The token comes from --token, --token-file or $PRIVREC_TOKEN. A ratings file
holds one user's ratings: "item rating" per line (tab, comma or spaces), or
"user item rating" lines of one user; # comments. Before randomizing, the
client checks with its own code that the server's mechanism parameters give
the ε it publishes, and refuses otherwise.`

func runClient(ctx context.Context, args []string, out io.Writer) error {
	example := `  privrec client --server http://127.0.0.1:8080 enroll --json
  export PRIVREC_TOKEN=prt_…
  privrec client --server http://127.0.0.1:8080 submit --ratings mine.tsv --json
  privrec client --server http://127.0.0.1:8080 status --json
  privrec client --server http://127.0.0.1:8080 recommend --ratings mine.tsv -k 10`
	fs := newFlags("client --server URL [--token T] enroll|submit|status|recommend [flags]", clientSynopsis, example)
	server := fs.String("server", "", "the server's base URL, e.g. http://127.0.0.1:8080")
	token := fs.String("token", "", "the user's token (default: $PRIVREC_TOKEN)")
	tokenFile := fs.String("token-file", "", "file holding the user's token")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, true); err != nil {
		return err
	}
	if *server == "" {
		return usagef("--server URL is required")
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("a command is required: enroll, submit, status or recommend")
	}
	tok, err := clientToken(*token, *tokenFile)
	if err != nil {
		return err
	}
	c := client.New(*server, tok)
	sub, subArgs := rest[0], rest[1:]
	sfs := newFlags("client "+sub, clientSynopsis, example)
	sfs.BoolVar(jsonOut, "json", *jsonOut, "print JSON")
	switch sub {
	case "enroll":
		if err := parse(sfs, subArgs, false); err != nil {
			return err
		}
		e, err := c.Enroll(ctx)
		if err != nil {
			return clientErr(out, *jsonOut, err)
		}
		if *jsonOut {
			return writeJSON(out, e)
		}
		fmt.Fprintf(out, "Enrolled as %s.\nYour token (shown once; keep it secret — it is the only way to act as you):\n%s\n", e.User, e.Token)
		return nil
	case "submit":
		ratings := sfs.String("ratings", "", "your ratings file")
		id := sfs.String("id", "", "the report ID (default: a fresh random one; resubmitting an ID is never charged twice)")
		retries := sfs.Int("retries", 5, "attempts on a network failure or 5xx (the same report ID each time)")
		if err := parse(sfs, subArgs, false); err != nil {
			return err
		}
		if err := needToken(tok); err != nil {
			return err
		}
		if *ratings == "" {
			return usagef("submit: --ratings FILE is required")
		}
		mine, err := client.LoadRatings(*ratings)
		if err != nil {
			return err
		}
		cfg, err := c.Config(ctx)
		if err != nil {
			return clientErr(out, *jsonOut, err)
		}
		if cfg.Mode == api.ModeCentral {
			fmt.Fprintln(os.Stderr, "client: this server runs in central mode: your ratings are sent as they are to a curator you trust; each release is charged to your budget.")
		}
		rid := *id
		if rid == "" {
			rid = client.NewReportID()
		}
		rep, outside, err := client.Randomize(cfg, mine, noise.Secure(), rid)
		if err != nil {
			return err
		}
		if outside > 0 {
			fmt.Fprintf(os.Stderr, "client: %d of your ratings are of items outside the server's catalogue and are not reported\n", outside)
		}
		ack, replayed, err := c.SubmitRetry(ctx, rep, *retries)
		if err != nil {
			return clientErr(out, *jsonOut, err)
		}
		if *jsonOut {
			return writeJSON(out, map[string]any{"accepted": ack.Accepted, "id": ack.ID, "seq": ack.Seq, "epsilon": ack.Epsilon,
				"spent": ack.Spent, "remaining": ack.Remaining, "budget": ack.Budget, "replayed": replayed})
		}
		what := "accepted"
		if replayed {
			what = "was already stored (nothing charged now)"
		}
		fmt.Fprintf(out, "Report %s %s: ε = %g; you have spent %g of your budget %g (%g remaining).\n", ack.ID, what, ack.Epsilon, ack.Spent, ack.Budget, ack.Remaining)
		return nil
	case "status":
		if err := parse(sfs, subArgs, false); err != nil {
			return err
		}
		if err := needToken(tok); err != nil {
			return err
		}
		st, err := c.Status(ctx)
		if err != nil {
			return clientErr(out, *jsonOut, err)
		}
		if *jsonOut {
			return writeJSON(out, st)
		}
		fmt.Fprintf(out, "User %s: %d reports; spent ε = %g of %g (%g remaining).\n", st.User, st.Reports, st.Spent, st.Budget, st.Remaining)
		return nil
	case "recommend":
		ratings := sfs.String("ratings", "", "your ratings file (stays on this device)")
		k := sfs.Int("k", 10, "how many items")
		if err := parse(sfs, subArgs, false); err != nil {
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
		rel, err := c.LatestRelease(ctx)
		if err != nil {
			return clientErr(out, *jsonOut, err)
		}
		recs, err := client.Recommend(rel, mine, *k)
		if err != nil {
			return err
		}
		if *jsonOut {
			return writeJSON(out, map[string]any{"release": rel.ID, "method": rel.Method, "guarantee": rel.Guarantee, "recommendations": recs})
		}
		fmt.Fprintf(out, "Your top %d from release %d (%s), computed on this device:\n", len(recs), rel.ID, rel.Method)
		for i, r := range recs {
			title := ""
			if r.Title != "" {
				title = "  " + r.Title
			}
			fmt.Fprintf(out, "%3d. %s%s  (%.3f)\n", i+1, r.Item, title, r.Score)
		}
		fmt.Fprintf(out, "Guarantee: %s\n", rel.GuaranteeText)
		return nil
	case "publish":
		method := sfs.String("method", "", "the method to train on the stored data (ldp-rr or ldp-laplace in local mode)")
		params := sfs.String("params", "", "the method's parameters as a JSON object, e.g. '{\"max_rank\": 10}'")
		eps := sfs.Float64("epsilon", 0, "the release's ε (central mode)")
		delta := sfs.Float64("delta", 0, "the release's δ (central mode)")
		seed := sfs.Uint64("seed", 0, "seed of the non-private randomness (0: random)")
		if err := parse(sfs, subArgs, false); err != nil {
			return err
		}
		if err := needToken(tok); err != nil {
			return err
		}
		req := api.ReleaseRequest{Method: *method, Epsilon: *eps, Delta: *delta, Seed: *seed}
		if *params != "" {
			if err := json.Unmarshal([]byte(*params), &req.Params); err != nil {
				return usagef("--params: %v", err)
			}
		}
		res, err := c.Publish(ctx, req)
		if err != nil {
			return clientErr(out, *jsonOut, err)
		}
		if *jsonOut {
			return writeJSON(out, map[string]any{"id": res.ID, "method": res.Release.Method, "reports": res.Reports, "users_charged": res.UsersCharged,
				"max_charge": res.MaxCharge, "seconds": res.Seconds, "guarantee": res.Release.Guarantee, "ledger": res.Release.Ledger})
		}
		fmt.Fprintf(out, "Published release %d (%s) trained on %d reports in %.2f s.\n%s\nGuarantee: %s\n", res.ID, res.Release.Method, res.Reports, res.Seconds, res.Release.Ledger, res.Release.GuaranteeText)
		return nil
	}
	return usagef("unknown client command %q (want enroll, submit, status, recommend or publish)", sub)
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
