package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/ladderhq/ladder"
)

// toolDefinitions is the data of an AuditToolDefinitions record.
type toolDefinitions struct {
	Hashes map[string]string `json:"hashes"` // capability id → hash
}

// hashedDefinition is what a capability's hash covers: everything an agent
// reads about the tool or that decides what calling it does. Headers stay
// out, as they may hold credentials; so does the timeout.
type hashedDefinition struct {
	Name        string                 `json:"name"`
	Title       string                 `json:"title"`
	Description string                 `json:"description"`
	Payload     map[string]any         `json:"payload_schema"`
	ScopeFields []string               `json:"scope_fields"`
	HumanGate   bool                   `json:"human_gate"`
	ReadOnly    bool                   `json:"read_only"`
	Served      bool                   `json:"served"`
	Step        string                 `json:"step"`
	Gate        *ladder.CapabilityGate `json:"gate"`
	Executor    hashedExecutor         `json:"executor"`
}

type hashedExecutor struct {
	Kind string `json:"kind"`
	URL  string `json:"url"`
	Tool string `json:"tool"`
}

// DefinitionHash returns the hex SHA-256 of c's definition as canonical
// JSON: its id, title, description, payload schema, scope fields, human
// gate, read-only and served flags, step, gate and executor kind, URL and
// tool.
func DefinitionHash(c ladder.Capability) (string, error) {
	raw, err := ladder.CanonicalJSON(hashedDefinition{
		Name: c.ID, Title: c.Title, Description: c.Description, Payload: c.Payload, ScopeFields: c.ScopeFields,
		HumanGate: c.HumanGate, ReadOnly: c.ReadOnly, Served: c.Served, Step: c.Step, Gate: c.Gate,
		Executor: hashedExecutor{Kind: c.Executor.Kind, URL: c.Executor.URL, Tool: c.Executor.Tool},
	})
	if err != nil {
		return "", fmt.Errorf("hash capability %s: %w", c.ID, err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// CheckToolDefinitions compares the hash of every declared capability with
// the hashes the previous start recorded in the audit log, so that a changed
// tool definition (a poisoned description, a new executor URL) is never
// silent. For each capability that changed, appeared or disappeared it logs
// a warning, calls count (if not nil) and appends an AuditToolDefinitionChanged
// record with the old and new hash; then it appends, for every workspace,
// an AuditToolDefinitions record holding the current hashes, which the next
// start compares against. A workspace with no earlier record gets its first
// record and no change records. All records are appended at once; if the
// audit log cannot be written, the error is returned and the server should
// not start.
func (s *Service) CheckToolDefinitions(ctx context.Context, count func(ladder.ToolDefinitionChange)) ([]ladder.ToolDefinitionChange, error) {
	now := ladder.NormTime(s.now())
	var changes []ladder.ToolDefinitionChange
	var entries []ladder.AuditEntry
	for _, wid := range s.order {
		cur := map[string]string{}
		for _, c := range s.workspaces[wid].Capabilities {
			h, err := DefinitionHash(c)
			if err != nil {
				return nil, err
			}
			cur[c.ID] = h
		}
		prev, found, err := s.lastToolDefinitions(ctx, wid)
		if err != nil {
			return nil, err
		}
		if found {
			for _, ch := range diffDefinitions(wid, prev, cur) {
				e, err := ladder.NewAuditEntry(wid, "system", ladder.AuditToolDefinitionChanged, ch.Capability, now, ch)
				if err != nil {
					return nil, err
				}
				entries = append(entries, e)
				changes = append(changes, ch)
			}
		}
		e, err := ladder.NewAuditEntry(wid, "system", ladder.AuditToolDefinitions, wid, now, toolDefinitions{Hashes: cur})
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if _, err := s.store.AppendAudit(ctx, entries...); err != nil {
		return nil, fmt.Errorf("record tool definitions: %w", err)
	}
	for _, ch := range changes {
		s.log.Warn("tool definition "+ch.Change+" since the previous start; check the config before agents use it",
			"workspace", ch.Workspace, "capability", ch.Capability, "change", ch.Change, "old_hash", ch.OldHash, "new_hash", ch.NewHash)
		if count != nil {
			count(ch)
		}
	}
	return changes, nil
}

// lastToolDefinitions reads the hashes of the newest AuditToolDefinitions
// record of a workspace.
func (s *Service) lastToolDefinitions(ctx context.Context, workspace string) (map[string]string, bool, error) {
	recs, err := s.store.ListAudit(ctx, ladder.AuditQuery{Workspace: workspace, Kind: ladder.AuditToolDefinitions, Desc: true, Limit: 1})
	if err != nil {
		return nil, false, fmt.Errorf("read tool definitions of %s: %w", workspace, err)
	}
	if len(recs) == 0 {
		return nil, false, nil
	}
	var d toolDefinitions
	if err := json.Unmarshal(recs[0].Data, &d); err != nil {
		return nil, false, fmt.Errorf("audit record %d: tool definitions: %w", recs[0].Seq, err)
	}
	return d.Hashes, true, nil
}

// diffDefinitions lists, sorted by capability id, what differs between the
// previous and the current hashes of a workspace.
func diffDefinitions(workspace string, prev, cur map[string]string) []ladder.ToolDefinitionChange {
	ids := map[string]bool{}
	for id := range prev {
		ids[id] = true
	}
	for id := range cur {
		ids[id] = true
	}
	var out []ladder.ToolDefinitionChange
	for _, id := range sortedKeys(ids) {
		old, hadOld := prev[id]
		now, hasNow := cur[id]
		ch := ladder.ToolDefinitionChange{Workspace: workspace, Capability: id, OldHash: old, NewHash: now}
		switch {
		case hadOld && hasNow && old != now:
			ch.Change = ladder.DefinitionChanged
		case !hadOld:
			ch.Change = ladder.DefinitionAdded
		case !hasNow:
			ch.Change = ladder.DefinitionRemoved
		default:
			continue
		}
		out = append(out, ch)
	}
	return out
}
