package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ladderhq/ladder"
)

// ScreenshotsEnv names the folder the browser test saves its screenshots
// to; unset, none are saved.
const ScreenshotsEnv = "LADDER_SCREENSHOTS"

// AxeEnv names axe-core's axe.min.js (npm package axe-core), which the
// browser test injects into every page to check accessibility. Unset, the
// accessibility check is skipped (and says so); .ci/run sets it and fails
// when it was skipped.
const AxeEnv = "LADDER_AXE_JS"

// axeViolation is one failed axe-core rule on a page.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any `json:"target"`
	} `json:"nodes"`
}

// axeRun runs axe-core on the page and returns its serious and critical
// violations.
const axeRun = `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => ({target: n.target}))})))`

// overflowJS reports how far the page is wider than the window (0: fits).
const overflowJS = `Math.max(0, document.documentElement.scrollWidth - document.documentElement.clientWidth)`

// chromium finds a Chromium to drive, or "".
func chromium() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestBrowser drives the console in headless Chromium on the seeded demo:
// sign in, approve, edit and approve, reject, review an audit, pin a lane,
// and check the step page against the evidence API.
func TestBrowser(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("no Chromium installed (apt-get install -y chromium): the console browser test is skipped")
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	var axeJS string
	if path := os.Getenv(AxeEnv); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", AxeEnv, err)
		}
		axeJS = string(b)
	}
	e := demoWork(t)
	first := requestApproval(t, e, "B-1001")
	e.Clock.Advance(time.Second)
	second := requestApproval(t, e, "B-1002")
	e.Clock.Advance(time.Second)
	third := requestApproval(t, e, "B-1003")
	e.Clock.Advance(time.Second)
	audit := sampledAudit(t, e, "BILL-B")

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()

	dir := os.Getenv(ScreenshotsEnv)
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if dir == "" {
				return nil
			}
			png, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}
	// fullShot saves the whole page, for the phone width, where the
	// interesting part is below the first screen.
	fullShot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if dir == "" {
				return nil
			}
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}
	base := e.Server.URL
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}

	// checkPage loads a page in a window w px wide and checks that it
	// fits without sideways scrolling and, at 1280 px, that axe-core finds
	// no serious or critical accessibility violation; it saves a
	// screenshot of each.
	axeSkipped := axeJS == ""
	checkPage := func(name, path, ready string, w int64) {
		t.Helper()
		var over int
		var violations []axeViolation
		prefix := "page-"
		if w != 1280 {
			prefix = "phone-"
		}
		actions := []chromedp.Action[chromedp.Void]{
			chromedp.EmulateViewport(w, 900),
			chromedp.Navigate(base + path),
			chromedp.WaitVisible(chromedp.CSS(ready)),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) (err error) {
				over, err = chromedp.Evaluate[int](overflowJS)(ctx, tg)
				return err
			}),
		}
		if w == 1280 {
			actions = append(actions, shot(prefix+name))
		} else {
			actions = append(actions, fullShot(prefix+name))
		}
		if w == 1280 && !axeSkipped {
			actions = append(actions, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) (err error) {
				if _, err := chromedp.Evaluate[bool](axeJS+";true")(ctx, tg); err != nil {
					return fmt.Errorf("inject axe-core: %w", err)
				}
				violations, err = chromedp.Evaluate[[]axeViolation](axeRun, chromedp.EvalAwaitPromise)(ctx, tg)
				return err
			}))
		}
		run(fmt.Sprintf("%s at %d px", name, w), actions...)
		if over > 0 {
			t.Errorf("%s at %d px: the page is %d px wider than the window", name, w, over)
		}
		for _, v := range violations {
			t.Errorf("%s: accessibility (%s) %s: %s at %v", name, v.Impact, v.ID, v.Help, v.Nodes)
		}
	}
	checkPage("signin", "/console/signin", "#key", 390)
	checkPage("signin", "/console/signin", "#key", 1280)

	run("sign in",
		chromedp.Navigate(base+"/console/inbox"),
		chromedp.WaitVisible(chromedp.ID("#key")),
		shot("01-signin"),
		chromedp.SendKeys(chromedp.ID("#key"), e.Keys[ws+"/human"]),
		chromedp.Submit(chromedp.ID("#key")),
		chromedp.WaitVisible(chromedp.ID("#item-"+first)),
		shot("02-inbox"),
	)
	run("approve",
		chromedp.Click(chromedp.CSS(`#item-`+first+` form[action$="/approve"] button`)),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
		chromedp.WaitNotPresent(chromedp.ID("#item-"+first)),
	)
	run("edit then approve",
		chromedp.Navigate(base+"/console/approvals/"+second),
		chromedp.WaitVisible(chromedp.ID("#f-linehaul_usd")),
		chromedp.SetValue(chromedp.ID("#f-linehaul_usd"), "1700"),
		shot("03-approval-edit"),
		chromedp.Click(chromedp.CSS(`#edit button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
		chromedp.WaitNotPresent(chromedp.ID("#item-"+second)),
	)
	run("reject",
		chromedp.SendKeys(chromedp.ID("#reason-"+third), "the rate confirmation says otherwise"),
		chromedp.Click(chromedp.CSS(`#item-`+third+` form.reject button`)),
		chromedp.WaitNotPresent(chromedp.ID("#item-"+third)),
		shot("04-inbox-after"),
	)
	run("review an audit",
		chromedp.Navigate(base+"/console/routes/"+audit),
		chromedp.WaitVisible(chromedp.ID("#v-agree-"+audit)),
		chromedp.Click(chromedp.ID("#v-agree-"+audit)),
		shot("05-audit"),
		chromedp.Click(chromedp.CSS(`form.review button[type="submit"]`)),
		chromedp.WaitNotPresent(chromedp.ID("#item-"+audit)),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	)
	run("pin a lane",
		chromedp.Navigate(base+"/console/steps/bills/match_load"),
		chromedp.WaitVisible(chromedp.ID("#pin-reason")),
		chromedp.SetValue(chromedp.ID("#pin-lane"), "shadow"),
		chromedp.SendKeys(chromedp.ID("#pin-reason"), "new carrier onboarding: watch it in shadow"),
		chromedp.Click(chromedp.CSS(`form.pin button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("#unpin-reason")),
	)

	// The step page's numbers equal the evidence API's.
	var lane, rate, n, acc, lo, hi, opErr, outcome string
	text := func(dst *string, sel string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			v, err := chromedp.TextContent(chromedp.CSS(sel))(ctx, tg)
			*dst = v
			return err
		})
	}
	run("step page",
		chromedp.Navigate(base+"/console/steps/bills/read_bill"),
		chromedp.WaitVisible(chromedp.ID("rolling-4")),
		text(&lane, "#lane"), text(&rate, "#audit-rate"),
		text(&n, "#rolling-4 .n"), text(&acc, "#rolling-4 .accuracy"), text(&lo, "#rolling-4 .lower"), text(&hi, "#rolling-4 .upper"),
		text(&opErr, "#operator-error"), text(&outcome, "#outcome-state"),
		shot("06-step"),
	)
	ev := e.Do("GET", "/v1/steps/bills/read_bill/evidence", e.Keys[ws+"/human"], nil)
	figs := ev.Body["figures"].(map[string]any)
	r4 := figs["rolling_4"].(map[string]any)
	oe := figs["operator_error"].(map[string]any)
	four := func(v any) string {
		if v == nil {
			return "—"
		}
		return fmt.Sprintf("%.4f", v.(float64))
	}
	for _, c := range []struct{ name, got, want string }{
		{"lane", lane, strings.ReplaceAll(ev.Body["lane"].(string), "_", " ")},
		{"audit rate", rate, fmt.Sprintf("%.4g", ev.Body["audit_rate"].(float64))},
		{"rolling-4 n", strings.ReplaceAll(n, ",", ""), fmt.Sprint(r4["n"])},
		{"rolling-4 accuracy", acc, four(r4["accuracy"])},
		{"rolling-4 lower", lo, four(r4["wilson_lower"])},
		{"rolling-4 upper", hi, four(r4["wilson_upper"])},
		{"operator error", opErr, four(oe["rate"])},
		{"outcome test", outcome, ev.Body["outcome_test"].(map[string]any)["state"].(string)},
	} {
		if strings.TrimSpace(c.got) != c.want {
			t.Errorf("%s: page %q, API %q", c.name, c.got, c.want)
		}
	}
	run("other pages",
		chromedp.Navigate(base+"/console/steps"), chromedp.WaitVisible(chromedp.CSS("table.steps")), shot("07-steps"),
		chromedp.Navigate(base+"/console/gate"), chromedp.WaitVisible(chromedp.CSS("h1")), shot("08-gate"),
		chromedp.Navigate(base+"/console/audit"), chromedp.WaitVisible(chromedp.ID("#chain")), shot("09-audit"),
	)

	// Every page fits a 1280 px window and a 390 px phone without sideways
	// scrolling, and has no serious or critical accessibility violation.
	pending := requestApproval(t, e, "BILL-795")
	toAudit := ""
	in, err := e.Svc.Inbox(context.Background(), ladder.Principal{Workspace: ws, Kind: ladder.KeyHuman}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range in.Items {
		if it.Kind == ladder.InboxAudit && toAudit == "" {
			toAudit = it.Route.ID
		}
	}
	if toAudit == "" {
		t.Fatal("the demo left no sampled audit to review")
	}
	// A dead letter, so the deliveries page shows its table and a Send
	// again button.
	if _, err := e.Store.FanOut(context.Background(), 1000, func(ev ladder.Event) []string { return []string{ev.Workspace + "/ops"} }); err != nil {
		t.Fatal(err)
	}
	dls, err := e.Store.ClaimDeliveries(context.Background(), 1, time.Minute, map[string]int{ws + "/ops": 1})
	if err != nil || len(dls) != 1 {
		t.Fatalf("claim a delivery: %v %v", dls, err)
	}
	if err := e.Store.FinishDelivery(context.Background(), ladder.DeliveryResult{ID: dls[0].ID, Dead: true, Error: "the endpoint answered HTTP 503", StatusCode: 503}); err != nil {
		t.Fatal(err)
	}
	pages := []struct{ name, path, ready string }{
		{"overview", "/console/overview", "#waiting-approvals"},
		{"inbox", "/console/inbox", "#item-" + pending},
		{"approval", "/console/approvals/" + pending, "#f-linehaul_usd"},
		{"audit-review", "/console/routes/" + toAudit, "#v-agree-" + toAudit},
		{"steps", "/console/steps", "table.steps"},
		{"step", "/console/steps/bills/post_tms", "#rolling-4"},
		{"gate-history", "/console/gate", "#gate-decisions"},
		{"audit-log", "/console/audit", "#audit-records"},
		{"webhooks", "/console/webhooks", "#deliveries form.redeliver"},
	}
	for _, w := range []int64{1280, 390} {
		for _, pg := range pages {
			checkPage(pg.name, pg.path, pg.ready, w)
		}
	}
	run("back to a desktop window", chromedp.EmulateViewport(1280, 900))
	if axeSkipped {
		t.Logf("AXE SKIPPED: set %s to axe-core's axe.min.js to check accessibility", AxeEnv)
	}

	// A proposal whose step was pinned to human_only since shows the
	// approver both lanes beside the buttons.
	pinned := requestApproval(t, e, "B-1004")
	if _, err := e.Svc.Pin(context.Background(), ladder.Principal{KeyID: ladder.KeyID(e.Keys[ws+"/human"]), Workspace: ws, Kind: ladder.KeyHuman},
		"bills", "rate_check", ladder.PinRequest{Lane: "human_only", Reason: "rate table under review"}, true); err != nil {
		t.Fatal(err)
	}
	run("lane changed since the proposal",
		chromedp.Navigate(base+"/console/inbox"),
		chromedp.WaitVisible(chromedp.CSS(`#item-`+pinned+` .lane-changed`)),
		shot("10-inbox-lane-changed"),
	)

	// What the browser did is what the API reports.
	for id, want := range map[string]string{first: "approved", second: "approved", third: "rejected"} {
		if v := e.Do("GET", "/v1/approvals/"+id, e.Keys[ws+"/human"], nil); v.Body["status"] != want {
			t.Errorf("approval %s: %v, want %s", id, v.Body["status"], want)
		}
	}
	if v := e.Do("GET", "/v1/approvals/"+second, e.Keys[ws+"/human"], nil); !strings.Contains(fmt.Sprint(v.Body["edited_payload"]), "1700") {
		t.Errorf("edited payload: %v", v.Body["edited_payload"])
	}
	pk := e.Do("GET", "/v1/steps/bills/match_load/evidence", e.Keys[ws+"/human"], nil)
	if pk.Body["lane"] != "shadow" || pk.Body["pinned"] != true {
		t.Errorf("match_load after pin: %v pinned %v", pk.Body["lane"], pk.Body["pinned"])
	}
}
