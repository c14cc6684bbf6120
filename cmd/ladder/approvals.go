package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ladderhq/ladder"
)

// cmdApprovals lists, approves, rejects and retries approval requests
// against a server, with a human key.
func cmdApprovals(ctx context.Context, e env, args []string) error {
	const usage = "usage: ladder approvals list|approve|reject|retry [flags]\n\nRun 'ladder approvals SUBCOMMAND -h' for a subcommand's flags."
	fs, err := subcommandFlags(e, "approvals", args, usage)
	if err != nil {
		return err
	}
	rf := addRemoteFlags(fs, e)
	switch args[0] {
	case "list":
		status := fs.String("status", "pending", "pending, approved, rejected, expired, executing, shadow, or \"\" for all")
		cursor := fs.String("cursor", "", "next_cursor of the previous page")
		limit := fs.Int("limit", 50, "page size (1–500)")
		if _, err := parseInterleaved(e, fs, args[1:]); err != nil {
			return err
		}
		c, err := rf.client()
		if err != nil {
			return err
		}
		page, err := c.Approvals(ctx, *status, *cursor, *limit)
		if err != nil {
			return refusal(err)
		}
		if *rf.json {
			return printJSON(e.stdout, page)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCAPABILITY\tKIND\tSTATUS\tREQUESTED\tEXPIRES\tPROPOSED\tEXECUTED")
		for _, a := range page.Approvals {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Capability, a.Kind, a.Status, a.CreatedAt.Format(time.RFC3339), a.ExpiresAt.Format(time.RFC3339), a.Payload, executedPayload(a.Approval))
		}
		tw.Flush()
		if page.NextCursor != "" {
			// The next page is of the same list: repeat the filter and size.
			fmt.Fprintf(e.stdout, "\nMore: ladder approvals list --status %q --limit %d --cursor %s\n", *status, *limit, page.NextCursor)
		}
		return nil
	case "approve", "reject", "retry":
		payload := fs.String("payload", "", "approve: the edited payload as JSON (edit, then approve)")
		reason := fs.String("reason", "", "why (required to reject)")
		pos, err := parseInterleaved(e, fs, args[1:])
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return exitError{code: 3, msg: fmt.Sprintf("usage: ladder approvals %s APPROVAL_ID [--reason TEXT]", args[0])}
		}
		c, err := rf.client()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if *payload != "" {
			if !json.Valid([]byte(*payload)) {
				return exitError{code: 3, msg: "--payload is not valid JSON"}
			}
			raw = json.RawMessage(*payload)
		}
		var out any
		switch args[0] {
		case "approve":
			a, err := c.Approve(ctx, pos[0], raw, *reason)
			if err != nil {
				return refusal(err)
			}
			out = a
			if !*rf.json {
				fmt.Fprintf(e.stdout, "Approved %s (%s): it ran. Result: %s\n", a.ID, a.Capability, a.Result)
			}
		case "reject":
			if *reason == "" {
				return exitError{code: 3, msg: "ladder approvals reject: --reason is required"}
			}
			a, err := c.Reject(ctx, pos[0], *reason)
			if err != nil {
				return refusal(err)
			}
			out = a
			if !*rf.json {
				fmt.Fprintf(e.stdout, "Rejected %s (%s). Nothing ran.\n", a.ID, a.Capability)
			}
		default:
			a, err := c.Retry(ctx, pos[0])
			if err != nil {
				return refusal(err)
			}
			out = a
			if !*rf.json {
				fmt.Fprintf(e.stdout, "Retried %s (%s): it ran. Result: %s\n", a.ID, a.Capability, a.Result)
			}
		}
		if *rf.json {
			return printJSON(e.stdout, out)
		}
		return nil
	}
	return exitError{code: 3, msg: fmt.Sprintf("ladder approvals: unknown subcommand %q; use list, approve, reject or retry", args[0])}
}

// executedPayload says what ran for an approval: the edited payload when a
// person edited it, "as proposed" when it ran unedited, and what is
// pending otherwise, so the list shows an edit beside the proposal.
func executedPayload(a ladder.Approval) string {
	switch {
	case a.ExecutedAt != nil && len(a.EditedPayload) > 0:
		return string(a.EditedPayload)
	case a.ExecutedAt != nil:
		return "as proposed"
	case len(a.EditedPayload) > 0:
		return "not run yet; edited to " + string(a.EditedPayload)
	default:
		return "—"
	}
}
