package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// A repo is the git work tree the command runs in, at one commit.
type repo struct {
	root   string    // absolute path of the work tree's top
	commit string    // the full hash of the revision
	time   time.Time // the commit's time, the versions' time
}

func openRepo(rev string) (*repo, error) {
	root, err := git("", "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	r := &repo{root: strings.TrimSpace(root)}
	commit, err := git(r.root, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return nil, err
	}
	r.commit = strings.TrimSpace(commit)
	when, err := git(r.root, "log", "-1", "--format=%cI", r.commit)
	if err != nil {
		return nil, err
	}
	if r.time, err = time.Parse(time.RFC3339, strings.TrimSpace(when)); err != nil {
		return nil, fmt.Errorf("commit time of %s: %w", rev, err)
	}
	return r, nil
}

// goMods returns the content of every go.mod at the commit, by directory.
func (r *repo) goMods() (map[string][]byte, error) {
	list, err := git(r.root, "ls-tree", "-r", "--name-only", "-z", r.commit)
	if err != nil {
		return nil, err
	}
	mods := map[string][]byte{}
	for _, name := range strings.Split(list, "\x00") {
		if path.Base(name) != "go.mod" {
			continue
		}
		data, err := r.file(name)
		if err != nil {
			return nil, err
		}
		mods[path.Dir(name)] = data
	}
	return mods, nil
}

func (r *repo) file(name string) ([]byte, error) {
	data, err := git(r.root, "show", r.commit+":"+name)
	return []byte(data), err
}

func (r *repo) check(releases []release) error {
	mods, err := r.goMods()
	if err != nil {
		return err
	}
	work, err := r.file("go.work")
	if err != nil {
		return err
	}
	return errors.Join(checkModules(releases, mods), checkWork(releases, mods, work))
}

// publish writes the module in rel.Dir at the commit into the proxy
// directory out under rel.Version, and adds the version to its list.
func (r *repo) publish(out string, rel release) error {
	name := path.Join(rel.Dir, "go.mod")
	mod, err := r.file(name)
	if err != nil {
		return err
	}
	m := module.Version{Path: modfile.ModulePath(mod), Version: rel.Version}
	if m.Path == "" {
		return fmt.Errorf("%s: no module line", name)
	}
	if err := module.Check(m.Path, m.Version); err != nil {
		return err
	}
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(m.Version)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, escVersion)

	var zip bytes.Buffer
	if err := r.moduleZip(&zip, m, rel.Dir); err != nil {
		return fmt.Errorf("zip of %s: %w", m, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, r.time.UTC()})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{base + ".mod", mod}, {base + ".zip", zip.Bytes()}, {base + ".info", info}} {
		if err := os.WriteFile(f.name, f.data, 0o644); err != nil {
			return err
		}
	}
	return addToList(filepath.Join(dir, "list"), m.Version)
}

// addToList adds version to a proxy's list file, kept sorted and without
// repeats.
func addToList(file, version string) error {
	var versions []string
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	seen := map[string]bool{version: true}
	versions = append(versions, version)
	for _, v := range strings.Fields(string(data)) {
		if !seen[v] {
			seen[v] = true
			versions = append(versions, v)
		}
	}
	sort.Slice(versions, func(i, j int) bool { return semver.Compare(versions[i], versions[j]) < 0 })
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// git runs git in dir and returns what it printed; its error names the
// command and carries git's message.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
