package main

import (
	"context"
	"fmt"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service/api"
)

// clientExport prints everything the server stores about the caller
// (GET /v1/me/export) as JSON.
func clientExport(ctx context.Context, cc *clientCmd) error {
	if err := cc.parseAuthed(); err != nil {
		return err
	}
	ex, err := cc.c.Export(ctx)
	if err != nil {
		return cc.refused(err)
	}
	return writeJSON(cc.out, ex) // the export is JSON either way
}

// clientLeave deletes the caller at the server (DELETE /v1/me) after
// --yes: her reports, states and token; her ledger stays.
func clientLeave(ctx context.Context, cc *clientCmd) error {
	yes := cc.sfs.Bool("yes", false, "confirm: delete your reports and revoke your token at the server (cannot be undone)")
	if err := cc.parseAuthed(); err != nil {
		return err
	}
	if !*yes {
		return usagef("leave deletes your reports and revokes your token at the server, which cannot be undone: add --yes")
	}
	d, err := cc.c.DeleteMe(ctx)
	if err != nil {
		return cc.refused(err)
	}
	if *cc.jsonOut {
		return writeJSON(cc.out, d)
	}
	fmt.Fprintf(cc.out, "User %s left: %d reports and %d per-release states deleted, token revoked.\nKept: spent %s, %d reports counted. %s\n",
		d.User, d.ReportsDeleted, d.StatesDeleted, keptBudget(ctx, cc.c, d.Retained), d.Retained.ReportsCounted, d.Retained.Why)
	return nil
}

// keptBudget words what a deleted user spent in the unit her budget is
// stated in (client.BudgetOf: ε, with ρ as a detail in central mode); the
// ledger's own unit if the configuration cannot be read.
func keptBudget(ctx context.Context, c *client.Client, r api.Retained) string {
	if r.Unit == api.UnitRho {
		if cfg, err := c.Config(ctx); err == nil {
			if b, err := client.BudgetOf(cfg, r.Spent, r.Budget); err == nil {
				return b.String()
			}
		}
		return fmt.Sprintf("ρ = %s of ρ = %s (zCDP)", num(r.Spent), num(r.Budget))
	}
	return fmt.Sprintf("ε = %s of ε = %s", num(r.Spent), num(r.Budget))
}
