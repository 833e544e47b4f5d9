package main

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// A release is one line of the versions file: a module's directory in the
// repository ("." for the root) and the version its next tag carries, empty
// for a module that is never published.
type release struct {
	Dir     string
	Version string
}

// parseVersions reads the versions file: one module a line, its directory
// then its version or "-"; blank lines and text after # are ignored.
func parseVersions(text string) ([]release, error) {
	var rs []release
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want a directory and a version, got %q", i+1, line)
		}
		dir := path.Clean(f[0])
		if path.IsAbs(dir) || dir == ".." || strings.HasPrefix(dir, "../") {
			return nil, fmt.Errorf("line %d: directory %q is not inside the repository", i+1, f[0])
		}
		if seen[dir] {
			return nil, fmt.Errorf("line %d: directory %q listed twice", i+1, dir)
		}
		seen[dir] = true
		r := release{Dir: dir}
		if f[1] != "-" {
			if !semver.IsValid(f[1]) || semver.Canonical(f[1]) != f[1] || semver.Build(f[1]) != "" {
				return nil, fmt.Errorf("line %d: %q is not a release version (vX.Y.Z)", i+1, f[1])
			}
			r.Version = f[1]
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, errors.New("lists no module")
	}
	return rs, nil
}

// checkModules checks the repository's go.mod files (by directory) against
// the releases: every go.mod is listed and every listed module has one, none
// has a replace directive, a published module's path agrees with its
// version's major version, and a requirement of a module of the repository
// names exactly its listed version (never a placeholder pseudo-version). It
// returns every problem found, joined.
func checkModules(releases []release, goMods map[string][]byte) error {
	var errs []error
	byPath := map[string]release{}
	paths := map[string]string{} // dir -> module path
	for _, r := range releases {
		data, ok := goMods[r.Dir]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: listed in the versions file but has no go.mod", r.Dir))
			continue
		}
		mp := modfile.ModulePath(data)
		if mp == "" {
			errs = append(errs, fmt.Errorf("%s/go.mod: no module line", r.Dir))
			continue
		}
		paths[r.Dir] = mp
		byPath[mp] = r
		if r.Version != "" {
			if err := module.Check(mp, r.Version); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.Dir, err))
			}
		}
	}
	dirs := make([]string, 0, len(goMods))
	for dir := range goMods {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		name := path.Join(dir, "go.mod")
		if _, ok := paths[dir]; !ok {
			if _, listed := byPath[modfile.ModulePath(goMods[dir])]; !listed {
				errs = append(errs, fmt.Errorf("%s: module not listed in the versions file", name))
			}
			continue
		}
		f, err := modfile.Parse(name, goMods[dir], nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range f.Replace {
			errs = append(errs, fmt.Errorf("%s:%d: replace %s: the repository's modules are joined by go.work, not replace", name, r.Syntax.Start.Line, r.Old.Path))
		}
		for _, req := range f.Require {
			want, ours := byPath[req.Mod.Path]
			if !ours {
				if root, ok := paths["."]; ok && strings.HasPrefix(req.Mod.Path, root+"/") {
					errs = append(errs, fmt.Errorf("%s:%d: requires %s, which is no module of the versions file", name, req.Syntax.Start.Line, req.Mod.Path))
				}
				continue
			}
			if want.Version == "" {
				errs = append(errs, fmt.Errorf("%s:%d: requires %s, which is never published", name, req.Syntax.Start.Line, req.Mod.Path))
			} else if req.Mod.Version != want.Version {
				errs = append(errs, fmt.Errorf("%s:%d: requires %s %s; the versions file gives %s", name, req.Syntax.Start.Line, req.Mod.Path, req.Mod.Version, want.Version))
			}
		}
	}
	return errors.Join(errs...)
}
