package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// madvPageout is Linux's MADV_PAGEOUT (5.4 and later): reclaim the range's
// pages now; a clean file page is dropped and read back on its next use.
const madvPageout = 21

// returnExecutablePages asks the kernel to reclaim the pages of this
// process's executable that are mapped read-only (code, read-only data,
// the function tables) and reports the resident file memory around it.
func returnExecutablePages() (pagesReleased, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return pagesReleased{}, err
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return pagesReleased{}, err
	}
	ranges, err := readOnlyMappings(maps, exe)
	maps.Close()
	if err != nil {
		return pagesReleased{}, err
	}
	if len(ranges) == 0 {
		return pagesReleased{}, fmt.Errorf("no read-only mapping of %s in /proc/self/maps", exe)
	}
	var r pagesReleased
	r.before, _ = selfResidentFile()
	for _, m := range ranges {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, madvPageout); errno != 0 {
			return pagesReleased{}, fmt.Errorf("madvise(MADV_PAGEOUT): %w", errno)
		}
	}
	r.after, _ = selfResidentFile()
	return r, nil
}

func selfResidentFile() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if b, ok := residentFile(f); ok {
		return b, nil
	}
	return 0, errors.New("no RssFile in /proc/self/status")
}
