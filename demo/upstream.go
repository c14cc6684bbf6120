package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream is the demo's stand-in for the systems capabilities call: a TMS,
// a rates service and a payments service over HTTP, and a partner ledger
// over MCP. `ladder demo` starts it on a loopback port and points the demo
// config's "demo:NAME" executor URLs at it.
type Upstream struct {
	URL   string
	srv   *http.Server
	ln    net.Listener
	calls atomic.Int64
}

// Calls returns how many calls the upstream has served in this process.
func (u *Upstream) Calls() int64 { return u.calls.Load() }

// Resolve maps a "demo:NAME" executor URL to this upstream; other URLs are
// returned as they are.
func (u *Upstream) Resolve(url string) string {
	name, ok := strings.CutPrefix(url, "demo:")
	if !ok {
		return url
	}
	if name == "ledger" {
		return u.URL + "/ledger/mcp"
	}
	return u.URL + "/" + name
}

// StartUpstream starts the demo upstream on a free loopback port.
func StartUpstream() (*Upstream, error) { return ListenUpstream("127.0.0.1:0") }

// ListenUpstream starts the demo upstream on addr (host:port), for a
// process that serves only the stand-in systems (bench/standin) so that
// ladder calls them as it would a real upstream: in another process.
func ListenUpstream(addr string) (*Upstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("demo upstream: %w", err)
	}
	u := &Upstream{URL: "http://" + ln.Addr().String(), ln: ln}
	mux := http.NewServeMux()
	for _, name := range []string{"tms", "rates", "payments"} {
		mux.HandleFunc("POST /"+name, u.httpSystem(name))
	}
	ledger := ledgerServer(u) // one server for every request, as a real one would be
	mux.Handle("/ledger/mcp", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return ledger },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	u.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go u.srv.Serve(ln)
	return u, nil
}

// RemoteUpstream is the demo upstream another process serves at url (the
// URL it was started with, such as bench/standin's): Resolve maps
// "demo:NAME" executors to it, and Calls counts nothing, as the calls
// reach that process and not this one.
func RemoteUpstream(url string) *Upstream {
	return &Upstream{URL: strings.TrimRight(url, "/")}
}

// Close stops the upstream this process serves; it does nothing for a
// RemoteUpstream.
func (u *Upstream) Close() error {
	if u.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return u.srv.Shutdown(ctx)
}

// httpSystem answers a capability POST as the named system would.
func (u *Upstream) httpSystem(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		var req struct {
			CallID  string         `json:"call_id"`
			Payload map[string]any `json:"payload"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		out := map[string]any{"system": name, "ok": true, "call_id": req.CallID}
		switch name {
		case "tms":
			out["tms_reference"] = fmt.Sprintf("TMS-%06d", u.calls.Load())
			out["bill_id"] = req.Payload["bill_id"]
		case "rates":
			out["rate_approved"] = true
			out["bill_id"] = req.Payload["bill_id"]
		case "payments":
			out["released"] = true
			out["bill_id"] = req.Payload["bill_id"]
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}
}

// ledgerArgs and commissionArgs take every field the demo config declares
// for ticket6:readLedger and ticket6:approveCommission: the go-sdk refuses
// an argument its struct does not name, so a declared field missing here
// would fail every call that sends it.
type ledgerArgs struct {
	Program      string `json:"program" jsonschema:"the partner program"`
	Relationship string `json:"relationship" jsonschema:"the partner relationship"`
	Since        string `json:"since,omitempty" jsonschema:"only entries on or after this date (YYYY-MM-DD)"`
}

type ledgerEntry struct {
	Date        string  `json:"date"`
	Description string  `json:"description"`
	Amount      float64 `json:"amount"`
	Currency    string  `json:"currency"`
}

type ledgerOut struct {
	Program      string        `json:"program"`
	Relationship string        `json:"relationship"`
	Balance      float64       `json:"balance"`
	Entries      []ledgerEntry `json:"entries"`
}

type commissionArgs struct {
	CommissionID string `json:"commission_id" jsonschema:"the commission to approve"`
	Note         string `json:"note,omitempty" jsonschema:"why it should be approved"`
	Program      string `json:"program" jsonschema:"the partner program"`
	Relationship string `json:"relationship" jsonschema:"the partner relationship"`
}

type commissionOut struct {
	CommissionID string `json:"commission_id"`
	Approved     bool   `json:"approved"`
}

// ledgerServer is the partner ledger's MCP server (seed 004's ticket6).
func ledgerServer(u *Upstream) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "demo-ledger", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "readLedger", Description: "Read a partner's commission ledger."},
		func(ctx context.Context, req *sdk.CallToolRequest, in ledgerArgs) (*sdk.CallToolResult, ledgerOut, error) {
			u.calls.Add(1)
			if in.Program == "" || in.Relationship == "" {
				return nil, ledgerOut{}, errors.New("program and relationship are required")
			}
			if in.Since != "" {
				if _, err := time.Parse(time.DateOnly, in.Since); err != nil {
					return nil, ledgerOut{}, fmt.Errorf("since %q is not a date (YYYY-MM-DD)", in.Since)
				}
			}
			out := ledgerOut{Program: in.Program, Relationship: in.Relationship, Entries: []ledgerEntry{}}
			for _, e := range []ledgerEntry{
				{Date: "2026-10-01", Description: "Referral commission, order 1042", Amount: 125.00, Currency: "USD"},
				{Date: "2026-10-15", Description: "Referral commission, order 1077", Amount: 80.50, Currency: "USD"},
				{Date: "2026-11-01", Description: "Payout", Amount: -125.00, Currency: "USD"},
			} {
				// The balance is the whole ledger's; since only shortens the list.
				out.Balance += e.Amount
				if e.Date >= in.Since {
					out.Entries = append(out.Entries, e)
				}
			}
			return nil, out, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "approveCommission", Description: "Approve a pending commission."},
		func(ctx context.Context, req *sdk.CallToolRequest, in commissionArgs) (*sdk.CallToolResult, commissionOut, error) {
			u.calls.Add(1)
			return nil, commissionOut{CommissionID: in.CommissionID, Approved: true}, nil
		})
	return s
}
