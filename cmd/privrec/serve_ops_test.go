package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/store"
)

// runErr runs privrec and returns the exit code and what it printed on
// stderr.
func runErr(args ...string) (int, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, errb.String()
}

// TestServeOps: explicit creation (serve refuses a missing file without
// --create and an existing collection with it), serve backup and serve
// restore round-trip a collection with its counts and ledgers, and serve
// token creates, lists, revokes and rotates tokens in the database.
func TestServeOps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	items := filepath.Join(dir, "items.txt")
	must(t, os.WriteFile(items, []byte("a\nb\nc\n"), 0o644))
	serveArgs := func(db string, extra ...string) []string {
		return append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0", "--items", items, "--mechanism", "rr",
			"--scale", "1:5", "--epsilon", "1", "--budget", "10", "--web=false", "--log-level", "error"}, extra...)
	}
	// No collection at a mistyped path: refused, nothing created.
	typo := filepath.Join(dir, "typo.db")
	if code, msg := runErr(serveArgs("sqlite:" + typo)...); code != 1 || !strings.Contains(msg, "no collection here") || !strings.Contains(msg, "--create") {
		t.Fatalf("serve on a missing file: exit %d: %s", code, msg)
	}
	if _, err := os.Stat(typo); err == nil {
		t.Fatal("serve without --create made a database file")
	}
	// A collection with users and reports, made as serve --create would.
	path := filepath.Join(dir, "live.db")
	db := "sqlite:" + path
	st, err := store.Create(ctx, db)
	must(t, err)
	cat, err := model.NewCatalogue([]string{"a", "b", "c"}, nil)
	must(t, err)
	srv, err := service.New(ctx, st, service.Options{Catalogue: cat, Mechanism: "rr", Epsilon: 1, Budget: 10, Scale: model.Range{Min: 1, Max: 5}})
	must(t, err)
	srv.Close()
	must(t, st.Update(ctx, func(tx store.Tx) error {
		for u := range 3 {
			id := fmt.Sprintf("u%d", u)
			if err := tx.CreateUser(ctx, store.NewUser{ID: id, TokenHash: service.TokenHash("tok-" + id), Budget: 10 * store.Nano, CreatedMS: 1}); err != nil {
				return err
			}
			for k := range 4 {
				if _, err := tx.Submit(ctx, store.Submission{User: id, ClientID: fmt.Sprint(k), BodyHash: []byte{byte(k)}, Charge: store.Nano, Values: []byte("[0,0,0]"), Received: 1}); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	st.Close()
	if code, msg := runErr(serveArgs(db, "--create")...); code != 1 || !strings.Contains(msg, "already exists") || !strings.Contains(msg, "drop --create") {
		t.Fatalf("serve --create over a collection: exit %d: %s", code, msg)
	}
	// Backup, restore, stats.
	backup := filepath.Join(dir, "backup.db")
	code, out := runCmd(t, "serve", "backup", "--db", db, "--out", backup, "--json")
	if b := decodeJSON(t, out); code != 0 || b["reports"] != float64(12) || b["users"] != float64(3) || b["ledger_ok"] != true {
		t.Fatalf("serve backup: %d %s", code, out)
	}
	if code, _ := runErr("serve", "backup", "--db", db, "--out", backup); code == 0 {
		t.Fatal("a backup over an existing file succeeded")
	}
	restored := "sqlite:" + filepath.Join(dir, "restored.db")
	if code, out := runCmd(t, "serve", "restore", "--backup", backup, "--db", restored); code != 0 {
		t.Fatalf("serve restore: %d %s", code, out)
	}
	code, out = runCmd(t, "serve", "stats", "--db", restored, "--json")
	if s := decodeJSON(t, out); code != 0 || s["reports"] != float64(12) || s["ledger_ok"] != true || s["schema_version"] != float64(store.SchemaVersion()) || s["collection_version"] != float64(1) {
		t.Fatalf("stats of the restored collection: %d %s", code, out)
	}
	// Tokens.
	code, out = runCmd(t, "serve", "token", "create", "--db", db, "--label", "ops", "--expires", "720h", "--json")
	tok := decodeJSON(t, out)
	if code != 0 || !strings.HasPrefix(fmt.Sprint(tok["token"]), "pra_") || tok["expires"] == nil {
		t.Fatalf("token create: %d %s", code, out)
	}
	code, out = runCmd(t, "serve", "token", "list", "--db", db, "--json")
	if code != 0 || !strings.Contains(out, `"valid": true`) || strings.Contains(out, fmt.Sprint(tok["token"])) {
		t.Fatalf("token list (must not show the token): %d %s", code, out)
	}
	if code, out := runCmd(t, "serve", "token", "revoke", "--db", db, "--id", fmt.Sprint(tok["id"])); code != 0 {
		t.Fatalf("token revoke: %d %s", code, out)
	}
	code, out = runCmd(t, "serve", "token", "list", "--db", db, "--json")
	if code != 0 || !strings.Contains(out, `"valid": false`) || !strings.Contains(out, `"revoked"`) {
		t.Fatalf("token list after revoking: %d %s", code, out)
	}
	code, out = runCmd(t, "serve", "token", "rotate", "--db", db, "--user", "u1", "--json")
	rot := decodeJSON(t, out)
	if code != 0 {
		t.Fatalf("token rotate: %d %s", code, out)
	}
	st, err = store.Open(ctx, db)
	must(t, err)
	defer st.Close()
	if u, err := st.UserByToken(ctx, service.TokenHash(fmt.Sprint(rot["token"]))); err != nil || u.ID != "u1" {
		t.Fatalf("the rotated token: %+v, %v", u, err)
	}
	if _, err := st.UserByToken(ctx, service.TokenHash("tok-u1")); err != store.ErrNotFound {
		t.Fatalf("the old token after rotation: %v", err)
	}
	if code, msg := runErr("serve", "token", "revoke", "--db", db, "--user", "nobody"); code != 1 || !strings.Contains(msg, "no such") {
		t.Fatalf("revoking an unknown user's token: %d %s", code, msg)
	}
}
