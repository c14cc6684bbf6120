package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/client"
	"github.com/ladderhq/ladder/internal/testenv"
)

func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestMCP(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{Seed: true})
	ctx := context.Background()
	m, err := client.ConnectMCP(ctx, e.Server.URL, e.Keys["vantrow-bills/agent"], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	v, err := m.Steps(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Workspace != "vantrow-bills" || len(v.Steps) != 7 || !strings.HasPrefix(v.Sentence, "Runs alone (Auto): Read the bill; Post to the TMS.") {
		t.Fatalf("which_steps_run_alone: %+v", v)
	}

	p, err := m.Evidence(ctx, "", "Decide hold or release")
	if err != nil {
		t.Fatal(err)
	}
	if p.Step != "decide_hold" || p.Lane != ladder.LaneShadow || p.Figures.Rolling4.Accuracy == nil || !strings.HasPrefix(p.Sentence, "Decide hold or release is in shadow.") {
		t.Fatalf("step_evidence: %+v", p)
	}

	_, err = m.Evidence(ctx, "", "Reticulate splines")
	var le *ladder.Error
	if !errors.As(err, &le) || le.Code != ladder.CodeStepNotFound || !client.IsToolError(err) || !strings.Contains(le.Message, "No step matches") || !strings.Contains(le.Hint, "which_steps_run_alone") {
		t.Fatalf("unknown step: %#v", err)
	}

	_, err = m.CallTool(ctx, "no_such_tool", nil, nil)
	if !errors.As(err, &le) || le.Code != ladder.CodeUnknownCapability || client.IsToolError(err) {
		t.Fatalf("unknown tool: %#v", err)
	}
}

func TestMCPRefusals(t *testing.T) {
	e := testenv.StartWith(t, "", testenv.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name, url, key string
		want           ladder.Code
	}{
		{"bad key", e.Server.URL, "lk_not_a_key", ladder.CodeKeyInvalid},
		{"no key", e.Server.URL, "", ladder.CodeKeyMissing},
		{"human key", e.Server.URL, e.Keys["vantrow-bills/human"], ladder.CodeHumanKeyRefused},
		{"server down", closedURL(t), e.Keys["vantrow-bills/agent"], ladder.CodeServerUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := client.ConnectMCP(ctx, tc.url, tc.key, nil)
			if err == nil {
				m.Close()
				t.Fatal("connected")
			}
			var le *ladder.Error
			if !errors.As(err, &le) || le.Code != tc.want {
				t.Fatalf("got %#v, want %s", err, tc.want)
			}
		})
	}
}
