package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// The operator's commands on a collection's database: backup, restore,
// tokens. They work beside a running server (SQLite takes one writer at
// a time and waits for it; PostgreSQL serializes rows).

func runServeBackup(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("serve backup --db sqlite:FILE --out FILE [--json]",
		"Back up an SQLite collection while the server runs: a consistent snapshot (SQLite's VACUUM INTO on a connection of its own; the server keeps writing) written to a new file, synced, then opened and checked — integrity, schema, every ledger against its reports and charges — and its counts printed. Restore it with privrec serve restore. PostgreSQL: use pg_dump (docs/SERVICE.md).",
		"  privrec serve backup --db sqlite:privrec.db --out backups/privrec-2026-11-26.db --json")
	db := fs.String("db", "", "the collection's database: sqlite:FILE")
	outPath := fs.String("out", "", "the backup file to write (must not exist)")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *db == "" || *outPath == "" {
		return usagef("--db and --out are required")
	}
	st, err := openStore(ctx, *db, false)
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	if err := st.Backup(ctx, *outPath); err != nil {
		if errors.Is(err, store.ErrBackupUnsupported) {
			return fmt.Errorf("%w: pg_dump --format=custom --file privrec.dump 'postgres://…' backs PostgreSQL up", err)
		}
		return err
	}
	took := time.Since(start)
	b, err := store.Open(ctx, "sqlite:"+*outPath)
	if err != nil {
		return fmt.Errorf("the backup %s does not open: %w", *outPath, err)
	}
	defer b.Close()
	if err := b.Check(ctx); err != nil {
		return fmt.Errorf("the backup %s: %w", *outPath, err)
	}
	s, err := b.Stats(ctx)
	if err != nil {
		return err
	}
	fi, err := os.Stat(*outPath)
	if err != nil {
		return err
	}
	if *jsonOut {
		return writeJSON(out, map[string]any{"out": *outPath, "bytes": fi.Size(), "seconds": took.Seconds(),
			"users": s.Users, "reports": s.Reports, "releases": s.Releases, "ledger_ok": true})
	}
	fmt.Fprintf(out, "backed up to %s (%d bytes, %.2f s): %d users, %d reports, %d releases; integrity and ledgers checked\n",
		*outPath, fi.Size(), took.Seconds(), s.Users, s.Reports, s.Releases)
	return nil
}

func runServeRestore(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("serve restore --backup FILE --db sqlite:FILE [--replace]",
		"Put a backup made by privrec serve backup in place as an SQLite collection's database, with the server stopped. The backup is copied, the copy opened and checked (integrity, schema, ledgers), any -wal and -shm files of the old database removed (a stale WAL replayed onto the restored file would damage it), and the copy renamed into place. Reports acknowledged after the backup was made are not in it: their clients' devices hold them and resubmit (docs/SERVICE.md).",
		"  privrec serve restore --backup backups/privrec-2026-11-26.db --db sqlite:privrec.db --replace")
	backup := fs.String("backup", "", "the backup file")
	db := fs.String("db", "", "the database to restore: sqlite:FILE")
	replace := fs.Bool("replace", false, "replace an existing database file (stop the server first)")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	path := store.SQLitePath(*db)
	if *backup == "" || path == "" {
		return usagef("--backup FILE and --db sqlite:FILE are required (PostgreSQL: pg_restore)")
	}
	if err := store.RestoreSQLite(ctx, *backup, path, *replace); err != nil {
		return err
	}
	fmt.Fprintf(out, "restored %s from %s; start the server on it without --create\n", path, *backup)
	return nil
}

// tokenArgs are serve token's subcommand and flags.
type tokenArgs struct {
	sub, db, label, id, user, adminFile string
	expires                             time.Duration
	json                                bool
}

func runServeToken(ctx context.Context, args []string, out io.Writer) error {
	a, err := parseTokenArgs(args)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, a.db, false)
	if err != nil {
		return err
	}
	defer st.Close()
	op := &tokenOp{tokenArgs: a, st: st, now: time.Now(), out: out}
	if a.expires > 0 {
		op.expiry = op.now.Add(a.expires).UnixMilli()
	}
	switch a.sub {
	case "create":
		return op.create(ctx)
	case "list":
		return op.list(ctx)
	case "revoke":
		return op.revoke(ctx)
	case "rotate":
		return op.rotate(ctx)
	}
	return tokenUsage()
}

func tokenUsage() error {
	return usagef("serve token create|list|revoke|rotate (privrec serve token create --help)")
}

// parseTokenArgs reads serve token's subcommand and flags.
func parseTokenArgs(args []string) (tokenArgs, error) {
	var a tokenArgs
	if len(args) == 0 {
		return a, tokenUsage()
	}
	sub, args := args[0], args[1:]
	if sub == "-h" || sub == "--help" || sub == "-help" {
		sub, args = "create|list|revoke|rotate", []string{"--help"}
	}
	fs := newFlags("serve token "+sub+" --db URL …", serveTokenSynopsis,
		"  privrec serve token create --db sqlite:privrec.db --label ops --expires 2160h --json")
	fs.StringVar(&a.db, "db", "", "the collection's database: sqlite:FILE or postgres://…")
	fs.StringVar(&a.label, "label", "", "create: what the token is for")
	fs.DurationVar(&a.expires, "expires", 0, "create, rotate: the token expires this long from now (0: never)")
	fs.StringVar(&a.id, "id", "", "revoke: the admin token's ID (from list)")
	fs.StringVar(&a.user, "user", "", "revoke, rotate: a user's ID")
	fs.StringVar(&a.adminFile, "admin-token-file", "", "revoke: the file holding the admin token the server was started with")
	fs.BoolVar(&a.json, "json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return a, err
	}
	a.sub = sub
	if a.db == "" {
		return a, usagef("--db is required")
	}
	if a.expires < 0 {
		return a, usagef("--expires must be positive (or 0: never), got %s", a.expires)
	}
	return a, nil
}

const serveTokenSynopsis = `Manage tokens without restarting the server; a running server learns of a
change within 5 s.

  serve token create --db URL [--label L] [--expires 720h]
        a new admin token, printed once (the database keeps its SHA-256)
  serve token list --db URL                admin tokens: id, label, created, expires, revoked
  serve token revoke --db URL --id ID      revoke an admin token
  serve token revoke --db URL --admin-token-file FILE
        revoke the token the server was started with (--admin-token-file
        or PRIVREC_ADMIN_TOKEN): record it revoked
  serve token revoke --db URL --user UID   revoke a user's token (her
        reports and ledger stay; rotate to give her a new one)
  serve token rotate --db URL --user UID [--expires 720h]
        a new token for a user (printed once); her old one stops working

Rotating the admin token: create a new one, switch to it, revoke the old.
The same is offered over HTTP to an admin token holder, no database access
needed: GET/POST /v1/admin/tokens, DELETE /v1/admin/tokens/ID, POST
/v1/admin/token (rotate the caller's own), POST/DELETE
/v1/admin/users/UID/token (docs/SERVICE.md, "Tokens").`

// tokenOp is one serve token subcommand on an open store.
type tokenOp struct {
	tokenArgs
	st     store.Store
	now    time.Time
	expiry int64 // Unix ms; 0: never
	out    io.Writer
}

// show prints a new token (once: the database keeps only its hash).
func (o *tokenOp) show(tokenID, tok string) error {
	if o.json {
		v := map[string]any{"id": tokenID, "token": tok}
		if o.expiry > 0 {
			v["expires"] = time.UnixMilli(o.expiry).UTC()
		}
		return writeJSON(o.out, v)
	}
	fmt.Fprintf(o.out, "%s\n", tok)
	return nil
}

func (o *tokenOp) create(ctx context.Context) error {
	t, tok, err := service.CreateAdminToken(ctx, o.st, o.label, o.now.UnixMilli(), o.expiry)
	if err != nil {
		return err
	}
	return o.show(t.ID, tok)
}

func (o *tokenOp) list(ctx context.Context) error {
	ts, err := o.st.AdminTokens(ctx)
	if err != nil {
		return err
	}
	rows := []api.AdminTokenInfo{}
	for _, t := range ts {
		rows = append(rows, service.AdminTokenInfo(t, o.now.UnixMilli()))
	}
	if o.json {
		return writeJSON(o.out, map[string]any{"admin_tokens": rows})
	}
	for _, r := range rows {
		fmt.Fprintf(o.out, "%s\t%s\tcreated %s\t%s\n", r.ID, r.Label, r.Created.Format(time.RFC3339), tokenState(r))
	}
	return nil
}

// tokenState says whether an admin token is valid, expired or revoked.
func tokenState(r api.AdminTokenInfo) string {
	switch {
	case r.Revoked != nil:
		return "revoked " + r.Revoked.Format(time.RFC3339)
	case !r.Valid:
		return "expired " + r.Expires.Format(time.RFC3339)
	case r.Expires != nil:
		return "valid until " + r.Expires.Format(time.RFC3339)
	}
	return "valid"
}

func (o *tokenOp) revoke(ctx context.Context) error {
	n := 0
	for _, set := range []bool{o.id != "", o.user != "", o.adminFile != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return usagef("revoke takes one of --id, --user, --admin-token-file")
	}
	var err error
	switch {
	case o.id != "":
		err = o.st.RevokeAdminToken(ctx, o.id, o.now.UnixMilli())
	case o.user != "":
		err = o.st.RevokeUserToken(ctx, o.user, o.now.UnixMilli())
	default:
		tok, terr := adminToken(o.adminFile)
		if terr != nil {
			return terr
		}
		_, err = service.RevokeAdminHash(ctx, o.st, service.TokenHash(tok), o.now.UnixMilli())
	}
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no such token or user")
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(o.out, "revoked; a running server refuses it within 5 s")
	return nil
}

func (o *tokenOp) rotate(ctx context.Context) error {
	if o.user == "" {
		return usagef("rotate takes --user UID (an admin token is rotated by create, then revoke)")
	}
	tok := service.NewToken("prt_")
	if err := o.st.SetUserToken(ctx, o.user, service.TokenHash(tok), o.expiry); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no user %q", o.user)
		}
		return err
	}
	return o.show(o.user, tok)
}
