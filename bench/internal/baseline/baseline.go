// Package baseline holds the two reference /mcp handlers ladder's MCP speed
// budget (DESIGN §11) is measured against, and the small serving helpers
// the bench programs share:
//
//   - [NewSDKHandler]: a bare github.com/modelcontextprotocol/go-sdk server
//     with the options ladder uses (stateless, JSON responses, 1 MiB body
//     cap) and one no-op tool;
//   - [NewPlainHandler]: a plain net/http handler that decodes the same
//     JSON-RPC tools/call request and answers a fixed result.
//
// Neither authenticates, checks JSON strictly or stores anything.
package baseline

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolName is the name of the no-op tool both baselines answer.
const ToolName = "noop"

// MaxBodyBytes is the request body cap, the same as ladder's /mcp.
const MaxBodyBytes = 1 << 20

// noopInput accepts the arguments the load generator sends to every server
// (route_item's shape), so every server decodes the same request.
type noopInput struct {
	Step  string `json:"step,omitempty" jsonschema:"a step id (ignored)"`
	Item  string `json:"item,omitempty" jsonschema:"an item id (ignored)"`
	Queue string `json:"queue,omitempty" jsonschema:"a queue id (ignored)"`
}

// NewSDKServer returns the bare go-sdk server with its one no-op tool.
func NewSDKServer() *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "bare", Version: "bench"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: ToolName, Description: "Does nothing and answers ok."},
		func(ctx context.Context, req *sdk.CallToolRequest, in noopInput) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil, nil
		})
	return srv
}

// NewSDKHandler returns the bare go-sdk /mcp handler: stateless, JSON
// responses, 1 MiB body cap — StreamableHTTPOptions as ladder sets them.
func NewSDKHandler() http.Handler {
	srv := NewSDKServer()
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: MaxBodyBytes})
}

// rpcRequest is a JSON-RPC tools/call request as the plain handler reads it.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name      string    `json:"name"`
		Arguments noopInput `json:"arguments"`
	} `json:"params"`
}

// NewPlainHandler returns a plain net/http handler that decodes a JSON-RPC
// tools/call request (envelope, tool name and arguments) and answers the
// same result the no-op tool gives, with the request id echoed. It is the
// floor: HTTP plus one JSON decode and one small JSON write.
func NewPlainHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		var req rpcRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes)).Decode(&req); err != nil {
			http.Error(w, "bad JSON-RPC request: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if req.JSONRPC != "2.0" || req.Method != "tools/call" || req.Params.Name != ToolName || len(req.ID) == 0 {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"send tools/call %s"}}`, idOrNull(req.ID), ToolName)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, req.ID)
	})
}

func idOrNull(id json.RawMessage) []byte {
	if len(id) == 0 {
		return []byte("null")
	}
	return id
}

// SDKVersion is the go-sdk module version this binary was built with.
func SDKVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/modelcontextprotocol/go-sdk" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// CheckLoopback refuses a listen address that is not on a loopback IP: the
// bench servers talk to 127.0.0.1 only.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: listen on a loopback IP such as 127.0.0.1", addr)
	}
	return nil
}

// Serve answers h at /mcp on the loopback address addr until ctx ends. If
// pprofAddr is set, net/http/pprof's handlers (registered on
// http.DefaultServeMux by the caller's import) are served there too.
func Serve(ctx context.Context, name, addr, pprofAddr string, h http.Handler) error {
	if err := CheckLoopback(addr); err != nil {
		return err
	}
	if pprofAddr != "" {
		if err := CheckLoopback(pprofAddr); err != nil {
			return err
		}
		psrv := &http.Server{Addr: pprofAddr, Handler: http.DefaultServeMux, ReadHeaderTimeout: 5 * time.Second}
		go func() { log.Println(psrv.ListenAndServe()) }()
		defer psrv.Close()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
	log.Printf("%s listening on http://%s/mcp (go-sdk %s)", name, ln.Addr(), SDKVersion())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Main is the whole of a baseline server command: it reads -addr (default
// defaultAddr) and -pprof, serves h until SIGINT or SIGTERM, and exits 1
// with the error if serving fails.
func Main(name, defaultAddr string, h http.Handler) {
	addr := flag.String("addr", defaultAddr, "loopback address to listen on")
	pprofAddr := flag.String("pprof", "", "if set, serve net/http/pprof on this loopback address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Serve(ctx, name, *addr, *pprofAddr, h); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		stop()
		os.Exit(1)
	}
}
