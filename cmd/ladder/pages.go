package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Once a server is up, much of its executable's resident memory is code
// and tables only start-up used: every package's initialisation, config
// loading and CEL compilation, migrations, the demo's seeding. The kernel
// maps the binary's pages 64 KiB at a time around each page touched, so
// start-up leaves ~32 MiB of the binary's ~36 MiB resident, of which a
// request path uses ~20 (BENCHMARKS.md, "Issue 22 (session 25)").
// releaseStartupPagesLater hands those pages back once, startupSettle
// after the server starts answering; the code requests run is read back
// in on its next use and stays. The pages are clean copies of the file,
// so nothing is lost, and pages another process maps too (a second ladder
// on the same binary) are left alone by the kernel.
func releaseStartupPagesLater(ctx context.Context, log *slog.Logger) {
	t := time.NewTimer(startupSettle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	releaseStartupPages(log)
}

// startupSettle is how long a server serves before it hands its start-up
// pages back. Its first requests (a health check waiting on it, an
// agent's first calls) and its start-up passes over the store (the first
// audit-log integration, the call sweep) run on the pages start-up left,
// instead of reading them back from disk while someone waits: done at
// once, the first /healthz came 19–27 ms later (BENCHMARKS.md, "Issue 22
// (session 25)").
const startupSettle = 10 * time.Second

// releaseStartupPages hands the executable's read-only pages back to the
// kernel now, and logs what it freed.
func releaseStartupPages(log *slog.Logger) {
	released, err := returnExecutablePages()
	if err != nil {
		// An older kernel (before Linux 5.4) or another system: the pages
		// stay, as they always did; nothing for an operator to do.
		log.Debug("start-up pages of the executable kept", "err", err)
		return
	}
	log.Info("start-up pages of the executable returned to the kernel", "resident_file_mib_before", mib(released.before), "resident_file_mib_after", mib(released.after))
}

// pagesReleased is the process's resident file-backed memory (bytes)
// before and after the executable's pages were handed back.
type pagesReleased struct{ before, after int64 }

func mib(b int64) float64 { return float64(b*10/(1<<20)) / 10 }

// mapping is one address range of /proc/self/maps.
type mapping struct{ start, end uintptr }

// readOnlyMappings returns the ranges of /proc/self/maps that map the file
// at path without write permission (its code and read-only data). The
// kernel appends " (deleted)" to a path whose file was replaced since,
// as an upgrade in place does; the mapping still holds the old file.
func readOnlyMappings(maps io.Reader, path string) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.Contains(f[1], "w") {
			continue
		}
		p := strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)")
		if p != path {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}

// residentFile reads RssFile (the resident file-backed memory) from a
// /proc/PID/status text, in bytes.
func residentFile(status io.Reader) (int64, bool) {
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		// "RssFile:	   31384 kB"
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "RssFile:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
