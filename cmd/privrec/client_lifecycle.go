package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/privrec/privrec/client"
)

// clientExport prints everything the server stores about the caller
// (GET /v1/me/export) as JSON.
func clientExport(ctx context.Context, c *client.Client, sfs *flag.FlagSet, args []string, jsonOut *bool, out io.Writer) error {
	if err := parse(sfs, args, false); err != nil {
		return err
	}
	if err := needToken(c.Token); err != nil {
		return err
	}
	ex, err := c.Export(ctx)
	if err != nil {
		return clientErr(out, *jsonOut, err)
	}
	return writeJSON(out, ex) // the export is JSON either way
}

// clientLeave deletes the caller at the server (DELETE /v1/me) after
// --yes: her reports, states and token; her ledger stays.
func clientLeave(ctx context.Context, c *client.Client, sfs *flag.FlagSet, args []string, jsonOut *bool, out io.Writer) error {
	yes := sfs.Bool("yes", false, "confirm: delete your reports and revoke your token at the server (cannot be undone)")
	if err := parse(sfs, args, false); err != nil {
		return err
	}
	if err := needToken(c.Token); err != nil {
		return err
	}
	if !*yes {
		return usagef("leave deletes your reports and revokes your token at the server, which cannot be undone: add --yes")
	}
	d, err := c.DeleteMe(ctx)
	if err != nil {
		return clientErr(out, *jsonOut, err)
	}
	if *jsonOut {
		return writeJSON(out, d)
	}
	fmt.Fprintf(out, "User %s left: %d reports and %d per-release states deleted, token revoked.\nKept: spent %g of %g (%s), %d reports counted. %s\n",
		d.User, d.ReportsDeleted, d.StatesDeleted, d.Retained.Spent, d.Retained.Budget, d.Retained.Unit, d.Retained.ReportsCounted, d.Retained.Why)
	return nil
}
