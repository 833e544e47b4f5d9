package main

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/mod/modfile"
)

// checkWork checks go.work against the releases and the go.mod files (by
// directory): it uses every module, and its only replaces are the versioned
// ones that point a module's listed version, required by another module of
// the repository, at that module's own directory (the go command reads the
// go.mod of a required version even of a workspace module, golang/go#54264).
func checkWork(releases []release, goMods map[string][]byte, work []byte) error {
	f, err := modfile.ParseWork("go.work", work, nil)
	if err != nil {
		return err
	}
	var errs []error
	used := map[string]bool{}
	for _, u := range f.Use {
		used[path.Clean(u.Path)] = true
	}
	byPath := map[string]release{}
	for _, r := range releases {
		if !used[r.Dir] {
			errs = append(errs, fmt.Errorf("go.work: does not use %s", r.Dir))
		}
		if mp := modfile.ModulePath(goMods[r.Dir]); mp != "" {
			byPath[mp] = r
		}
	}
	required := map[string]bool{} // module paths another module requires
	for _, data := range goMods {
		mf, err := modfile.ParseLax("go.mod", data, nil)
		if err != nil {
			continue // checkModules reports it
		}
		for _, req := range mf.Require {
			if _, ok := byPath[req.Mod.Path]; ok {
				required[req.Mod.Path] = true
			}
		}
	}
	replaced := map[string]bool{}
	for _, rep := range f.Replace {
		r, ours := byPath[rep.Old.Path]
		target := path.Clean(strings.TrimPrefix(rep.New.Path, "./"))
		switch {
		case !ours:
			errs = append(errs, fmt.Errorf("go.work:%d: replaces %s, which is not a module of the repository", rep.Syntax.Start.Line, rep.Old.Path))
		case rep.Old.Version != r.Version || rep.New.Version != "" || target != r.Dir:
			errs = append(errs, fmt.Errorf("go.work:%d: want replace %s %s => ./%s", rep.Syntax.Start.Line, rep.Old.Path, r.Version, r.Dir))
		default:
			replaced[rep.Old.Path] = true
		}
	}
	for mp := range required {
		if !replaced[mp] {
			errs = append(errs, fmt.Errorf("go.work: want replace %s %s => ./%s", mp, byPath[mp].Version, byPath[mp].Dir))
		}
	}
	return errors.Join(errs...)
}
