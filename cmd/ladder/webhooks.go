package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ladderhq/ladder"
)

// cmdWebhooks lists event deliveries and sends one again, against a
// server, with a human or admin key.
func cmdWebhooks(ctx context.Context, e env, args []string) error {
	const usage = "usage: ladder webhooks list|redeliver [flags]\n\nRun 'ladder webhooks SUBCOMMAND -h' for a subcommand's flags."
	fs, err := subcommandFlags(e, "webhooks", args, usage)
	if err != nil {
		return err
	}
	rf := addRemoteFlags(fs, e)
	workspace := fs.String("workspace", "", "workspace (required with an all-workspaces admin key)")
	switch args[0] {
	case "list":
		status := fs.String("status", "", "pending, delivered or dead (default: all)")
		endpoint := fs.String("endpoint", "", "a webhook's name (default: all)")
		eventID := fs.String("event", "", "one event's id")
		cursor := fs.String("cursor", "", "next_cursor of the previous page")
		limit := fs.Int("limit", 50, "page size (1–500)")
		if _, err := parseInterleaved(e, fs, args[1:]); err != nil {
			return err
		}
		c, err := rf.client()
		if err != nil {
			return err
		}
		page, err := c.Deliveries(ctx, ladder.DeliveryListRequest{Workspace: *workspace, Status: *status, Endpoint: *endpoint, EventID: *eventID, Cursor: *cursor, Limit: *limit})
		if err != nil {
			return refusal(err)
		}
		if *rf.json {
			return printJSON(e.stdout, page)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DELIVERY\tEVENT\tTYPE\tENDPOINT\tSTATUS\tTRIES\tNEXT\tLAST ERROR")
		for _, d := range page.Deliveries {
			next := "-"
			if d.Status == ladder.DeliveryPending {
				next = d.NextAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.EventID, d.EventType, d.Endpoint, d.Status, d.Attempts, next, d.LastError)
		}
		tw.Flush()
		if page.NextCursor != "" {
			fmt.Fprintf(e.stdout, "\nMore: ladder webhooks list --status %q --limit %d --cursor %s\n", *status, *limit, page.NextCursor)
		}
		return nil
	case "redeliver":
		pos, err := parseInterleaved(e, fs, args[1:])
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return exitError{code: 3, msg: "usage: ladder webhooks redeliver DELIVERY_ID"}
		}
		c, err := rf.client()
		if err != nil {
			return err
		}
		d, err := c.Redeliver(ctx, *workspace, pos[0])
		if err != nil {
			return refusal(err)
		}
		if *rf.json {
			return printJSON(e.stdout, d)
		}
		fmt.Fprintf(e.stdout, "Delivery %s of event %s to %s is pending again; it is sent within seconds.\n", d.ID, d.EventID, d.Endpoint)
		return nil
	}
	return exitError{code: 3, msg: usage}
}
