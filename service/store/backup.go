package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrBackupUnsupported: the database backs itself up with its own tools
// (PostgreSQL: pg_dump, or a replica).
var ErrBackupUnsupported = errors.New("store: this database is backed up with its own tools")

// Backup writes a consistent copy of an SQLite database to path (which
// must not exist) while the server keeps serving: VACUUM INTO on a
// connection of its own reads one snapshot (WAL lets the writer go on)
// and writes a compact database, which is then synced and renamed into
// place, so that path either holds a whole backup or does not exist.
// PostgreSQL: ErrBackupUnsupported (use pg_dump).
func (s *sqlStore) Backup(ctx context.Context, path string) error {
	if s.d.dollar {
		return fmt.Errorf("%w: run pg_dump (docs/SERVICE.md)", ErrBackupUnsupported)
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("store: backup: %s exists already; choose a new file", path)
	}
	var src string
	if err := s.r.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&src); err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	db, err := sql.Open("sqlite", src+"?_busy_timeout=10000")
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	defer db.Close()
	tmp := path + ".partial"
	os.Remove(tmp)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store: backup: VACUUM INTO %s: %w", tmp, err)
	}
	if err := syncRename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store: backup: %w", err)
	}
	return nil
}

// syncRename syncs tmp, renames it to path and syncs the directory.
func syncRename(tmp, path string) error {
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// RestoreSQLite puts a backup in place as the SQLite database file db,
// with the server stopped. The backup is verified first (it opens as a
// collection: integrity check, schema, recorded settings; its ledgers
// check); db must not exist unless replace, and any -wal and -shm files
// next to db are removed — a stale WAL replayed onto the restored file
// would damage it.
func RestoreSQLite(ctx context.Context, backup, db string, replace bool) error {
	if _, err := os.Stat(db); err == nil && !replace {
		return fmt.Errorf("store: restore: %s exists; stop the server and say so to replace it", db)
	}
	// The copy is verified, not the backup: opening a database may
	// migrate it, and the backup stays as it was.
	tmp := db + ".restoring"
	if err := copyFile(backup, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store: restore: %w", err)
	}
	fail := func(err error) error {
		for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
			os.Remove(f)
		}
		return fmt.Errorf("store: restore: the backup %s: %w", backup, err)
	}
	b, err := OpenSQLite(ctx, tmp, false)
	if err != nil {
		return fail(err)
	}
	if err := b.Check(ctx); err != nil {
		b.Close()
		return fail(err)
	}
	if err := b.Close(); err != nil {
		return fail(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(db + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fail(err)
		}
	}
	if err := syncRename(tmp, db); err != nil {
		return fail(err)
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// SQLitePath is the file of a sqlite: URL ("" for another kind).
func SQLitePath(url string) string {
	if !strings.HasPrefix(url, "sqlite:") {
		return ""
	}
	return strings.TrimPrefix(strings.TrimPrefix(url, "sqlite:"), "//")
}
