package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is a gateway file: the workspaces to ask, each with its server and
// agent key, and the alias table.
//
//	# timeout is per workspace and optional (default 10s).
//	timeout: 10s
//	workspaces:
//	  vantrow-bills:
//	    server: https://ladder.example.com
//	    key_env: LADDER_KEY_VANTROW_BILLS   # the name of an environment variable
//	  checkcall-loads:
//	    server: https://ladder.example.com
//	    key: lk_…                            # or the key itself
//	aliases:
//	  Check the fuel surcharge: Rate check
//	  Log location and ETA: Capture the ETA
type File struct {
	// Timeout bounds each workspace's calls; zero means DefaultTimeout.
	Timeout Duration `yaml:"timeout,omitempty"`
	// Workspaces maps a workspace's name (its id on the server, by
	// convention) to how to reach it.
	Workspaces map[string]Workspace `yaml:"workspaces"`
	// Aliases maps a stand-in step name to the live name (or id) it stands
	// for. Aliases are tried after id, name and containment.
	Aliases map[string]string `yaml:"aliases,omitempty"`
}

// Workspace says how to reach one workspace: the server's base URL and an
// agent key of that workspace, given as the key itself or as the name of an
// environment variable that holds it.
type Workspace struct {
	Server string `yaml:"server"`
	Key    string `yaml:"key,omitempty"`
	KeyEnv string `yaml:"key_env,omitempty"`
}

// Duration is a time.Duration written as "10s" in YAML.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v <= 0 {
		return fmt.Errorf("line %d: timeout %q: want a positive duration such as 10s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// maxFileSize bounds what Load reads.
const maxFileSize = 1 << 20

// Load reads and checks a gateway file.
func Load(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open gateway file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read gateway file: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: the file is over 1 MiB", path)
	}
	return Parse(path, data)
}

// Parse reads a gateway file strictly: an unknown field, a duplicate key or
// a missing value is an error naming the file and the line.
func Parse(name string, data []byte) (*File, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the file is empty; it needs a workspaces: section", name)
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
		var lines []string
		for _, l := range strings.Split(msg, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, name+": "+l)
			}
		}
		return nil, errors.New(strings.Join(lines, "\n"))
	}
	lineOf := nodeLines(&root)
	var errs []string
	add := func(path, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s: line %d: %s", name, lineOf(path), fmt.Sprintf(format, args...)))
	}
	if len(f.Workspaces) == 0 {
		add("workspaces", "no workspaces: list at least one, each with server and key or key_env")
	}
	for _, ws := range sortedKeys(f.Workspaces) {
		w := f.Workspaces[ws]
		p := "workspaces." + ws
		switch u, err := url.Parse(w.Server); {
		case w.Server == "":
			add(p, "workspace %s: server is required (the ladder server's base URL, e.g. https://ladder.example.com)", ws)
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			add(p+".server", "workspace %s: server %q is not an http(s) URL", ws, w.Server)
		}
		switch {
		case w.Key == "" && w.KeyEnv == "":
			add(p, "workspace %s: give key (an agent key) or key_env (the name of an environment variable holding one)", ws)
		case w.Key != "" && w.KeyEnv != "":
			add(p, "workspace %s: give key or key_env, not both", ws)
		}
	}
	for _, from := range sortedKeys(f.Aliases) {
		if strings.TrimSpace(from) == "" || strings.TrimSpace(f.Aliases[from]) == "" {
			add("aliases."+from, "alias %q: both the stand-in name and the live name are required", from)
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return &f, nil
}

// Marshal writes the file as YAML.
func (f *File) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// nodeLines indexes the line of every mapping key by its dotted path.
func nodeLines(root *yaml.Node) func(path string) int {
	lines := map[string]int{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
				lines[p] = n.Content[i].Line
				walk(n.Content[i+1], p)
			}
		}
	}
	walk(root, "")
	return func(path string) int {
		for {
			if l, ok := lines[path]; ok {
				return l
			}
			i := strings.LastIndex(path, ".")
			if i < 0 {
				return 1
			}
			path = path[:i]
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
