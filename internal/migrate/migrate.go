// Package migrate reads the embedded SQL migrations both stores apply at
// start: files "NNNN_name.sql" in a folder, ordered by their number.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load reads the migrations in dir of fsys, oldest first. A file whose name
// does not start with a positive number and '_' is an error.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		digits, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(digits)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", name)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have the same number", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// CheckNewest refuses a database whose newest applied migration is newer
// than the newest of ms (oldest first): a binary older than the database
// would run on tables it does not know. Both stores call it, so the
// refusal reads the same on either.
func CheckNewest(ms []Migration, newest int) error {
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].Version
	}
	if newest > known {
		return fmt.Errorf("schema version %d is newer than this binary knows (%d); use a newer ladder", newest, known)
	}
	return nil
}
