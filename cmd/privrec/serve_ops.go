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

func runServeToken(ctx context.Context, args []string, out io.Writer) error {
	usage := func() error {
		return usagef("serve token create|list|revoke|rotate (privrec serve token create --help)")
	}
	if len(args) == 0 {
		return usage()
	}
	sub, args := args[0], args[1:]
	if sub == "-h" || sub == "--help" || sub == "-help" {
		sub, args = "create|list|revoke|rotate", []string{"--help"}
	}
	fs := newFlags("serve token "+sub+" --db URL …", `Manage tokens without restarting the server; a running server learns of a
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
/v1/admin/users/UID/token (docs/SERVICE.md, "Tokens").`,
		"  privrec serve token create --db sqlite:privrec.db --label ops --expires 2160h --json")
	db := fs.String("db", "", "the collection's database: sqlite:FILE or postgres://…")
	label := fs.String("label", "", "create: what the token is for")
	expires := fs.Duration("expires", 0, "create, rotate: the token expires this long from now (0: never)")
	id := fs.String("id", "", "revoke: the admin token's ID (from list)")
	user := fs.String("user", "", "revoke, rotate: a user's ID")
	adminFile := fs.String("admin-token-file", "", "revoke: the file holding the admin token the server was started with")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *db == "" {
		return usagef("--db is required")
	}
	if *expires < 0 {
		return usagef("--expires must be positive (or 0: never), got %s", *expires)
	}
	st, err := openStore(ctx, *db, false)
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	expiry := int64(0)
	if *expires > 0 {
		expiry = now.Add(*expires).UnixMilli()
	}
	show := func(tokenID, tok string) error {
		if *jsonOut {
			v := map[string]any{"id": tokenID, "token": tok}
			if expiry > 0 {
				v["expires"] = time.UnixMilli(expiry).UTC()
			}
			return writeJSON(out, v)
		}
		fmt.Fprintf(out, "%s\n", tok)
		return nil
	}
	switch sub {
	case "create":
		t, tok, err := service.CreateAdminToken(ctx, st, *label, now.UnixMilli(), expiry)
		if err != nil {
			return err
		}
		return show(t.ID, tok)
	case "list":
		ts, err := st.AdminTokens(ctx)
		if err != nil {
			return err
		}
		rows := []api.AdminTokenInfo{}
		for _, t := range ts {
			rows = append(rows, service.AdminTokenInfo(t, now.UnixMilli()))
		}
		if *jsonOut {
			return writeJSON(out, map[string]any{"admin_tokens": rows})
		}
		for _, r := range rows {
			state := "valid"
			switch {
			case r.Revoked != nil:
				state = "revoked " + r.Revoked.Format(time.RFC3339)
			case !r.Valid:
				state = "expired " + r.Expires.Format(time.RFC3339)
			case r.Expires != nil:
				state = "valid until " + r.Expires.Format(time.RFC3339)
			}
			fmt.Fprintf(out, "%s\t%s\tcreated %s\t%s\n", r.ID, r.Label, r.Created.Format(time.RFC3339), state)
		}
		return nil
	case "revoke":
		n := 0
		for _, set := range []bool{*id != "", *user != "", *adminFile != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			return usagef("revoke takes one of --id, --user, --admin-token-file")
		}
		switch {
		case *id != "":
			err = st.RevokeAdminToken(ctx, *id, now.UnixMilli())
		case *user != "":
			err = st.RevokeUserToken(ctx, *user, now.UnixMilli())
		default:
			tok, terr := adminToken(*adminFile)
			if terr != nil {
				return terr
			}
			_, err = service.RevokeAdminHash(ctx, st, service.TokenHash(tok), now.UnixMilli())
		}
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no such token or user")
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "revoked; a running server refuses it within 5 s")
		return nil
	case "rotate":
		if *user == "" {
			return usagef("rotate takes --user UID (an admin token is rotated by create, then revoke)")
		}
		tok := service.NewToken("prt_")
		if err := st.SetUserToken(ctx, *user, service.TokenHash(tok), expiry); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no user %q", *user)
			}
			return err
		}
		return show(*user, tok)
	}
	return usage()
}
