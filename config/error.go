package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Error is one fault in a config file. Parse and Load return every fault
// they find, each an *Error, joined with errors.Join and sorted by line, so
// one run shows a person everything to fix.
type Error struct {
	// File is the name given to Parse, or the path given to Load.
	File string
	// Line is the 1-based line of the field, or 0 when it is not known.
	Line int
	// Field is the field path, e.g. workspaces[0].queues[0].steps[2].lane;
	// empty for faults of the file as a whole.
	Field string
	// Msg says what is wrong and what is expected instead.
	Msg string
}

// Error formats the fault as file:line: field: message, the form editors
// and terminals link to the place.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors returns the *Error values inside an error returned by Parse or
// Load, in the order they are reported. It returns nil for other errors.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if e, ok := err.(*Error); ok {
			out = append(out, e)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

type errorList struct{ errs []*Error }

func (l *errorList) add(file string, line int, field, msg string) {
	l.errs = append(l.errs, &Error{File: file, Line: line, Field: field, Msg: msg})
}

func (l *errorList) len() int { return len(l.errs) }

// err sorts the faults by line (stable, so faults of one line keep the order
// they were found in) and joins them; nil when there are none.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	sort.SliceStable(l.errs, func(i, j int) bool { return l.errs[i].Line < l.errs[j].Line })
	errs := make([]error, len(l.errs))
	for i, e := range l.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}
