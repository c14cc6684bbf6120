package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ladderhq/ladder/config"
)

// cmdMCP bridges MCP over stdio (for desktop agents that start a command)
// to ladder's /mcp: each JSON-RPC line from stdin is POSTed with the key,
// and each answer is written to stdout as one line. With --config and --db
// it serves a local store in-process through the same handler, so both
// ways give exactly the answers of POST /mcp.
func cmdMCP(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	stdio := fs.Bool("stdio", false, "speak MCP over stdin/stdout (required)")
	server := fs.String("server", e.getenv("LADDER_SERVER"), "ladder server URL (or LADDER_SERVER)")
	key := fs.String("key", e.getenv("LADDER_KEY"), "agent key (or LADDER_KEY)")
	cfgPath := fs.String("config", "", "serve a local store with this config instead of a server")
	db := fs.String("db", "ladder.db", "with --config: the database")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	if !*stdio {
		return exitError{code: 3, msg: "ladder mcp: only --stdio is supported; HTTP clients use POST /mcp on `ladder serve`"}
	}
	if *key == "" {
		return exitError{code: 3, msg: "ladder mcp: --key (or LADDER_KEY) is required: an agent key of the workspace"}
	}
	var post func(body []byte) (*http.Response, error)
	switch {
	case *cfgPath != "":
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		st, err := openStack(ctx, cfg, *db, e.getenv, newLogger(e.stderr))
		if err != nil {
			return err
		}
		defer st.Close()
		h, err := newHandler(st, prometheus.NewRegistry(), serveOptions{baseURL: "http://localhost"})
		if err != nil {
			return err
		}
		post = func(body []byte) (*http.Response, error) {
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://localhost/mcp", bytes.NewReader(body))
			req.RemoteAddr = "127.0.0.1:1"
			setMCPHeaders(req, *key)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Result(), nil
		}
	case *server != "":
		if err := checkServerURL("--server", *server); err != nil {
			return err
		}
		client := &http.Client{Timeout: 60 * time.Second}
		url := strings.TrimSuffix(*server, "/") + "/mcp"
		post = func(body []byte) (*http.Response, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			setMCPHeaders(req, *key)
			return client.Do(req)
		}
	default:
		return exitError{code: 3, msg: "ladder mcp: give --server URL (or LADDER_SERVER), or --config and --db for a local store"}
	}
	return bridge(ctx, e.stdin, e.stdout, e.stderr, post)
}

func setMCPHeaders(req *http.Request, key string) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
}

// bridge copies newline-delimited JSON-RPC messages from in to post and
// the answers to out. Notifications get no answer (202 with no body).
func bridge(ctx context.Context, in io.Reader, out, errw io.Writer, post func([]byte) (*http.Response, error)) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 2<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		resp, err := post(append([]byte(nil), line...))
		if err != nil {
			fmt.Fprintln(errw, "ladder mcp:", err)
			// Answer the request so the client does not hang.
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"UPSTREAM_FAILED","data":{"code":"UPSTREAM_FAILED","hint":"the ladder server did not answer: %s"}}}`+"\n", idOf(line), jsonEscape(err.Error()))
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = bytes.TrimSpace(body)
		if len(body) == 0 {
			continue
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			body = sseData(body)
		}
		if _, err := out.Write(append(body, '\n')); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read stdin: %w", err)
	}
	return nil
}

// sseData extracts the data lines of a one-event SSE body.
func sseData(body []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(body, []byte("\n")) {
		if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
			out = append(out, d)
		}
	}
	return bytes.Join(out, nil)
}

func idOf(line []byte) string {
	var m struct {
		ID jsonRaw `json:"id"`
	}
	_ = jsonUnmarshal(line, &m)
	if len(m.ID) == 0 {
		return "null"
	}
	return string(m.ID)
}
