//go:build !linux

package main

import "errors"

// returnExecutablePages is Linux's alone (MADV_PAGEOUT); elsewhere the
// executable's pages stay as the system keeps them.
func returnExecutablePages() (pagesReleased, error) {
	return pagesReleased{}, errors.New("not on Linux")
}
