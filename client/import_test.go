package client_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/client"
	"github.com/ladderhq/ladder/internal/testenv"
)

// TestImport: the client sends a file with its format and gets the
// summary back, or the refusal with its bad rows.
func TestImport(t *testing.T) {
	e := testenv.Start(t, "")
	c := client.New(e.Server.URL, e.Keys["vantrow-bills/admin"])
	csv := "type,at,step,item,lane,verdict\nreview,2026-09-02T10:00:00Z,rate_check,BILL-1,propose,agree\nreview,2026-09-02T11:00:00Z,rate_check,BILL-2,sideways,agree\n"
	_, err := c.Import(t.Context(), "", ladder.ImportFormatCSV, []byte(csv))
	le := ladder.AsError(err)
	rows, _ := le.Data["rows"].([]any)
	if le.Code != ladder.CodeInvalidArgument || len(rows) != 1 {
		t.Fatalf("bad row: %v (%+v)", err, le.Data)
	}
	if line := rows[0].(map[string]any)["line"]; line != 3.0 {
		t.Errorf("bad row's line: %v, want 3", line)
	}
	res, err := c.Import(t.Context(), "", ladder.ImportFormatCSV, []byte(csv[:len(csv)-len("review,2026-09-02T11:00:00Z,rate_check,BILL-2,sideways,agree\n")]))
	if err != nil {
		t.Fatal(err)
	}
	want := []ladder.ImportStepSummary{{Queue: "bills", Step: "rate_check", Reviews: 1, LaneChanges: []ladder.LaneChange{}, Lane: ladder.LanePropose}}
	if diff := cmp.Diff(want, res.Steps); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}
