package main

import (
	"io"
	"net/http"
	"testing"
)

// TestServerTimeouts: the server sets every timeout (header, read, write,
// idle) and a header size cap, so slow clients cannot hold connections.
func TestServerTimeouts(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), newLogger(io.Discard))
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("timeouts: header %s read %s write %s idle %s, max header %d", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	if srv.ReadHeaderTimeout > srv.ReadTimeout || srv.ReadTimeout > srv.WriteTimeout {
		t.Fatalf("header %s ≤ read %s ≤ write %s expected", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout)
	}
}
