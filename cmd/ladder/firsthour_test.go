package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ReadmeCheckEnv turns on TestReadmeFirstHour, which clones the repository
// and installs the command: CI sets it, a laptop's go test ./... does not.
const ReadmeCheckEnv = "LADDER_README_CHECK"

// readmeBlocks returns the README's shell blocks marked
// <!-- first-hour: NAME -->, by name.
func readmeBlocks(t *testing.T, readme []byte) map[string]string {
	t.Helper()
	re := regexp.MustCompile("(?s)<!-- first-hour: ([a-z]+) -->\\s*```sh\\n(.*?)```")
	out := map[string]string{}
	for _, m := range re.FindAllSubmatch(readme, -1) {
		out[string(m[1])] = string(m[2])
	}
	for _, name := range []string{"install", "demo", "try"} {
		if out[name] == "" {
			t.Fatalf("the README has no <!-- first-hour: %s --> block; this test follows those blocks", name)
		}
	}
	return out
}

// TestReadmeFirstHour follows the README alone on a fresh clone: install
// the command as it says, start the demo as it says, run the second
// terminal's commands as they are written, then sign in to the console with
// the key it names and find work waiting there. Only the address is chosen
// (LADDER_ADDR, which the README documents), so the check never collides
// with a port in use.
func TestReadmeFirstHour(t *testing.T) {
	if os.Getenv(ReadmeCheckEnv) == "" {
		t.Skip("set " + ReadmeCheckEnv + "=1 to follow the README on a fresh clone (CI does)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, readme)

	tmp := t.TempDir()
	clone := filepath.Join(tmp, "ladder")
	if out, err := exec.Command("git", "clone", "-q", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	gobin := filepath.Join(tmp, "bin")
	addr := freeAddr(t)
	env := append(os.Environ(), "GOBIN="+gobin, "PATH="+gobin+string(os.PathListSeparator)+os.Getenv("PATH"), "LADDER_ADDR="+addr)
	sh := func(name, script string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = clone, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the README's %s block failed: %v\n%s\n--- output:\n%s", name, err, script, out)
		}
		return string(out)
	}

	if out := sh("install", blocks["install"]); !strings.Contains(out, "go1.") {
		t.Fatalf("ladder version after the install block: %s", out)
	}

	// The demo runs in the foreground in the README's first terminal.
	var demoOut bytes.Buffer
	demo := exec.Command("bash", "-euo", "pipefail", "-c", "exec "+strings.TrimSpace(stripComments(blocks["demo"])))
	demo.Dir, demo.Env, demo.Stdout, demo.Stderr = clone, env, &demoOut, io.Discard
	demo.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-demo.Process.Pid, syscall.SIGTERM)
		_ = demo.Wait()
	})
	envFile := filepath.Join(clone, "ladder-demo.env")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, err := os.Stat(envFile); err == nil && strings.Contains(demoOut.String(), "Press Ctrl-C") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not come up in 3 minutes:\n%s", demoOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	out := sh("try", blocks["try"])
	for _, want := range []string{"Post to the TMS", "Rate check", `"lane":"shadow"`, `"decision":"act_alone"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the second terminal's commands did not show %q:\n%s", want, out)
		}
	}

	// The console, signed in with the key the README names.
	human := regexp.MustCompile(`(?m)^export LADDER_DEMO_VANTROW_BILLS_HUMAN='([^']+)'`).FindStringSubmatch(mustRead(t, envFile))
	if human == nil {
		t.Fatalf("ladder-demo.env holds no LADDER_DEMO_VANTROW_BILLS_HUMAN:\n%s", mustRead(t, envFile))
	}
	base := "http://" + addr
	inbox := consoleSignIn(t, base, human[1])
	if n := len(regexp.MustCompile(`href="/console/approvals/ap_`).FindAllString(inbox, -1)); n == 0 {
		t.Fatalf("the console inbox on first open holds no approval to decide:\n%s", inbox)
	}
}

// stripComments drops a shell line's trailing # comment.
func stripComments(script string) string {
	var lines []string
	for _, l := range strings.Split(script, "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// consoleSignIn signs in as a person does (the sign-in form with its
// token, then the key) and returns the inbox's HTML.
func consoleSignIn(t *testing.T, base, key string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(path string) string {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	form := get("/console/signin")
	tok := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(form)
	if tok == nil {
		t.Fatalf("the sign-in page has no form token:\n%s", form)
	}
	resp, err := c.PostForm(base+"/console/signin", url.Values{"csrf": {tok[1]}, "key": {key}, "next": {"/console/inbox"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Sign out") {
		t.Fatalf("sign-in with the README's human key: %d\n%s", resp.StatusCode, body)
	}
	return get("/console/inbox")
}
